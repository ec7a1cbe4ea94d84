/// A colour as the client wrote it: a named colour or `#RRGGBB`.
///
/// The spelling is kept exactly, so `drawing.get` returns what was drawn; `rgb` gives the value.
public struct InkColor: Hashable, Sendable, Codable, CustomStringConvertible {
    public let rawValue: String
    public let red: UInt8
    public let green: UInt8
    public let blue: UInt8

    /// The named colours a client may use instead of `#RRGGBB`, with CSS's values, so ink a
    /// web page draws with `color: blue` is the blue it flattens as (not Apple's system blue).
    public static let named: [String: (UInt8, UInt8, UInt8)] = [
        "black": (0x00, 0x00, 0x00),
        "blue": (0x00, 0x00, 0xFF),
        "red": (0xFF, 0x00, 0x00),
        "purple": (0x80, 0x00, 0x80),
        "green": (0x00, 0x80, 0x00),
        "yellow": (0xFF, 0xFF, 0x00),
        "orange": (0xFF, 0xA5, 0x00),
        "white": (0xFF, 0xFF, 0xFF),
    ]

    public init(_ rawValue: String) throws(DrawingValidationError) {
        if let rgb = Self.named[rawValue] {
            (red, green, blue) = rgb
        } else if let rgb = Self.parseHex(rawValue) {
            (red, green, blue) = rgb
        } else {
            throw .invalidColor(rawValue)
        }
        self.rawValue = rawValue
    }

    public static let black = try! InkColor("black")

    public init(from decoder: any Decoder) throws {
        let raw = try decoder.singleValueContainer().decode(String.self)
        self = try decoder.validated { try InkColor(raw) }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }

    public var description: String { rawValue }

    private static func parseHex(_ text: String) -> (UInt8, UInt8, UInt8)? {
        let scalars = Array(text.unicodeScalars)
        guard scalars.count == 7, scalars[0] == "#" else { return nil }
        var bytes: [UInt8] = []
        for index in stride(from: 1, to: 7, by: 2) {
            guard let high = hexValue(scalars[index]), let low = hexValue(scalars[index + 1]) else { return nil }
            bytes.append(high << 4 | low)
        }
        return (bytes[0], bytes[1], bytes[2])
    }

    private static func hexValue(_ scalar: Unicode.Scalar) -> UInt8? {
        switch scalar {
        case "0"..."9": return UInt8(scalar.value - 48)
        case "a"..."f": return UInt8(scalar.value - 87)
        case "A"..."F": return UInt8(scalar.value - 55)
        default: return nil
        }
    }

    public static func == (lhs: InkColor, rhs: InkColor) -> Bool { lhs.rawValue == rhs.rawValue }
    public func hash(into hasher: inout Hasher) { hasher.combine(rawValue) }
}
