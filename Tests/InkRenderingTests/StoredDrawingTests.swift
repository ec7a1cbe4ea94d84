import CanvasCore
import Foundation
import InkRendering
import TestSupport
import Testing

@Suite("Stored drawing")
struct StoredDrawingTests {
    @Test("reads back as the drawing rounded to 0.01 pt, texts with quotes, controls and any Unicode included")
    func roundTrip() throws {
        let drawing = Drawing(
            strokes: Handwriting.page().strokes + [
                try Stroke(tool: .pen, color: InkColor("#0A0B0C"), width: 0.1,
                           points: [try InkPoint(x: -0.004, y: -12.345, pressure: 0), try InkPoint(x: 1e6, y: 0.05, pressure: 1)]),
            ],
            texts: Handwriting.page().texts + [try TextAnnotation(text: "\"quoted\" \\ tab\there\nnew line ✓ 𝄞", x: -3.999, y: 0.005, fontSize: 8,
                                                                  color: InkColor("blue"))])
        let rounded = InkPrecision.rounded(drawing)
        let decoded = try JSONDecoder().decode(Drawing.self, from: Data(StoredDrawing.json(rounded)))
        #expect(decoded == rounded)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        // The same document a general encoder makes, field for field.
        #expect(try JSONDecoder().decode(Drawing.self, from: encoder.encode(rounded)) == decoded)
    }
}
