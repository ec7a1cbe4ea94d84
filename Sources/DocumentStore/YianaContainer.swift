public import CanvasProtocol
public import Foundation
public import SystemPackage

/// The `.yianazip` layout: metadata JSON, the four bytes `FF FF FF FF`, then the PDF.
///
/// UTF-8 never contains 0xFF, so the first run of four is the separator.
public enum YianaContainer {
    public static let separator: [UInt8] = [0xFF, 0xFF, 0xFF, 0xFF]
    /// Metadata larger than this is taken as a damaged file rather than read without end.
    static let maxMetadataBytes = 16 << 20

    public struct Header: Sendable {
        public var metadata: [String: JSONValue]
        /// The metadata exactly as the file has it, for saves that must keep what they do not change.
        public var metadataText: [UInt8]
        /// Where the PDF starts.
        public var pdfOffset: Int64
    }

    public enum ContainerError: Error, Sendable, CustomStringConvertible {
        case noSeparator
        case metadata(String)
        case read(Errno)

        public var description: String {
            switch self {
            case .noSeparator: return "no FF FF FF FF separator after the metadata"
            case .metadata(let why): return "the metadata is not a JSON object: \(why)"
            case .read(let error): return "read the container: \(error)"
            }
        }
    }

    /// Reads the header of the container open on `file`, from its start. Reads at offsets
    /// (`pread`), so the descriptor's position, which a duplicate may share, is left alone.
    public static func readHeader(_ file: FileDescriptor) throws(ContainerError) -> Header {
        var buffer: [UInt8] = []
        var searched = 0
        var chunk = [UInt8](repeating: 0, count: 64 << 10)
        while buffer.count < maxMetadataBytes {
            let offset = Int64(buffer.count)
            let count: Int
            do {
                count = try file.read(at: offset, into: &chunk)
            } catch {
                throw .read(error)
            }
            if count == 0 { break }
            buffer += chunk[0..<count]
            // A separator may straddle two chunks: look again from a little before.
            if let at = find(separator, in: buffer, from: max(0, searched - 3)) {
                let json = Array(buffer[..<at])
                let parsed: JSONValue
                do {
                    parsed = try JSONCodec.parse(json)
                } catch {
                    throw .metadata("\(error)")
                }
                guard case .object(let metadata) = parsed else { throw .metadata("not an object") }
                return Header(metadata: metadata, metadataText: json, pdfOffset: Int64(at + separator.count))
            }
            searched = buffer.count
        }
        throw .noSeparator
    }

    static func find(_ needle: [UInt8], in haystack: [UInt8], from start: Int) -> Int? {
        guard haystack.count >= needle.count else { return nil }
        var index = start
        while index <= haystack.count - needle.count {
            if haystack[index] == needle[0] && Array(haystack[index..<(index + needle.count)]) == needle { return index }
            index += 1
        }
        return nil
    }

    /// The metadata after a save that put ink on the document: `modified`, `page_count` and
    /// `markup` updated, and every other byte of `text` kept as it was (key order, spacing,
    /// numbers too large for any integer type). Dates keep the form they had: a number stays
    /// seconds since 2001 (as Swift's JSONEncoder writes dates), a string becomes ISO 8601.
    public static func updated(_ header: Header, pageCount: Int, now: Date) -> [UInt8] {
        let metadata = header.metadata
        let date: JSONValue
        if case .string? = metadata["modified"] {
            date = .string(ISO8601DateFormatter().string(from: now))
        } else if metadata["modified"]?.doubleValue != nil {
            date = .number(now.timeIntervalSinceReferenceDate)
        } else {
            date = .string(ISO8601DateFormatter().string(from: now))
        }
        let markup: [UInt8]
        let markupEdits: [(String, [UInt8])] = [
            ("has_markup", JSONCodec.serialize(true)),
            ("last_markup_date", JSONCodec.serialize(date)),
            ("markup_count", JSONCodec.serialize(.integer(nextCount(metadata["markup"]?["markup_count"])))),
        ]
        if case .object? = metadata["markup"], let range = ObjectText.members(header.metadataText)?.members.last(where: { $0.key == "markup" })?.value {
            markup = ObjectText.replacing(Array(header.metadataText[range]), markupEdits)
        } else {
            markup = ObjectText.replacing(Array("{}".utf8), markupEdits)
        }
        return ObjectText.replacing(header.metadataText, [
            ("modified", JSONCodec.serialize(date)),
            ("page_count", JSONCodec.serialize(.integer(Int64(pageCount)))),
            ("markup", markup),
        ])
    }

    /// One more than a stored count, saturating at the largest integer; a count that is missing,
    /// negative or not a whole number starts again at 1.
    public static func nextCount(_ stored: JSONValue?) -> Int64 {
        switch stored {
        case .integer(let count) where count >= 0: return count == .max ? .max : count + 1
        case .number(let count) where count >= 9.2e18: return .max
        case .number(let count) where count >= 0 && count.rounded() == count: return Int64(count) + 1
        default: return 1
        }
    }
}

/// Edits of a JSON object's text that leave every byte they do not change where it was.
enum ObjectText {
    /// The top-level members of a valid JSON object's text: each key and its value's bytes.
    static func members(_ text: [UInt8]) -> (members: [(key: String, value: Range<Int>)], end: Int)? {
        var index = 0
        func skipSpace() { while index < text.count, [0x20, 0x09, 0x0A, 0x0D].contains(text[index]) { index += 1 } }
        // Moves past the string starting at `index`.
        func skipString() {
            index += 1
            while index < text.count, text[index] != 0x22 { index += text[index] == 0x5C ? 2 : 1 }
            index += 1
        }
        // Moves past the value starting at `index`: a string, a nested object or array, or a
        // scalar (which ends at a comma, a brace or white space).
        func skipValue() {
            var depth = 0
            while index < text.count {
                switch text[index] {
                case 0x22:
                    skipString()
                    if depth == 0 { return }
                    continue
                case 0x7B, 0x5B:
                    depth += 1
                case 0x7D, 0x5D:
                    if depth == 0 { return }
                    depth -= 1
                    if depth == 0 { index += 1; return }
                case 0x2C, 0x20, 0x09, 0x0A, 0x0D:
                    if depth == 0 { return }
                default:
                    break
                }
                index += 1
            }
        }
        skipSpace()
        guard index < text.count, text[index] == 0x7B else { return nil }
        index += 1
        var members: [(key: String, value: Range<Int>)] = []
        while true {
            skipSpace()
            guard index < text.count else { return nil }
            if text[index] == 0x7D { return (members, index) }
            if text[index] == 0x2C { index += 1; continue }
            let keyStart = index
            skipString()
            guard case .string(let key)? = try? JSONCodec.parse(Array(text[keyStart..<min(index, text.count)])) else { return nil }
            skipSpace()
            guard index < text.count, text[index] == 0x3A else { return nil }
            index += 1
            skipSpace()
            let valueStart = index
            skipValue()
            members.append((key, valueStart..<index))
        }
    }

    /// `text` (an object) with each named member's value replaced, or the member added at the
    /// end when it has none.
    static func replacing(_ text: [UInt8], _ edits: [(String, [UInt8])]) -> [UInt8] {
        guard let (members, end) = members(text) else { return text }
        var replacements: [(range: Range<Int>, bytes: [UInt8])] = []
        var additions: [UInt8] = []
        var count = members.count
        for (key, value) in edits {
            let ranges = members.filter { $0.key == key }.map(\.value)
            if ranges.isEmpty {
                additions += Array((count == 0 ? "" : ",").utf8) + JSONCodec.serialize(.string(key)) + Array(":".utf8) + value
                count += 1
            } else {
                replacements += ranges.map { ($0, value) }
            }
        }
        var result = text
        replacements.append((end..<end, additions))
        for edit in replacements.sorted(by: { $0.range.lowerBound > $1.range.lowerBound }) {
            result.replaceSubrange(edit.range, with: edit.bytes)
        }
        return result
    }
}
