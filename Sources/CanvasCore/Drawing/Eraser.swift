/// How the eraser removes ink.
public enum EraseMode: String, Codable, Sendable, CaseIterable {
    /// Every stroke the eraser touches goes, whole (PencilKit's object eraser).
    case stroke
    /// Only the ink under the eraser goes; a stroke crossed in the middle splits in two.
    case partial
}

/// One eraser touch: a disc at (x, y) with a radius, in display points.
public struct EraseRequest: Hashable, Sendable, Codable {
    public let x: Double
    public let y: Double
    public let radius: Double
    public let mode: EraseMode

    public init(x: Double, y: Double, radius: Double, mode: EraseMode) throws(DrawingValidationError) {
        try DrawingLimits.check(x, "x", in: DrawingLimits.coordinate)
        try DrawingLimits.check(y, "y", in: DrawingLimits.coordinate)
        try DrawingLimits.check(radius, "radius", in: DrawingLimits.eraserRadius)
        self.x = x
        self.y = y
        self.radius = radius
        self.mode = mode
    }

    private enum CodingKeys: String, CodingKey { case x, y, radius, mode }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        let (x, y) = (try container.decode(Double.self, forKey: .x), try container.decode(Double.self, forKey: .y))
        let radius = try container.decode(Double.self, forKey: .radius)
        let mode = try container.decode(EraseMode.self, forKey: .mode)
        self = try decoder.validated { try EraseRequest(x: x, y: y, radius: radius, mode: mode) }
    }
}

extension Drawing {
    /// The drawing after one eraser touch, and how many strokes it removed or cut.
    ///
    /// The eraser reaches ink, not just the centre line: a stroke is touched where its centre
    /// line comes within `radius + width / 2` of the eraser's centre. Texts are not ink and
    /// are left alone. Strokes the eraser does not touch are kept exactly as they were.
    public func erasing(_ request: EraseRequest) -> (drawing: Drawing, touched: Int) {
        var kept: [Stroke] = []
        var touched = 0
        for stroke in strokes {
            let eraser = EraserDisc(x: request.x, y: request.y, reach: request.radius + stroke.width / 2)
            guard eraser.touches(stroke.points) else {
                kept.append(stroke)
                continue
            }
            touched += 1
            if request.mode == .partial {
                kept += eraser.piecesOutside(stroke.points).map(stroke.withPoints)
            }
        }
        return (Drawing(strokes: kept, texts: texts), touched)
    }
}

/// The geometry of one eraser touch against one stroke's centre line.
struct EraserDisc {
    let x: Double
    let y: Double
    let reach: Double

    // Below this, a cut parameter is taken as the segment's end: it keeps rounding noise
    // from producing pieces a billionth of a segment long.
    private static let epsilon = 1e-9

    func contains(_ point: InkPoint) -> Bool {
        let dx = point.x - x, dy = point.y - y
        return dx * dx + dy * dy <= reach * reach
    }

    func touches(_ points: [InkPoint]) -> Bool {
        if points.count == 1 { return contains(points[0]) }
        for index in points.indices.dropLast() where insideInterval(points[index], points[index + 1]) != nil {
            return true
        }
        return false
    }

    /// The part of segment a→b inside the disc, as parameters 0...1 along it, or nil.
    func insideInterval(_ a: InkPoint, _ b: InkPoint) -> ClosedRange<Double>? {
        let dx = b.x - a.x, dy = b.y - a.y
        let fx = a.x - x, fy = a.y - y
        let qa = dx * dx + dy * dy
        let qc = fx * fx + fy * fy - reach * reach
        if qa == 0 { return qc <= 0 ? 0...1 : nil }
        let qb = 2 * (fx * dx + fy * dy)
        let discriminant = qb * qb - 4 * qa * qc
        guard discriminant >= 0 else { return nil }
        let root = discriminant.squareRoot()
        let enter = max(0, (-qb - root) / (2 * qa))
        let leave = min(1, (-qb + root) / (2 * qa))
        guard enter <= leave else { return nil }
        return (enter <= Self.epsilon ? 0 : enter)...(leave >= 1 - Self.epsilon ? 1 : leave)
    }

    /// The runs of the centre line that lie outside the disc, each as the points of a new
    /// stroke. Cut points are placed exactly on the disc's edge, pressure interpolated.
    func piecesOutside(_ points: [InkPoint]) -> [[InkPoint]] {
        if points.count == 1 { return contains(points[0]) ? [] : [points] }
        var pieces: [[InkPoint]] = []
        var current: [InkPoint] = contains(points[0]) ? [] : [points[0]]
        for index in points.indices.dropLast() {
            let a = points[index], b = points[index + 1]
            guard let inside = insideInterval(a, b) else {
                if current.isEmpty { current = [a] }
                current.append(b)
                continue
            }
            if inside.lowerBound > 0 {
                if current.isEmpty { current = [a] }
                current.append(Self.interpolate(a, b, inside.lowerBound))
            }
            if !current.isEmpty { pieces.append(current) }
            current = inside.upperBound < 1 ? [Self.interpolate(a, b, inside.upperBound), b] : []
        }
        if !current.isEmpty { pieces.append(current) }
        return pieces
    }

    static func interpolate(_ a: InkPoint, _ b: InkPoint, _ t: Double) -> InkPoint {
        let pressure: Double?
        switch (a.pressure, b.pressure) {
        case let (pa?, pb?): pressure = lerp(pa, pb, t, within: DrawingLimits.pressure)
        case let (pa, pb): pressure = pa ?? pb
        }
        let bounds = DrawingLimits.coordinate
        return try! InkPoint(x: lerp(a.x, b.x, t, within: bounds), y: lerp(a.y, b.y, t, within: bounds), pressure: pressure)
    }

    // Both ends are in range and t is in 0...1; the clamp only absorbs rounding at the bounds.
    private static func lerp(_ a: Double, _ b: Double, _ t: Double, within range: ClosedRange<Double>) -> Double {
        min(max(a + (b - a) * t, range.lowerBound), range.upperBound)
    }
}
