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
        // The trailer as qpdf reads it (the last section may be a cross-reference stream).
        let trailer = try show(url, "trailer")
        func value(_ pattern: String) throws -> String {
            let match = try #require(trailer.range(of: pattern, options: .regularExpression))
            return String(trailer[match]).split(separator: " ").dropFirst().joined(separator: " ")
        }
        let root = try value("/Root [0-9]+ 0 R"), size = try value("/Size [0-9]+")
        let text = String(decoding: bytes, as: UTF8.self)
        let previous = try #require(text.components(separatedBy: "startxref").last?.split(whereSeparator: \.isNewline).first)
        let offset = bytes.count + 1
        bytes += Array("\n\(number) 0 obj\n".utf8) + body + Array("\nendobj\n".utf8)
        let xref = bytes.count
        let entry = String(repeating: "0", count: 10 - String(offset).count) + "\(offset) 00000 n\r\n"
        bytes += Array("xref\n\(number) 1\n\(entry)trailer\n<< /Size \(size) /Root \(root) /Prev \(previous) >>\nstartxref\n\(xref)\n%%EOF\n".utf8)
        try Data(bytes).write(to: url)
    }

    /// The document's last ink annotation (the highest numbered: the latest save's), its number
    /// and its dictionary as qpdf writes it out, wherever the save put it (plain, or packed in an
    /// object stream).
    static func annotation(_ url: URL) throws -> (number: Int, dictionary: String) {
        let number = try #require(objects(url).filter { ($0.value["/Subtype"] as? String) == "/Ink" }.map(\.key).max())
        return (number, try show(url, String(number)))
    }

    /// The stream object of the last stored drawing the document names (a form's or an
    /// annotation's `/CanvasBridgeDrawing`): the highest numbered.
    static func lastStoredDrawing(_ url: URL) throws -> Int {
        let named = try objects(url).values.compactMap { $0["/CanvasBridgeDrawing"] as? String }
        return try #require(named.compactMap { Int($0.split(separator: " ")[0]) }.max())
    }

    /// Every dictionary of the document by object number (a stream's by its dictionary), as
    /// qpdf's JSON gives them.
    static func objects(_ url: URL) throws -> [Int: [String: Any]] {
        let out = try run("/usr/bin/qpdf", ["--json=2", "--json-key=qpdf", url.path])
        let json = try #require(try JSONSerialization.jsonObject(with: Data(out.output.utf8)) as? [String: Any])
        let parts = try #require(json["qpdf"] as? [Any])
        let all = try #require(parts.last as? [String: Any])
        var found: [Int: [String: Any]] = [:]
        for (key, entry) in all {
            guard key.hasPrefix("obj:"), let number = Int(key.dropFirst(4).split(separator: " ")[0]),
                  let entry = entry as? [String: Any] else { continue }
            if let value = entry["value"] as? [String: Any] {
                found[number] = value
            } else if let stream = entry["stream"] as? [String: Any], let dictionary = stream["dict"] as? [String: Any] {
                found[number] = dictionary
            }
        }
        return found
    }

    /// An object (a number, or "trailer") as qpdf writes it out.
    static func show(_ url: URL, _ object: String) throws -> String {
        let out = try run("/usr/bin/qpdf", ["--show-object=\(object)", url.path])
        try #require(out.status == 0 || out.status == 3, "qpdf --show-object=\(object) exited \(out.status)")
        return out.output.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// A stream object's body with `data` as it is (no filter).
    static func stream(_ data: [UInt8]) -> [UInt8] {
        Array("<< /Length \(data.count) /Type /CanvasBridgeDrawing >>\nstream\n".utf8) + data + Array("\nendstream".utf8)
    }
}
