import CanvasCore
@testable import DocumentStore
import Foundation
import InkRendering
import TestSupport
import Testing

/// Stored ink that proves itself (issue 42): a stored drawing carries a checksum, and an ink
/// annotation's stored drawing is used only while the annotation says what that drawing makes
/// of it. Before, a byte changed in a stored drawing reopened as other strokes (24 of 32 tries),
/// an annotation stored the drawing rounded to the ink grid, and a `/BS /W` changed elsewhere was
/// not seen.
@Suite("Stored ink proves itself", .serialized)
struct StoredInkProofTests {
    /// Numbers nobody rounds: off the ink grid, -0, thirds, as a client may send them.
    static func awkward() throws -> Drawing {
        let points = [try InkPoint(x: 42.176144743080584, y: 100.3333333333333, pressure: 0.5555),
                      try InkPoint(x: 80.1, y: 120.123456789, pressure: 0.1 + 0.2),
                      try InkPoint(x: 130.0000001, y: 99.99999, pressure: 1)]
        return Drawing(strokes: [try Stroke(tool: .pen, color: InkColor("#1F3A93"), width: 3.3333333333333335, points: points),
                                 try Stroke(tool: .pen, color: InkColor("red"), width: 2,
                                            points: [try InkPoint(x: -0.0, y: 50.005, pressure: nil), try InkPoint(x: 60.25, y: 70, pressure: nil)])],
                       texts: [try TextAnnotation(text: "exact ✓", x: 200.123456, y: 300.000001, fontSize: 13.3333, color: InkColor("purple"))])
    }

    static func saved(_ drawing: Drawing, form: InkForm, _ label: String) throws -> (DocumentStore, URL) {
        let folder = try freshFolder(label)
        let url = folder.appendingPathComponent("doc.pdf")
        try Data(Handwriting.document()).write(to: url)
        let store = try DocumentStore(folder: folder)
        _ = try store.flatten("doc.pdf", page: 0, drawing: drawing, form: form)
        return (store, url)
    }

    static func bits(_ drawing: Drawing) -> [UInt64?] {
        drawing.strokes.flatMap { stroke in [stroke.width.bitPattern] + stroke.points.flatMap { [$0.x.bitPattern, $0.y.bitPattern, $0.pressure?.bitPattern] } }
            + drawing.texts.flatMap { [$0.x.bitPattern, $0.y.bitPattern, $0.fontSize.bitPattern] }
    }

    @Test("every number comes back bit for bit in either form, -0 included", arguments: [InkForm.paper, .annotations])
    func exact(form: InkForm) throws {
        let drawing = try Self.awkward()
        let (store, _) = try Self.saved(drawing, form: form, "exact-\(form)")
        let ink = try store.pageInk("doc.pdf", 0).ink
        #expect(ink.edits.allSatisfy { !$0.changedElsewhere })
        #expect(ink.drawing == drawing)
        #expect(Self.bits(ink.drawing) == Self.bits(drawing), "numbers changed by the round trip")
        #expect(ink.drawing.strokes[1].points[0].x.sign == .minus)
    }

    @Test("a byte changed anywhere in a stored drawing is never loaded as strokes: paper refuses the reopen, an annotation reads what it says",
          arguments: [InkForm.paper, .annotations])
    func damaged(form: InkForm) throws {
        let drawing = Drawing(strokes: [try Self.awkward().strokes[0]])
        let stored = InkSource.encode(drawing)
        for place in 0..<16 {
            let (store, url) = try Self.saved(drawing, form: form, "damaged-\(form)")
            var bytes = stored
            let index = place * (bytes.count - 1) / 15
            bytes[index] ^= 0x04
            try PDFEdits.rewrite(url, object: try PDFEdits.lastStoredDrawing(url), as: PDFEdits.stream(bytes))
            switch form {
            case .paper:
                #expect(throws: DocumentError.self, "byte \(index) changed: reopened") { try store.pageInk("doc.pdf", 0) }
            case .annotations:
                let ink = try store.pageInk("doc.pdf", 0).ink
                #expect(ink.edits.count == 1 && ink.edits[0].changedElsewhere, "byte \(index) changed: loaded as the stored strokes")
                // What the annotation says: its centre line on the ink grid, without pressure.
                let points = ink.drawing.strokes.flatMap(\.points)
                #expect(points.count == 3 && points.allSatisfy { $0.pressure == nil })
                #expect(zip(points, drawing.strokes[0].points).allSatisfy { abs($0.x - $1.x) < 0.011 && abs($0.y - $1.y) < 0.011 })
            }
        }
    }

    @Test("an /Ink whose /BS /W or /CA another program changed reopens from what it says, at that width")
    func widthChangedElsewhere() throws {
        let drawing = Drawing(strokes: [try Self.awkward().strokes[1]])
        for (from, to) in [("/W 2 ", "/W 9.5 "), ("/CA 1 ", "/CA 0.5 ")] {
            let (store, url) = try Self.saved(drawing, form: .annotations, "changed-\(to.count)")
            #expect(try store.pageInk("doc.pdf", 0).ink.drawing == drawing)
            let (number, dictionary) = try PDFEdits.annotation(url)
            #expect(dictionary.contains(from), "\(dictionary)")
            try PDFEdits.rewrite(url, object: number, as: Array(dictionary.replacingOccurrences(of: from, with: to).utf8))
            let ink = try store.pageInk("doc.pdf", 0).ink
            #expect(ink.edits.count == 1 && ink.edits[0].changedElsewhere, "\(from) → \(to) not seen")
            #expect(ink.drawing.strokes.first?.width == (to.hasPrefix("/W") ? 9.5 : 2))
        }
    }
}
