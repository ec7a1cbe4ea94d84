/// A stroke as a snapshot keeps it: its points as one base64 string of their IEEE-754 bit
/// patterns (x, y, pressure, little-endian; NaN pressure for none) instead of three JSON
/// numbers each, so that writing a session out costs a few encoder calls per stroke rather than
/// several per point, and reading it back gives the very same doubles.
struct StrokeArchive: Codable {
    var tool: InkTool
    var color: InkColor
    var width: Double
    var points: String

    init(_ stroke: Stroke) {
        tool = stroke.tool
        color = stroke.color
        width = stroke.width
        var bytes: [UInt8] = []
        bytes.reserveCapacity(stroke.points.count * 24)
        for point in stroke.points {
            for value in [point.x, point.y, point.pressure ?? .nan] {
                var bits = value.bitPattern
                for _ in 0..<8 {
                    bytes.append(UInt8(truncatingIfNeeded: bits))
                    bits >>= 8
                }
            }
        }
        points = Base64.encode(bytes)
    }

    func stroke() throws -> Stroke {
        guard let bytes = Base64.decode(points), bytes.count % 24 == 0 else { throw DrawingValidationError.emptyPoints }
        var points: [InkPoint] = []
        points.reserveCapacity(bytes.count / 24)
        var offset = 0
        func double() -> Double {
            var bits: UInt64 = 0
            for index in (0..<8).reversed() { bits = bits << 8 | UInt64(bytes[offset + index]) }
            offset += 8
            return Double(bitPattern: bits)
        }
        while offset < bytes.count {
            let x = double(), y = double(), pressure = double()
            points.append(try InkPoint(x: x, y: y, pressure: pressure.isNaN ? nil : pressure))
        }
        return try Stroke(tool: tool, color: color, width: width, points: points)
    }
}

/// Standard base64 with padding.
enum Base64 {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)
    private static let values: [UInt8] = {
        var table = [UInt8](repeating: 255, count: 256)
        for (index, character) in alphabet.enumerated() { table[Int(character)] = UInt8(index) }
        return table
    }()

    static func encode(_ bytes: [UInt8]) -> String {
        var out: [UInt8] = []
        out.reserveCapacity((bytes.count + 2) / 3 * 4)
        var index = 0
        while index < bytes.count {
            let b0 = UInt32(bytes[index])
            let b1 = index + 1 < bytes.count ? UInt32(bytes[index + 1]) : 0
            let b2 = index + 2 < bytes.count ? UInt32(bytes[index + 2]) : 0
            let group = b0 << 16 | b1 << 8 | b2
            out.append(alphabet[Int(group >> 18 & 63)])
            out.append(alphabet[Int(group >> 12 & 63)])
            out.append(index + 1 < bytes.count ? alphabet[Int(group >> 6 & 63)] : UInt8(ascii: "="))
            out.append(index + 2 < bytes.count ? alphabet[Int(group & 63)] : UInt8(ascii: "="))
            index += 3
        }
        return String(decoding: out, as: UTF8.self)
    }

    static func decode(_ text: String) -> [UInt8]? {
        let characters = Array(text.utf8)
        guard characters.count % 4 == 0 else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(characters.count / 4 * 3)
        var index = 0
        while index < characters.count {
            var group: UInt32 = 0
            var padding = 0
            for offset in 0..<4 {
                let character = characters[index + offset]
                if character == UInt8(ascii: "=") && offset >= 2 && index + 4 == characters.count {
                    padding += 1
                    group <<= 6
                    continue
                }
                guard padding == 0 else { return nil }
                let value = values[Int(character)]
                guard value != 255 else { return nil }
                group = group << 6 | UInt32(value)
            }
            out.append(UInt8(group >> 16 & 255))
            if padding < 2 { out.append(UInt8(group >> 8 & 255)) }
            if padding < 1 { out.append(UInt8(group & 255)) }
            index += 4
        }
        return out
    }
}
