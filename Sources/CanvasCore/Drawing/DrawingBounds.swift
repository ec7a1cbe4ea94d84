/// How large an edit may make a drawing: the service's `maxStrokesPerDrawing`,
/// `maxPointsPerDrawing` and `maxTextsPerDrawing`. Checked on the drawing an edit produces, not
/// on the request, because an edit can multiply what it is given: one partial erase across a
/// zigzag cuts each stroke into as many pieces as it has turns.
public struct DrawingBounds: Hashable, Sendable {
    public var maxStrokes: Int
    public var maxPoints: Int
    public var maxTexts: Int

    public init(maxStrokes: Int, maxPoints: Int, maxTexts: Int) {
        self.maxStrokes = maxStrokes
        self.maxPoints = maxPoints
        self.maxTexts = maxTexts
    }

    public static let unbounded = DrawingBounds(maxStrokes: .max, maxPoints: .max, maxTexts: .max)

    /// Why `next` may not replace `current`: the first count that is over its bound and larger
    /// than it was. A drawing already over a bound (one stored before the bound was lowered)
    /// may still shrink.
    func refusal(_ next: Drawing, after current: Drawing) -> DrawingEditError? {
        if next.strokes.count > maxStrokes && next.strokes.count > current.strokes.count {
            return .overLimit(field: "strokes", size: next.strokes.count, limit: maxStrokes)
        }
        if next.texts.count > maxTexts && next.texts.count > current.texts.count {
            return .overLimit(field: "texts", size: next.texts.count, limit: maxTexts)
        }
        let points = next.pointCount
        if points > maxPoints && points > current.pointCount {
            return .overLimit(field: "points", size: points, limit: maxPoints)
        }
        return nil
    }
}
