import Foundation

/// Encodes an `Encodable` value as JSON straight into bytes, as it goes.
///
/// Foundation's `JSONEncoder` builds a tree of boxed values first and writes it after: for a
/// session snapshot (a drawing of a few hundred points, its history, the canvas machine) that
/// took most of a shared session's write, several times Redis's own round trip. Codable types
/// whose `encode(to:)` finish each container before going on to the next value (synthesized
/// conformances all do, and every type of this project's) can be written in one pass instead:
/// a container is closed when something is next written outside it, or at the end.
///
/// What it writes, `JSONDecoder` reads back to the same value: objects for keyed containers
/// (keys as their `stringValue`), arrays for unkeyed ones, numbers written so that they parse
/// back to the same bits, `Data` as base64 and `URL` as its text, as `JSONEncoder`'s defaults do.
/// A non-finite number is refused, as `JSONEncoder` refuses it.
public enum StreamingJSONEncoder {
    /// `userInfo`: what every `Encoder` it makes gives its values (`Encoder.userInfo`).
    public static func encode(_ value: some Encodable, userInfo: [CodingUserInfoKey: Any] = [:]) throws -> [UInt8] {
        let writer = Writer()
        writer.userInfo = userInfo
        writer.bytes.reserveCapacity(4096)
        try writer.write(value, depth: 0, path: [])
        writer.close(deeperThan: 0)
        return writer.bytes
    }

    /// The output and the containers still open in it, innermost last.
    fileprivate final class Writer {
        var bytes: [UInt8] = []
        var open: [(closer: UInt8, elements: Int)] = []
        var userInfo: [CodingUserInfoKey: Any] = [:]

        func close(deeperThan depth: Int) {
            while open.count > depth { bytes.append(open.removeLast().closer) }
        }

        /// Starts an element of the container at `depth` (1: the outermost): closes what was
        /// opened inside it since, then a comma and the key as needed.
        func element(in depth: Int, key: String?) {
            close(deeperThan: depth)
            if open[depth - 1].elements > 0 { bytes.append(UInt8(ascii: ",")) }
            open[depth - 1].elements += 1
            if let key {
                JSONCodec.writeString(key, into: &bytes)
                bytes.append(UInt8(ascii: ":"))
            }
        }

        /// Opens a container for a value whose own place starts at `depth`.
        func begin(_ opener: UInt8, _ closer: UInt8, at depth: Int) {
            close(deeperThan: depth)
            bytes.append(opener)
            open.append((closer, 0))
        }

        func write(_ value: some Encodable, depth: Int, path: [any CodingKey]) throws {
            switch value {
            case let string as String: JSONCodec.writeString(string, into: &bytes)
            case let bool as Bool: bytes.append(contentsOf: (bool ? "true" : "false").utf8)
            case let number as Double: try writeDouble(number, path)
            case let number as Float: try writeFloat(number, path)
            case let number as Int: JSONCodec.writeInteger(Int64(number), into: &bytes)
            case let number as Int64: JSONCodec.writeInteger(number, into: &bytes)
            case let number as UInt64: writeInteger(number)
            case let data as Data: JSONCodec.writeString(data.base64EncodedString(), into: &bytes)
            case let url as URL: JSONCodec.writeString(url.absoluteString, into: &bytes)
            default:
                let encoder = StreamingEncoder(writer: self, depth: depth, codingPath: path)
                try value.encode(to: encoder)
                if !encoder.wrote {
                    // A type that encoded nothing is an empty object, as JSONEncoder writes it.
                    bytes.append(contentsOf: "{}".utf8)
                }
            }
        }

        func writeDouble(_ number: Double, _ path: [any CodingKey]) throws {
            guard number.isFinite else {
                throw EncodingError.invalidValue(number, .init(codingPath: path, debugDescription: "\(number) is not a JSON number"))
            }
            if number.rounded() == number && abs(number) < 1e15 {
                // A whole number as JSONEncoder writes it: without a fraction ("-0" keeps its sign).
                if number == 0 && number.sign == .minus {
                    bytes.append(contentsOf: "-0".utf8)
                } else {
                    JSONCodec.writeInteger(Int64(number), into: &bytes)
                }
            } else {
                // Swift's description is the shortest text that reads back as the same Double.
                bytes.append(contentsOf: number.description.utf8)
            }
        }

        func writeFloat(_ number: Float, _ path: [any CodingKey]) throws {
            guard number.isFinite, number.rounded() != number else { return try writeDouble(Double(number), path) }
            // The shortest text that reads back as the same Float, as JSONEncoder writes it.
            bytes.append(contentsOf: number.description.utf8)
        }

        func writeInteger(_ number: some BinaryInteger) {
            if let small = Int64(exactly: number) {
                JSONCodec.writeInteger(small, into: &bytes)
            } else {
                bytes.append(contentsOf: String(number).utf8)
            }
        }
    }

    /// The encoder of one value: its containers start at `depth`.
    fileprivate final class StreamingEncoder: Encoder {
        let writer: Writer
        let depth: Int
        let codingPath: [any CodingKey]
        var userInfo: [CodingUserInfoKey: Any] { writer.userInfo }
        /// Whether a container was asked for (a second request for one gets the same).
        var wrote = false
        private var opened: (keyed: Bool, depth: Int)?

        init(writer: Writer, depth: Int, codingPath: [any CodingKey]) {
            self.writer = writer
            self.depth = depth
            self.codingPath = codingPath
        }

        private func openOnce(keyed: Bool) -> Int {
            wrote = true
            if let opened, opened.keyed == keyed, writer.open.count >= opened.depth { return opened.depth }
            writer.begin(keyed ? UInt8(ascii: "{") : UInt8(ascii: "["), keyed ? UInt8(ascii: "}") : UInt8(ascii: "]"), at: depth)
            opened = (keyed, depth + 1)
            return depth + 1
        }

        func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
            KeyedEncodingContainer(Keyed<Key>(writer: writer, depth: openOnce(keyed: true), codingPath: codingPath))
        }

        func unkeyedContainer() -> any UnkeyedEncodingContainer {
            Unkeyed(writer: writer, depth: openOnce(keyed: false), codingPath: codingPath)
        }

        func singleValueContainer() -> any SingleValueEncodingContainer {
            wrote = true
            return Single(writer: writer, depth: depth, codingPath: codingPath)
        }
    }

    fileprivate struct Keyed<Key: CodingKey>: KeyedEncodingContainerProtocol {
        let writer: Writer
        let depth: Int
        let codingPath: [any CodingKey]

        func encodeNil(forKey key: Key) throws {
            writer.element(in: depth, key: key.stringValue)
            writer.bytes.append(contentsOf: "null".utf8)
        }

        func encode<T: Encodable>(_ value: T, forKey key: Key) throws {
            writer.element(in: depth, key: key.stringValue)
            try writer.write(value, depth: depth, path: codingPath + [key])
        }

        func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type, forKey key: Key) -> KeyedEncodingContainer<NestedKey> {
            writer.element(in: depth, key: key.stringValue)
            writer.begin(UInt8(ascii: "{"), UInt8(ascii: "}"), at: depth)
            return KeyedEncodingContainer(Keyed<NestedKey>(writer: writer, depth: depth + 1, codingPath: codingPath + [key]))
        }

        func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
            writer.element(in: depth, key: key.stringValue)
            writer.begin(UInt8(ascii: "["), UInt8(ascii: "]"), at: depth)
            return Unkeyed(writer: writer, depth: depth + 1, codingPath: codingPath + [key])
        }

        func superEncoder() -> any Encoder { superEncoder(named: "super") }
        func superEncoder(forKey key: Key) -> any Encoder { superEncoder(named: key.stringValue) }

        private func superEncoder(named name: String) -> any Encoder {
            writer.element(in: depth, key: name)
            return StreamingEncoder(writer: writer, depth: depth, codingPath: codingPath)
        }
    }

    fileprivate struct Unkeyed: UnkeyedEncodingContainer {
        let writer: Writer
        let depth: Int
        let codingPath: [any CodingKey]
        var count: Int { writer.open.count >= depth ? writer.open[depth - 1].elements : 0 }

        func encodeNil() throws {
            writer.element(in: depth, key: nil)
            writer.bytes.append(contentsOf: "null".utf8)
        }

        func encode<T: Encodable>(_ value: T) throws {
            writer.element(in: depth, key: nil)
            try writer.write(value, depth: depth, path: codingPath)
        }

        func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type) -> KeyedEncodingContainer<NestedKey> {
            writer.element(in: depth, key: nil)
            writer.begin(UInt8(ascii: "{"), UInt8(ascii: "}"), at: depth)
            return KeyedEncodingContainer(Keyed<NestedKey>(writer: writer, depth: depth + 1, codingPath: codingPath))
        }

        func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer {
            writer.element(in: depth, key: nil)
            writer.begin(UInt8(ascii: "["), UInt8(ascii: "]"), at: depth)
            return Unkeyed(writer: writer, depth: depth + 1, codingPath: codingPath)
        }

        func superEncoder() -> any Encoder {
            writer.element(in: depth, key: nil)
            return StreamingEncoder(writer: writer, depth: depth, codingPath: codingPath)
        }
    }

    fileprivate struct Single: SingleValueEncodingContainer {
        let writer: Writer
        let depth: Int
        let codingPath: [any CodingKey]

        func encodeNil() throws { writer.bytes.append(contentsOf: "null".utf8) }
        func encode(_ value: Bool) throws { writer.bytes.append(contentsOf: (value ? "true" : "false").utf8) }
        func encode(_ value: String) throws { JSONCodec.writeString(value, into: &writer.bytes) }
        func encode(_ value: Double) throws { try writer.writeDouble(value, codingPath) }
        func encode(_ value: Float) throws { try writer.writeFloat(value, codingPath) }
        func encode(_ value: Int) throws { writer.writeInteger(value) }
        func encode(_ value: Int8) throws { writer.writeInteger(value) }
        func encode(_ value: Int16) throws { writer.writeInteger(value) }
        func encode(_ value: Int32) throws { writer.writeInteger(value) }
        func encode(_ value: Int64) throws { writer.writeInteger(value) }
        func encode(_ value: UInt) throws { writer.writeInteger(value) }
        func encode(_ value: UInt8) throws { writer.writeInteger(value) }
        func encode(_ value: UInt16) throws { writer.writeInteger(value) }
        func encode(_ value: UInt32) throws { writer.writeInteger(value) }
        func encode(_ value: UInt64) throws { writer.writeInteger(value) }
        func encode<T: Encodable>(_ value: T) throws { try writer.write(value, depth: depth, path: codingPath) }
    }
}
