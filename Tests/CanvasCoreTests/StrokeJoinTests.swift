import CanvasCore
import Foundation
import Testing

@Suite("A stroke joining the last undo step")
struct StrokeJoinTests {
    /// One gesture as three strokes, each after the first starting where the one before ended.
    let first = try! Stroke(tool: .pen, color: .black, width: 2, points: [InkPoint(x: 0, y: 0), InkPoint(x: 10, y: 0)])
    let second = try! Stroke(tool: .pen, color: InkColor("#000000"), width: 2.0, points: [InkPoint(x: 10, y: 0), InkPoint(x: 10, y: 10)])
    let third = try! Stroke(tool: .pen, color: .black, width: 2, points: [InkPoint(x: 10, y: 10), InkPoint(x: 0, y: 10)])
    let other = try! Stroke(tool: .highlighter, color: InkColor("#FFCC00"), width: 12, points: [InkPoint(x: 0, y: 40)])

    @Test("a gesture's strokes are undone and redone as one step")
    func undoRedoWhole() throws {
        var editable = EditableDrawing()
        try editable.apply(.addStroke(other))
        try editable.apply(.addStroke(first))
        #expect(try editable.apply(.addStroke(second, joiningLastStep: true)))
        #expect(try editable.apply(.addStroke(third, joiningLastStep: true)))
        #expect(editable.drawing == Drawing(strokes: [other, first, second, third]))
        #expect(try editable.apply(.undo))
        #expect(editable.drawing == Drawing(strokes: [other]), "one undo takes the whole gesture back")
        #expect(try editable.apply(.redo))
        #expect(editable.drawing == Drawing(strokes: [other, first, second, third]), "one redo brings it back whole")
        try editable.apply(.undo)
        try editable.apply(.undo)
        #expect(editable.drawing == .empty && !editable.canUndo)
    }

    @Test("a stroke that does not continue the last one is refused and changes nothing",
          arguments: [
            (try! Stroke(tool: .pen, color: .black, width: 2, points: [InkPoint(x: 11, y: 0)]), StrokeJoinRefusal.gap),
            (try! Stroke(tool: .pen, color: .black, width: 2, points: [InkPoint(x: 10, y: 0, pressure: 0.5)]), .gap),
            (try! Stroke(tool: .highlighter, color: .black, width: 2, points: [InkPoint(x: 10, y: 0)]), .style),
            (try! Stroke(tool: .pen, color: InkColor("blue"), width: 2, points: [InkPoint(x: 10, y: 0)]), .style),
            (try! Stroke(tool: .pen, color: .black, width: 3, points: [InkPoint(x: 10, y: 0)]), .style),
          ])
    func refusedJoins(stroke: Stroke, refusal: StrokeJoinRefusal) throws {
        var editable = EditableDrawing()
        try editable.apply(.addStroke(first))
        let before = editable
        #expect(throws: DrawingEditError.cannotJoin(refusal)) { try editable.apply(.addStroke(stroke, joiningLastStep: true)) }
        #expect(editable == before)
    }

    @Test("only the step drawn last, and only a step of strokes, is joined")
    func whichSteps() throws {
        var editable = EditableDrawing()
        #expect(throws: DrawingEditError.cannotJoin(.notAfterStroke)) { try editable.apply(.addStroke(first, joiningLastStep: true)) }
        try editable.apply(.addStroke(first))
        try editable.apply(.addText(TextAnnotation(text: "note", x: 5, y: 5, fontSize: 14, color: .black)))
        #expect(throws: DrawingEditError.cannotJoin(.notAfterStroke)) { try editable.apply(.addStroke(second, joiningLastStep: true)) }
        try editable.apply(.undo)
        #expect(throws: DrawingEditError.cannotJoin(.undone)) { try editable.apply(.addStroke(second, joiningLastStep: true)) }
        try editable.apply(.redo)
        try editable.apply(.erase(EraseRequest(x: 500, y: 500, radius: 1, mode: .stroke)))   // touches nothing: no step
        try editable.apply(.addStroke(other))
        try editable.apply(.erase(EraseRequest(x: 0, y: 40, radius: 1, mode: .stroke)))
        #expect(editable.drawing.strokes == [first])
        #expect(throws: DrawingEditError.cannotJoin(.notAfterStroke)) { try editable.apply(.addStroke(second, joiningLastStep: true)) }
        try editable.apply(.clear)
        #expect(throws: DrawingEditError.cannotJoin(.notAfterStroke)) { try editable.apply(.addStroke(second, joiningLastStep: true)) }
        // An undo then redo leaves the step of strokes on top: it is still the last drawn.
        try editable.apply(.undo)
        try editable.apply(.undo)
        try editable.apply(.undo)
        try editable.apply(.addStroke(first))
        try editable.apply(.undo)
        try editable.apply(.redo)
        #expect(try editable.apply(.addStroke(second, joiningLastStep: true)))
    }

    @Test("a join past the drawing's bounds is refused as any stroke is")
    func bounds() throws {
        var editable = EditableDrawing()
        try editable.apply(.addStroke(first))
        let before = editable
        #expect(throws: DrawingEditError.overLimit(field: "strokes", size: 2, limit: 1)) {
            try editable.apply(.addStroke(second, joiningLastStep: true), within: DrawingBounds(maxStrokes: 1, maxPoints: 100, maxTexts: 10))
        }
        #expect(editable == before)
    }

    @Test("a stored drawing joins as the one it was stored from: the step is read from the history")
    func storedHistory() throws {
        var editable = EditableDrawing()
        try editable.apply(.addStroke(first))
        try editable.apply(.addStroke(second, joiningLastStep: true))
        var restored = try JSONDecoder().decode(EditableDrawing.self, from: JSONEncoder().encode(editable))
        #expect(restored == editable)
        #expect(try restored.apply(.addStroke(third, joiningLastStep: true)))
        try restored.apply(.undo)
        #expect(restored.drawing == .empty)
    }
}
