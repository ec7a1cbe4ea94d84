import CanvasCore
import Testing

@Suite("Editing a placed text")
struct TextEditTests {
    let t = try! TextAnnotation(text: "note", x: 5, y: 5, fontSize: 14, color: InkColor("red"))

    @Test("nudge, resize, recolour and retext: each one undo step, the rest of the text kept")
    func edits() throws {
        var editable = EditableDrawing()
        try editable.apply(.addText(t))
        #expect(try editable.apply(.editText(index: 0, TextChange(dx: 1, dy: -2))))
        #expect(try editable.apply(.editText(index: 0, TextChange(fontSize: 48))))
        #expect(try editable.apply(.editText(index: 0, TextChange(color: InkColor("#00FF00")))))
        #expect(try editable.apply(.editText(index: 0, TextChange(text: "Grüße"))))
        #expect(editable.drawing.texts == [try TextAnnotation(text: "Grüße", x: 6, y: 3, fontSize: 48, color: InkColor("#00FF00"))])
        for _ in 0..<4 { try editable.apply(.undo) }
        #expect(editable.drawing.texts == [t])
    }

    @Test("a move then a nudge in one change; a change to the same values is no step")
    func moveAndNudge() throws {
        var editable = EditableDrawing()
        try editable.apply(.addText(t))
        try editable.apply(.editText(index: 0, TextChange(x: 100, y: 200, dx: 0.5)))
        #expect(editable.drawing.texts[0].x == 100.5 && editable.drawing.texts[0].y == 200)
        #expect(try editable.apply(.editText(index: 0, TextChange(fontSize: 14))) == false)
    }

    @Test("sizes outside 8 to 48 pt, empty text and missing texts are refused and change nothing")
    func refused() throws {
        var editable = EditableDrawing()
        try editable.apply(.addText(t))
        for change in [TextChange(fontSize: 7.9), TextChange(fontSize: 48.1), TextChange(text: ""), TextChange(dx: .infinity)] {
            #expect(throws: DrawingEditError.self) { try editable.apply(.editText(index: 0, change)) }
        }
        #expect(throws: DrawingEditError.noSuchText(index: 2, count: 1)) { try editable.apply(.editText(index: 2, TextChange(dx: 1))) }
        #expect(editable.drawing.texts == [t])
        try editable.apply(.undo)
        #expect(editable.drawing.texts.isEmpty, "only the addText was an undo step")
    }
}
