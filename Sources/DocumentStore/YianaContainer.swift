public import CanvasProtocol
public import Foundation

/// The `.yianazip` layout: metadata JSON, the four bytes `FF FF FF FF`, then the PDF.
///
/// UTF-8 never contains 0xFF, so the first run of four is the separator.
public enum YianaContainer {
    public static let separator: [UInt8] = [0xFF, 0xFF, 0xFF, 0xFF]
    /// Metadata larger than this is taken as a damaged file rather than read without end.
    static let maxMetadataBytes = 16 << 20

    public struct Header: Sendable {
        public var metadata: [String: JSONValue]
        /// Where the PDF starts.
        public var pdfOffset: Int64
    }

    public enum ContainerError: Error, Sendable, CustomStringConvertible {
        case noSeparator
        case metadata(String)

        public var description: String {
            switch self {
            case .noSeparator: return "no FF FF FF FF separator after the metadata"
            case .metadata(let why): return "the metadata is not a JSON object: \(why)"
            }
        }
    }

    /// Reads the header of the container open on `handle`, from its start.
    public static func readHeader(_ handle: FileHandle) throws -> Header {
        var buffer: [UInt8] = []
        var searched = 0
        try handle.seek(toOffset: 0)
        while buffer.count < maxMetadataBytes {
            guard let chunk = try handle.read(upToCount: 64 << 10), !chunk.isEmpty else { break }
            buffer += chunk
            // A separator may straddle two chunks: look again from a little before.
            if let at = find(separator, in: buffer, from: max(0, searched - 3)) {
                let json = Array(buffer[..<at])
                let metadata: [String: JSONValue]
                do {
                    guard case .object(let object) = try JSONCodec.parse(json) else { throw ContainerError.metadata("not an object") }
                    metadata = object
                } catch let error as ContainerError {
                    throw error
                } catch {
                    throw ContainerError.metadata("\(error)")
                }
                return Header(metadata: metadata, pdfOffset: Int64(at + separator.count))
            }
            searched = buffer.count
        }
        throw ContainerError.noSeparator
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
    /// `markup` updated, every other field kept as it was. Dates keep the form they had: a
    /// number stays seconds since 2001 (as Swift's JSONEncoder writes dates), a string becomes
    /// ISO 8601.
    public static func updated(_ metadata: [String: JSONValue], pageCount: Int, now: Date) -> [String: JSONValue] {
        var metadata = metadata
        let date: JSONValue
        if case .string? = metadata["modified"] {
            date = .string(ISO8601DateFormatter().string(from: now))
        } else if metadata["modified"]?.doubleValue != nil {
            date = .number(now.timeIntervalSinceReferenceDate)
        } else {
            date = .string(ISO8601DateFormatter().string(from: now))
        }
        metadata["modified"] = date
        metadata["page_count"] = .integer(Int64(pageCount))
        var markup = metadata["markup"]?.objectValue ?? [:]
        markup["has_markup"] = true
        markup["last_markup_date"] = date
        markup["markup_count"] = .integer((markup["markup_count"]?.integerValue ?? 0) + 1)
        metadata["markup"] = .object(markup)
        return metadata
    }
}
