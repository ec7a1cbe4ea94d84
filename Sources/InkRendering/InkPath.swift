/// A point in display points (origin top-left, y down).
public struct InkVector: Equatable, Sendable {
    public var x: Double
    public var y: Double

    public init(_ x: Double, _ y: Double) {
        self.x = x
        self.y = y
    }

    static func + (a: InkVector, b: InkVector) -> InkVector { InkVector(a.x + b.x, a.y + b.y) }
    static func - (a: InkVector, b: InkVector) -> InkVector { InkVector(a.x - b.x, a.y - b.y) }
    static func * (a: InkVector, s: Double) -> InkVector { InkVector(a.x * s, a.y * s) }
    static prefix func - (a: InkVector) -> InkVector { InkVector(-a.x, -a.y) }

    func dot(_ other: InkVector) -> Double { x * other.x + y * other.y }
    func cross(_ other: InkVector) -> Double { x * other.y - y * other.x }
    var length: Double { (x * x + y * y).squareRoot() }
    /// This vector scaled to length 1, or nil when it is (nearly) zero.
    var unit: InkVector? {
        let l = length
        return l > 1e-12 ? self * (1 / l) : nil
    }
    /// Turned a quarter to the left of the direction of travel, as drawn with y down.
    var left: InkVector { InkVector(y, -x) }

    /// Rounded to a multiple of `quantum`.
    func snapped(_ quantum: Double) -> InkVector { InkVector((x / quantum).rounded() * quantum, (y / quantum).rounded() * quantum) }
}

/// A path as PDF and Cairo both draw it: subpaths of lines and cubic Béziers.
public struct InkPath: Equatable, Sendable {
    public enum Element: Equatable, Sendable {
        case move(InkVector)
        case line(InkVector)
        case curve(InkVector, InkVector, InkVector)
        case close
    }

    public var elements: [Element] = []

    public init() {}

    mutating func move(to p: InkVector) { elements.append(.move(p)) }
    mutating func line(to p: InkVector) { elements.append(.line(p)) }
    mutating func curve(_ c1: InkVector, _ c2: InkVector, _ to: InkVector) { elements.append(.curve(c1, c2, to)) }
    mutating func close() { elements.append(.close) }

    /// The number of segments: what the path costs to write.
    public var segmentCount: Int { elements.count }

    /// The grid a pen outline's coordinates lie on: a power of two, a 128th of the width or
    /// finer, at most 1/32 pt (an eighth of a pixel at 288 dpi). The PDF gets them as whole
    /// multiples of it.
    public var quantum: Double = 1

    /// Every point rounded to a multiple of `quantum`.
    func snapped(_ quantum: Double) -> InkPath {
        var out = InkPath()
        out.quantum = quantum
        out.elements = elements.map { element in
            switch element {
            case .move(let p): .move(p.snapped(quantum))
            case .line(let p): .line(p.snapped(quantum))
            case .curve(let a, let b, let c): .curve(a.snapped(quantum), b.snapped(quantum), c.snapped(quantum))
            case .close: .close
            }
        }
        return out
    }
}

/// One cubic Bézier segment.
struct Cubic: Equatable {
    var p0, c1, c2, p3: InkVector

    func point(at t: Double) -> InkVector {
        let s = 1 - t
        return p0 * (s * s * s) + c1 * (3 * s * s * t) + c2 * (3 * s * t * t) + p3 * (t * t * t)
    }

    func derivative(at t: Double) -> InkVector {
        let s = 1 - t
        return (c1 - p0) * (3 * s * s) + (c2 - c1) * (6 * s * t) + (p3 - c2) * (3 * t * t)
    }

    func secondDerivative(at t: Double) -> InkVector {
        (c2 - c1 * 2 + p0) * (6 * (1 - t)) + (p3 - c2 * 2 + c1) * (6 * t)
    }

    func snapped(_ quantum: Double) -> Cubic {
        Cubic(p0: p0.snapped(quantum), c1: c1.snapped(quantum), c2: c2.snapped(quantum), p3: p3.snapped(quantum))
    }

    /// The curve cut at t = ½ (de Casteljau).
    var halves: (Cubic, Cubic) {
        let a = (p0 + c1) * 0.5, b = (c1 + c2) * 0.5, c = (c2 + p3) * 0.5
        let ab = (a + b) * 0.5, bc = (b + c) * 0.5, middle = (ab + bc) * 0.5
        return (Cubic(p0: p0, c1: a, c2: ab, p3: middle), Cubic(p0: middle, c1: bc, c2: c, p3: p3))
    }

    /// A straight segment as a cubic (control points at its thirds).
    static func line(_ a: InkVector, _ b: InkVector) -> Cubic {
        Cubic(p0: a, c1: a + (b - a) * (1.0 / 3), c2: a + (b - a) * (2.0 / 3), p3: b)
    }
}
