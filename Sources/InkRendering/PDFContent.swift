/// PDF content-stream operators, written as text with the precision that shows: coordinates to
/// 0.01 pt, colour components to 0.001.
struct PDFContent {
    private(set) var bytes: [UInt8] = []

    mutating func number(_ value: Double, decimals: Int = 2) { DecimalText.append(value, decimals: decimals, to: &bytes) }

    mutating func point(_ p: InkVector) {
        number(p.x)
        space()
        number(p.y)
        space()
    }

    mutating func space() { bytes.append(UInt8(ascii: " ")) }

    /// An operator and the end of its line.
    mutating func op(_ name: String) {
        bytes.append(contentsOf: name.utf8)
        bytes.append(UInt8(ascii: "\n"))
    }

    mutating func path(_ path: InkPath) {
        for element in path.elements {
            switch element {
            case .move(let p): point(p); op("m")
            case .line(let p): point(p); op("l")
            case .curve(let c1, let c2, let p): point(c1); point(c2); point(p); op("c")
            case .close: op("h")
            }
        }
    }

    /// A path whose points lie on its `quantum`'s grid, as whole multiples of it from the
    /// corner of its bounds, inside `q … cm` that scales them back (the caller ends it with
    /// `Q`): "1234 567" instead of "301.27 512.44", a third fewer bytes for the same points.
    mutating func quantizedPath(_ path: InkPath) {
        let quantum = path.quantum
        var low = InkVector(Double.infinity, Double.infinity)
        for element in path.elements {
            switch element {
            case .move(let p), .line(let p): low = InkVector(min(low.x, p.x), min(low.y, p.y))
            case .curve(let a, let b, let c):
                low = InkVector(min(low.x, a.x, b.x, c.x), min(low.y, a.y, b.y, c.y))
            case .close: break
            }
        }
        guard low.x.isFinite else { return }
        let origin = InkVector((low.x / quantum).rounded(.down), (low.y / quantum).rounded(.down))
        // The quantum is a power of two and the origin a whole multiple of it: both print exactly.
        bytes.append(contentsOf: "q \(quantum) 0 0 \(quantum) \(origin.x * quantum) \(origin.y * quantum) cm\n".utf8)
        func point(_ p: InkVector) {
            integer(Int((p.x / quantum).rounded() - origin.x))
            space()
            integer(Int((p.y / quantum).rounded() - origin.y))
            space()
        }
        for element in path.elements {
            switch element {
            case .move(let p): point(p); op("m")
            case .line(let p): point(p); op("l")
            case .curve(let a, let b, let c): point(a); point(b); point(c); op("c")
            case .close: op("h")
            }
        }
    }

    private mutating func integer(_ value: Int) {
        if value < 0 { bytes.append(UInt8(ascii: "-")) }
        bytes.append(contentsOf: String(abs(value)).utf8)
    }

    mutating func color(_ red: UInt8, _ green: UInt8, _ blue: UInt8, stroking: Bool) {
        for component in [red, green, blue] {
            number(Double(component) / 255, decimals: 3)
            space()
        }
        op(stroking ? "RG" : "rg")
    }
}

/// Numbers as short decimal text: `decimals` places (2 or 3) at most, no trailing zeros, no
/// leading zero ("-.5", "12.25", "3"). Valid in PDF content and in JSON alike, except that JSON
/// wants the leading zero: `json` puts it back.
enum DecimalText {
    static func append(_ value: Double, decimals: Int, json: Bool = false, to bytes: inout [UInt8]) {
        let scale = decimals == 3 ? 1000 : 100
        var scaled = Int((value * Double(scale)).rounded())
        if scaled < 0 {
            bytes.append(UInt8(ascii: "-"))
            scaled = -scaled
        }
        let whole = scaled / scale
        var fraction = scaled % scale
        if whole > 0 || fraction == 0 || json { digits(whole, to: &bytes) }
        guard fraction > 0 else { return }
        bytes.append(UInt8(ascii: "."))
        var width = decimals
        while fraction % 10 == 0 {
            fraction /= 10
            width -= 1
        }
        // Leading zeros of the fraction ("0.05").
        var magnitude = 1
        for _ in 1..<width { magnitude *= 10 }
        while magnitude > fraction {
            bytes.append(UInt8(ascii: "0"))
            magnitude /= 10
        }
        digits(fraction, to: &bytes)
    }

    private static func digits(_ value: Int, to bytes: inout [UInt8]) {
        if value >= 10 { digits(value / 10, to: &bytes) }
        bytes.append(UInt8(ascii: "0") + UInt8(value % 10))
    }
}
