import Foundation
import Testing

/// What flattening left in a PDF, read through `qpdf --qdf` (every stream decoded).
struct InkStructure {
    /// Embedded font programs.
    var fontFiles = 0
    /// Form XObjects whose content draws another XObject: nesting.
    var nestedForms = 0
    /// Content streams of the page that draw one of our ink forms.
    var inkDraws = 0

    init(_ path: String) throws {
        let qdf = try run("/usr/bin/qpdf", ["--qdf", "--object-streams=disable", path, "-"]).output
        fontFiles = qdf.components(separatedBy: "/FontFile").count - 1
        let draw = try Regex(#"/[^\s/\[\]()<>]+ Do\b"#)
        for object in qdf.components(separatedBy: "\nendobj") {
            guard let start = object.range(of: "\nstream\n"), let end = object.range(of: "endstream", range: start.upperBound..<object.endIndex) else { continue }
            let dictionary = object[..<start.lowerBound], data = object[start.upperBound..<end.lowerBound]
            if dictionary.contains("/Subtype /Form") {
                if data.contains(draw) { nestedForms += 1 }
            } else if data.contains(try Regex(#"/CanvasInk\d+ Do\b"#)) {
                inkDraws += 1
            }
        }
    }
}
