import Foundation
import Testing

/// Edits of a saved PDF as another program makes them, for the tests that check what a reopen
/// makes of them.
enum PDFEdits {
    /// `url`'s document with one more incremental update: object `number` written anew as
    /// `body` (PDF syntax: a dictionary, or a stream), after the file's last cross-reference
    /// table, as an editor's incremental save would.
    static func rewrite(_ url: URL, object number: Int, as body: [UInt8]) throws {
        var bytes = Array(try Data(contentsOf: url))
        let text = String(decoding: bytes, as: UTF8.self)
        let trailer = try #require(text.range(of: "trailer", options: .backwards))
        let tail = String(text[trailer.lowerBound...])
        func value(_ pattern: String) throws -> String {
            let match = try #require(tail.range(of: pattern, options: .regularExpression))
            return String(tail[match]).split(separator: " ").dropFirst().joined(separator: " ")
        }
        let root = try value("/Root [0-9]+ 0 R"), size = try value("/Size [0-9]+")
        let previous = try #require(tail.components(separatedBy: "startxref").last?.split(whereSeparator: \.isNewline).first)
        let offset = bytes.count + 1
        bytes += Array("\n\(number) 0 obj\n".utf8) + body + Array("\nendobj\n".utf8)
        let xref = bytes.count
        let entry = String(repeating: "0", count: 10 - String(offset).count) + "\(offset) 00000 n\r\n"
        bytes += Array("xref\n\(number) 1\n\(entry)trailer\n<< /Size \(size) /Root \(root) /Prev \(previous) >>\nstartxref\n\(xref)\n%%EOF\n".utf8)
        try Data(bytes).write(to: url)
    }

    /// The document's ink annotation (its object number and dictionary), as the save wrote it.
    static func annotation(_ url: URL) throws -> (number: Int, dictionary: String) {
        let text = String(decoding: try Data(contentsOf: url), as: UTF8.self)
        let ink = try #require(text.range(of: "/Subtype /Ink", options: .backwards))
        let head = try #require(text.range(of: " 0 obj\n", options: .backwards, range: text.startIndex..<ink.lowerBound))
        let number = try #require(Int(text[..<head.lowerBound].split(whereSeparator: \.isNewline).last ?? ""))
        let end = try #require(text.range(of: "\nendobj", range: head.upperBound..<text.endIndex))
        return (number, String(text[head.upperBound..<end.lowerBound]))
    }

    /// The stream object of the last stored drawing the document names (a form's or an
    /// annotation's `/CanvasBridgeDrawing`).
    static func lastStoredDrawing(_ url: URL) throws -> Int {
        let text = String(decoding: try Data(contentsOf: url), as: UTF8.self)
        let key = try #require(text.range(of: #"/CanvasBridgeDrawing [0-9]+ 0 R"#, options: [.regularExpression, .backwards]))
        return try #require(Int(text[key].split(separator: " ")[1]))
    }

    /// A stream object's body with `data` as it is (no filter).
    static func stream(_ data: [UInt8]) -> [UInt8] {
        Array("<< /Length \(data.count) /Type /CanvasBridgeDrawing >>\nstream\n".utf8) + data + Array("\nendstream".utf8)
    }
}
