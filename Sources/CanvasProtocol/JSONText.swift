/// JSON text written piece by piece, for a result whose keys the writer knows in the order
/// `JSONCodec.serialize` would put them: the same bytes, without building the object first.
/// The caller writes the punctuation and keys with `raw` (a static string's bytes, appended
/// at a fraction of the cost of a String's UTF-8 view); the values go through the codec's own
/// writers, so numbers and escapes come out exactly as `serialize` writes them.
public struct JSONText {
    public private(set) var bytes: [UInt8] = []

    public init(capacity: Int) { bytes.reserveCapacity(capacity) }

    /// Literal JSON text, copied as it is (keys, brackets, commas, fixed values).
    public mutating func raw(_ text: StaticString) {
        text.withUTF8Buffer { bytes.append(contentsOf: $0) }
    }

    public mutating func bool(_ value: Bool) { raw(value ? "true" : "false") }

    public mutating func integer(_ value: Int64) { JSONCodec.writeInteger(value, into: &bytes) }

    /// A string value, quoted and escaped.
    public mutating func string(_ value: String) { JSONCodec.writeString(value, into: &bytes) }

    /// Any value, as `JSONCodec.serialize` writes it.
    public mutating func value(_ value: JSONValue) { JSONCodec.append(value, to: &bytes) }

    /// A value already written as JSON text.
    public mutating func json(_ text: [UInt8]) { bytes.append(contentsOf: text) }
}
