import CanvasCore
import DocumentStore
import InkRendering
import Foundation
import TestSupport
import Testing

/// An edit costs what it draws: the file before it stays, byte for byte, at the start of the
/// file after it, and what is appended does not grow with the number of earlier edits.
@Suite("Repeated edits")
struct InkEditsTests {
    /// Edit `k`: two handwritten words and a short note.
    static func edit(_ k: Int) throws -> Drawing {
        let words = Handwriting.page().strokes.filter { $0.tool == .pen }
        return Drawing(strokes: [words[k % words.count], words[(k + 7) % words.count]],
                       texts: [try TextAnnotation(text: "note \(k)", x: 40, y: 20 + Double(k % 30) * 24, fontSize: 10, color: InkColor("red"))])
    }

    @Test("50 edits of one page: flat content, at most one font per edit, growth within 1.2 × 50 first edits")
    func fiftyEdits() throws {
        let folder = try freshFolder("fifty")
        let url = folder.appendingPathComponent("notes.pdf")
        try Data(Handwriting.document()).write(to: url)
        let store = try DocumentStore(folder: folder)
        var previous = Array(try Data(contentsOf: url))
        let original = previous.count
        var growth: [Int] = []
        for k in 0..<50 {
            _ = try store.flatten("notes.pdf", page: 1, drawing: try Self.edit(k))
            let now = Array(try Data(contentsOf: url))
            // Nothing written before moves or changes: the update is appended.
            #expect(now.count > previous.count && Array(now[..<previous.count]) == previous, "edit \(k) rewrote earlier bytes")
            growth.append(now.count - previous.count)
            previous = now
        }
        let total = previous.count - original
        print("50 edits: first edit \(growth[0]) bytes, last \(growth[49]), total \(total) (\(Double(total) / Double(50 * growth[0]))x 50 first edits)")
        // The page dictionary, rewritten by each edit, lists one more form each time: that is
        // all that may grow.
        #expect(Double(total) <= 1.2 * 50 * Double(growth[0]))

        let structure = try InkStructure(url.path)
        #expect(structure.nestedForms == 0, "a form draws another form")
        #expect(structure.inkDraws == 50)
        #expect(structure.fontFiles <= 50, "\(structure.fontFiles) fonts for 50 edits")
        // All the ink reads back, every edit's in order, as it was drawn (to 0.01 pt).
        let stored = try Flattener.storedDrawing(PDFLocation(path: url.path), page: 1)
        let expected = try (0..<50).map { InkPrecision.rounded(try Self.edit($0)) }
        #expect(stored == Drawing(strokes: expected.flatMap(\.strokes), texts: expected.flatMap(\.texts)))
        #expect(try run("/usr/bin/qpdf", ["--check", url.path]).status == 0)
        #expect(try Raster.render(url.path, page: 0) == Raster.render(writeOriginal(folder), page: 0), "another page changed")
    }

    private func writeOriginal(_ folder: URL) throws -> String {
        let url = folder.appendingPathComponent("original.bin")
        try Data(Handwriting.document()).write(to: url)
        return url.path
    }
}
