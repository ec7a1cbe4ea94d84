import CanvasCore
import Testing

@Suite("Undo, redo and clear")
struct EditHistoryTests {
    let a = try! Stroke(tool: .pen, color: .black, width: 2, points: [InkPoint(x: 0, y: 0), InkPoint(x: 10, y: 0)])
    let b = try! Stroke(tool: .highlighter, color: InkColor("#FFCC00"), width: 12, points: [InkPoint(x: 0, y: 40)])
    let t = try! TextAnnotation(text: "note", x: 5, y: 5, fontSize: 14, color: InkColor("red"))

    @Test("undo walks back and redo forward, one edit at a time")
    func undoRedo() throws {
        var editable = EditableDrawing()
        try editable.apply(.addStroke(a))
        try editable.apply(.addText(t))
        try editable.apply(.addStroke(b))
        #expect(editable.drawing == Drawing(strokes: [a, b], texts: [t]))
        #expect(try editable.apply(.undo))
        #expect(editable.drawing == Drawing(strokes: [a], texts: [t]))
        #expect(try editable.apply(.undo))
        #expect(editable.drawing == Drawing(strokes: [a]))
        #expect(try editable.apply(.redo))
        #expect(editable.drawing == Drawing(strokes: [a], texts: [t]))
        #expect(try editable.apply(.undo) && editable.apply(.undo))
        #expect(editable.drawing == .empty)
        #expect(try editable.apply(.undo) == false, "nothing left to undo")
        #expect(!editable.canUndo && editable.canRedo)
    }

    @Test("a new edit forgets what could have been redone")
    func newEditClearsRedo() throws {
        var editable = EditableDrawing()
        try editable.apply(.addStroke(a))
        try editable.apply(.undo)
        try editable.apply(.addStroke(b))
        #expect(!editable.canRedo)
        #expect(try editable.apply(.redo) == false)
        #expect(editable.drawing == Drawing(strokes: [b]))
    }

    @Test("clear is an edit that undo takes back; clearing blank paper records nothing")
    func clear() throws {
        var editable = EditableDrawing()
        #expect(try editable.apply(.clear) == false)
        #expect(!editable.canUndo)
        try editable.apply(.addStroke(a))
        try editable.apply(.addText(t))
        #expect(try editable.apply(.clear))
        #expect(editable.drawing == .empty)
        try editable.apply(.undo)
        #expect(editable.drawing == Drawing(strokes: [a], texts: [t]))
    }

    @Test("an erase that touches nothing is not an undo step")
    func emptyErase() throws {
        var editable = EditableDrawing()
        try editable.apply(.addStroke(a))
        #expect(try editable.apply(.erase(EraseRequest(x: 500, y: 500, radius: 1, mode: .stroke))) == false)
        try editable.apply(.undo)
        #expect(editable.drawing == .empty, "the one undo step took back the stroke, not the empty erase")
    }

    @Test("moving a text places it; a missing text is an error that changes nothing")
    func moveText() throws {
        var editable = EditableDrawing()
        try editable.apply(.addText(t))
        #expect(try editable.apply(.moveText(index: 0, x: 100.25, y: 7)))
        #expect(editable.drawing.texts[0].x == 100.25 && editable.drawing.texts[0].y == 7)
        #expect(throws: DrawingEditError.noSuchText(index: 1, count: 1)) { try editable.apply(.moveText(index: 1, x: 0, y: 0)) }
        #expect(throws: DrawingEditError.self) { try editable.apply(.moveText(index: 0, x: .nan, y: 0)) }
        #expect(editable.drawing.texts[0].x == 100.25)
        try editable.apply(.undo)
        #expect(editable.drawing.texts == [t])
    }

    @Test("history is bounded: the oldest steps are forgotten")
    func limit() throws {
        var editable = EditableDrawing(historyLimit: 3)
        for _ in 0..<5 { try editable.apply(.addStroke(a)) }
        var undone = 0
        while try editable.apply(.undo) { undone += 1 }
        #expect(undone == 3)
        #expect(editable.drawing.strokes.count == 2)
    }
}
