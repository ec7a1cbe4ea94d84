import CanvasCore
import CanvasProtocol

extension SessionParams {
    /// `drawing.editText`'s params: `index` and at least one of x, y, dx, dy, fontSize, color, text.
    func textChange(_ params: Params) throws(ProtocolError) -> DrawingEdit {
        let index = Int(try params.integer("index", in: 0...Int64(Int32.max)))
        var change = TextChange()
        if params.has("x") { change.x = try params.number("x") }
        if params.has("y") { change.y = try params.number("y") }
        if params.has("dx") { change.dx = try params.number("dx") }
        if params.has("dy") { change.dy = try params.number("dy") }
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
