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
        // All the ink reads back, every edit's in order, as it was submitted, bit for bit.
        let stored = try Flattener.storedDrawing(PDFLocation(path: url.path), page: 1)
        let expected = try (0..<50).map { try Self.edit($0) }
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

/// Pages inked by the earlier format (one form holding all the page's ink, its drawing on the
/// page's marker) take new edits beside it and read back whole.
@Suite("Ink of the earlier format")
struct EarlierFormatTests {
    /// A page as the earlier flattener left it: a red square at display (50, 50) to (70, 70)
    /// in the form /CanvasBridgeInk, and the dot it was drawn from as the stored drawing.
    static func earlierPage() -> [UInt8] {
        let drawing = #"{"strokes":[{"color":"red","points":[{"x":60,"y":60}],"tool":"pen","width":20}],"texts":[]}"#
        func stream(_ data: String, _ keys: String = "") -> String { "<<\(keys) /Length \(data.utf8.count) >>\nstream\n\(data)\nendstream" }
        let objects = [
            "<< /Type /Catalog /Pages 2 0 R >>",
            "<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
            "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents [4 0 R 5 0 R 6 0 R] "
                + "/Resources << /XObject << /CanvasBridgeInk 7 0 R >> >> "
                + "/CanvasBridgeInk << /Form 7 0 R /Open 4 0 R /Close 6 0 R /Drawing 8 0 R >> >>",
            stream("q\n"),
            stream("0 g 100 100 50 50 re f"),
            stream("Q\nq\n1 0 0 1 0 0 cm\n/CanvasBridgeInk Do\nQ\n"),
            stream("1 0 0 rg 50 722 20 20 re f", " /Type /XObject /Subtype /Form /BBox [0 0 612 792]"),
            stream(drawing),
        ]
        return PDFFixtures.assemble(objects)
    }

    @Test("a new edit leaves the earlier form drawn where it was and reads back after its drawing")
    func newEditBesideEarlierInk() throws {
        let folder = try freshFolder("earlier")
        let url = folder.appendingPathComponent("old.pdf")
        try Data(Self.earlierPage()).write(to: url)
        #expect(try run("/usr/bin/qpdf", ["--check", url.path]).status == 0)
        let before = try Raster.render(url.path, page: 0)
        let edit = Drawing(strokes: [try dot(300, 300, color: "#0000FF")])
        _ = try DocumentStore(folder: folder).flatten("old.pdf", page: 0, drawing: edit)
        let after = try Raster.render(url.path, page: 0)
        // The earlier square is still red, the new dot blue, nothing else changed.
        #expect(before.rgb(60, 60) == (255, 0, 0) && after.rgb(60, 60) == (255, 0, 0) && after.rgb(300, 300) == (0, 0, 255))
        #expect(Difference(before, after).blobs.count == 1)
        let stored = try Flattener.storedDrawing(PDFLocation(path: url.path), page: 0)
        #expect(stored.strokes.map(\.color.rawValue) == ["red", "#0000FF"])
        #expect(try InkStructure(url.path).nestedForms == 0)
        #expect(try run("/usr/bin/qpdf", ["--check", url.path]).status == 0)
    }
}
