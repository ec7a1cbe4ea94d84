import Foundation

/// A JSON document as a value. Integers are kept apart from other numbers so request ids
/// echo back exactly.
public enum JSONValue: Hashable, Sendable {
    case null
    case bool(Bool)
    case integer(Int64)
    case number(Double)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])

    public subscript(key: String) -> JSONValue? {
        if case .object(let object) = self { return object[key] }
        return nil
    }

    public var stringValue: String? { if case .string(let s) = self { s } else { nil } }
    public var objectValue: [String: JSONValue]? { if case .object(let o) = self { o } else { nil } }
    public var arrayValue: [JSONValue]? { if case .array(let a) = self { a } else { nil } }
    public var boolValue: Bool? { if case .bool(let b) = self { b } else { nil } }

    /// Any number, integer or not.
    public var doubleValue: Double? {
        switch self {
        case .integer(let i): return Double(i)
        case .number(let d): return d
        default: return nil
        }
    }

    /// A whole number, written as `3` or `3.0`.
    public var integerValue: Int64? {
        switch self {
        case .integer(let i): return i
        case .number(let d) where d.rounded() == d && abs(d) < 9e15: return Int64(d)
        default: return nil
        }
    }

    /// The JSON type's name, for error messages.
    public var typeName: String {
        switch self {
        case .null: return "null"
        case .bool: return "boolean"
        case .integer, .number: return "number"
        case .string: return "string"
        case .array: return "array"
        case .object: return "object"
        }
    }
}

extension JSONValue: Codable {
    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let bool = try? container.decode(Bool.self) {
            self = .bool(bool)
        } else if let integer = try? container.decode(Int64.self) {
            self = .integer(integer)
        } else if let number = try? container.decode(Double.self) {
            self = .number(number)
        } else if let string = try? container.decode(String.self) {
            self = .string(string)
        } else if let array = try? container.decode([JSONValue].self) {
            self = .array(array)
        } else {
            self = .object(try container.decode([String: JSONValue].self))
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .null: try container.encodeNil()
        case .bool(let b): try container.encode(b)
        case .integer(let i): try container.encode(i)
        case .number(let d): try container.encode(d)
        case .string(let s): try container.encode(s)
        case .array(let a): try container.encode(a)
        case .object(let o): try container.encode(o)
        }
    }
}

extension JSONValue: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByBooleanLiteral,
    ExpressibleByDictionaryLiteral, ExpressibleByArrayLiteral, ExpressibleByFloatLiteral, ExpressibleByNilLiteral
{
    public init(stringLiteral value: String) { self = .string(value) }
    public init(integerLiteral value: Int64) { self = .integer(value) }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(floatLiteral value: Double) { self = .number(value) }
    public init(nilLiteral: ()) { self = .null }
    public init(dictionaryLiteral elements: (String, JSONValue)...) {
        self = .object(Dictionary(elements, uniquingKeysWith: { _, last in last }))
    }
    public init(arrayLiteral elements: JSONValue...) { self = .array(elements) }
}

/// Reading and writing JSON bytes.
public enum JSONCodec {
    /// Parses one JSON document. Invalid UTF-8, trailing garbage, `NaN` and the like all fail.
    public static func parse(_ bytes: [UInt8]) throws -> JSONValue {
        try JSONParser.parse(bytes)
    }

    /// Parses a request frame: as `parse`, except that a number too large for a Double
    /// (`1e400`) becomes an infinity, which the params checks refuse as `INVALID_PARAMS`
    /// naming the field, in a reply that keeps the request's id.
    public static func parseRequest(_ bytes: [UInt8]) throws -> JSONValue {
        try JSONParser.parse(bytes, keepingOverflow: true)
    }

    /// Writes compact JSON with keys in sorted order, so equal values give equal bytes.
    public static func serialize(_ value: JSONValue) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(128)
        write(value, into: &out)
        return out
    }

    /// Appends `value` as `serialize` writes it, so that a caller can write an object whose
    /// keys it knows in sorted order without building the object first.
    public static func append(_ value: JSONValue, to out: inout [UInt8]) {
        write(value, into: &out)
    }

    /// Any Encodable value as a JSONValue (through JSONEncoder, so its own coding rules apply).
    public static func value(of encodable: some Encodable) throws -> JSONValue {
        try JSONParser.parse(Array(JSONEncoder().encode(encodable)))
    }

    /// Decodes a typed value from a JSONValue, running the type's own validation.
    /// An infinity (a request's `1e400`) is handed to the decoder as `1e400` again, so that
    /// a field the type reads fails as out of range, and one it does not know is skipped.
    public static func decode<T: Decodable>(_ type: T.Type, from value: JSONValue) throws -> T {
        var out: [UInt8] = []
        write(value, into: &out, infinityAsOverflow: true)
        return try JSONDecoder().decode(T.self, from: Data(out))
    }

    private static func write(_ value: JSONValue, into out: inout [UInt8], infinityAsOverflow: Bool = false) {
        switch value {
        case .null: out.append(contentsOf: "null".utf8)
        case .bool(let b): out.append(contentsOf: (b ? "true" : "false").utf8)
        case .integer(let i): writeInteger(i, into: &out)
        case .number(let d):
            if d.rounded() == d && abs(d) < 1e15 {
                writeInteger(Int64(d), into: &out)
            } else if d.isFinite {
                out.append(contentsOf: "\(d)".utf8)
            } else {
                // JSON has no infinity; values are validated before they reach a reply.
                out.append(contentsOf: (infinityAsOverflow && !d.isNaN ? (d < 0 ? "-1e400" : "1e400") : "null").utf8)
            }
        case .string(let s): writeString(s, into: &out)
        case .array(let array):
            out.append(UInt8(ascii: "["))
            for (index, element) in array.enumerated() {
                if index > 0 { out.append(UInt8(ascii: ",")) }
                write(element, into: &out, infinityAsOverflow: infinityAsOverflow)
            }
            out.append(UInt8(ascii: "]"))
        case .object(let object):
            out.append(UInt8(ascii: "{"))
            // Sorting the pairs, not the keys, spares a hash lookup per key.
            for (index, member) in object.sorted(by: { $0.key < $1.key }).enumerated() {
                if index > 0 { out.append(UInt8(ascii: ",")) }
                writeString(member.key, into: &out)
                out.append(UInt8(ascii: ":"))
                write(member.value, into: &out, infinityAsOverflow: infinityAsOverflow)
            }
            out.append(UInt8(ascii: "}"))
        }
    }

    /// The decimal digits, written in place: `String(i)` and a copy of it cost two allocations.
    static func writeInteger(_ value: Int64, into out: inout [UInt8]) {
        if value < 0 { out.append(UInt8(ascii: "-")) }
        var magnitude = value.magnitude
        guard magnitude >= 10 else {
            out.append(UInt8(ascii: "0") + UInt8(magnitude))
            return
        }
        var digits: (UInt64, UInt64, UInt64) = (0, 0, 0)   // 24 bytes: room for the 20 digits of UInt64.max
        var count = 0
        withUnsafeMutableBytes(of: &digits) { buffer in
            while magnitude > 0 {
                count += 1
                buffer[buffer.count - count] = UInt8(ascii: "0") + UInt8(magnitude % 10)
                magnitude /= 10
            }
            out.append(contentsOf: buffer[(buffer.count - count)...])
        }
    }

    private static let hex = Array("0123456789abcdef".utf8)

    static func writeString(_ string: String, into out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        // Most strings (keys, states, ids) need no escape: copy them whole.
        let copied = string.utf8.withContiguousStorageIfAvailable { bytes in
            for byte in bytes where byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") { return false }
            out.append(contentsOf: bytes)
            return true
        }
        if copied == true {
            out.append(UInt8(ascii: "\""))
            return
        }
        for byte in string.utf8 {
            switch byte {
            case UInt8(ascii: "\""): out += [UInt8(ascii: "\\"), UInt8(ascii: "\"")]
            case UInt8(ascii: "\\"): out += [UInt8(ascii: "\\"), UInt8(ascii: "\\")]
            case UInt8(ascii: "\n"): out += [UInt8(ascii: "\\"), UInt8(ascii: "n")]
            case UInt8(ascii: "\r"): out += [UInt8(ascii: "\\"), UInt8(ascii: "r")]
            case UInt8(ascii: "\t"): out += [UInt8(ascii: "\\"), UInt8(ascii: "t")]
            case 0..<0x20:
                out += Array("\\u00".utf8)
                out += [hex[Int(byte >> 4)], hex[Int(byte & 0xF)]]
            default: out.append(byte)
            }
        }
        out.append(UInt8(ascii: "\""))
    }
}
