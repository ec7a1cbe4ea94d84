import CanvasCore
import CanvasProtocol

extension SessionParams {
    /// `drawing.editText`'s params: `index` and at least one of x, y, dx, dy, fontSize, color, text.
    func textChange(_ params: Params) throws(ProtocolError) -> DrawingEdit {
        let index = Int(try params.integer("index", in: 0...Int64(Int32.max)))
        var change = TextChange()
        // Each param is checked against its own range first, so a refusal names the param
        // that is wrong (`dy`), not the coordinate it would have made (`y`); a text's
        // coordinates are checked again once the change is applied.
        let range = DrawingLimits.coordinate
        if params.has("x") { change.x = try params.number("x", in: range) }
        if params.has("y") { change.y = try params.number("y", in: range) }
        if params.has("dx") { change.dx = try params.number("dx", in: range) }
        if params.has("dy") { change.dy = try params.number("dy", in: range) }
        if params.has("fontSize") { change.fontSize = try params.number("fontSize") }
        if params.has("color") {
            let raw = try params.string("color")
            do {
                change.color = try InkColor(raw)
            } catch {
                throw ProtocolError(.invalidParams, "color: \(error.description)", data: ["field": "color"])
            }
        }
        if params.has("text") {
            let text = try params.string("text")
            let length = text.unicodeScalars.count
            if length > limits.maxTextLength { throw Self.tooLarge("text", length, limits.maxTextLength) }
            change.text = text
        }
        guard change != TextChange() else {
            throw ProtocolError(.invalidParams, "drawing.editText needs at least one of x, y, dx, dy, fontSize, color, text",
                                data: ["field": "index"])
        }
        return .editText(index: index, change)
    }
}
