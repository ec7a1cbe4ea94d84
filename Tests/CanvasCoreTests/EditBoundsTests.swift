import CanvasCore
import Testing

@Suite("Edits held to the drawing's bounds")
struct EditBoundsTests {
    /// A zigzag of `teeth` teeth between y = 0 and y = 10, one unit apart.
    func zigzag(teeth: Int, at y: Double = 0) throws -> Stroke {
        let points = try (0...(2 * teeth)).map { i in try InkPoint(x: Double(i), y: y + (i.isMultiple(of: 2) ? 0 : 10)) }
        return try Stroke(tool: .pen, color: .black, width: 1, points: points)
    }

    /// A disc so large that its edge is almost the line y = 5 under the zigzags: a partial erase
    /// with it keeps each tooth's tip as a stroke of its own (three points: cut, tip, cut).
    func sawOff() throws -> EraseRequest {
        try EraseRequest(x: 100, y: -100_000, radius: 100_005, mode: .partial)
    }

    func drawing(strokes: Int, teeth: Int) throws -> EditableDrawing {
        var editable = EditableDrawing()
        for _ in 0..<strokes { try editable.apply(.addStroke(zigzag(teeth: teeth))) }
        return editable
    }

    @Test("unbounded, one small erase multiplies the strokes by the teeth")
    func eraseMultiplies() throws {
        var editable = try drawing(strokes: 10, teeth: 100)
        #expect(try editable.apply(.erase(sawOff())))
        #expect(editable.drawing.strokes.count == 1_000)
        #expect(editable.drawing.pointCount == 3_000)
    }

    @Test("an erase whose result has too many strokes is refused and changes nothing")
    func eraseOverStrokes() throws {
        var editable = try drawing(strokes: 10, teeth: 100)
        let before = editable
        let bounds = DrawingBounds(maxStrokes: 999, maxPoints: 100_000, maxTexts: 10)
        #expect(throws: DrawingEditError.overLimit(field: "strokes", size: 1_000, limit: 999)) {
            try editable.apply(.erase(sawOff()), within: bounds)
        }
        #expect(editable == before, "drawing and history as they were")
        // At the bound exactly, it goes through.
        #expect(try editable.apply(.erase(sawOff()), within: DrawingBounds(maxStrokes: 1_000, maxPoints: 3_000, maxTexts: 10)))
        #expect(editable.drawing.strokes.count == 1_000)
    }

    @Test("an erase whose result has too many points is refused and changes nothing")
    func eraseOverPoints() throws {
        var editable = try drawing(strokes: 10, teeth: 100)
        let before = editable
        let bounds = DrawingBounds(maxStrokes: 2_000, maxPoints: 2_999, maxTexts: 10)
        #expect(throws: DrawingEditError.overLimit(field: "points", size: 3_000, limit: 2_999)) {
            try editable.apply(.erase(sawOff()), within: bounds)
        }
        #expect(editable == before)
    }

    @Test("adding past a bound is refused; a drawing already over a bound may still shrink")
    func addAndShrink() throws {
        var editable = try drawing(strokes: 3, teeth: 2)
        let tight = DrawingBounds(maxStrokes: 2, maxPoints: 100, maxTexts: 0)
        #expect(throws: DrawingEditError.overLimit(field: "strokes", size: 4, limit: 2)) {
            try editable.apply(.addStroke(zigzag(teeth: 1)), within: tight)
        }
        let text = try TextAnnotation(text: "n", x: 0, y: 0, fontSize: 12, color: .black)
        #expect(throws: DrawingEditError.overLimit(field: "texts", size: 1, limit: 0)) {
            try editable.apply(.addText(text), within: tight)
        }
        // Three strokes are already over a bound of two: an erase that leaves fewer goes through.
        #expect(try editable.apply(.erase(EraseRequest(x: 0, y: 0, radius: 1, mode: .stroke)), within: tight))
        #expect(editable.drawing.strokes.isEmpty)
        #expect(try editable.apply(.undo, within: tight), "undo goes back to a drawing once accepted")
        #expect(editable.drawing.strokes.count == 3)
    }

    @Test("a session's refused edit changes neither the drawing nor the tool in hand")
    func sessionEdit() throws {
        var session = CanvasSession(initialized: true)
        _ = try session.open()
        for _ in 0..<10 { _ = try session.edit(.addStroke(zigzag(teeth: 100))) }
        let before = session
        #expect(throws: CanvasEditError.invalid(.overLimit(field: "strokes", size: 1_000, limit: 500))) {
            try session.edit(.erase(sawOff()), within: DrawingBounds(maxStrokes: 500, maxPoints: 100_000, maxTexts: 10))
        }
        #expect(session == before)
    }
}
