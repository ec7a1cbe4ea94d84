import CanvasCore
import CanvasProtocol

/// Reads the params of session methods into the canvas model's types, checking the limits a
/// request must respect. Every refusal names its field.
struct SessionParams {
    let limits: Limits

    func transitions(_ params: Params) throws(ProtocolError) -> TransitionMode {
        switch params["transitions"] {
        case nil, .null?, .string("instant")?: return .instant
        case .string("manual")?: return .manual
        case .object(let object)? where object.keys.sorted() == ["ms"]:
            let ms = try Params(object, at: "transitions").integer("ms", in: 0...limits.maxTransitionMilliseconds)
            return ms == 0 ? .instant : .timed(milliseconds: Int(ms))
        default:
            throw ProtocolError(.invalidParams, "transitions: must be \"instant\", \"manual\" or {\"ms\": N}",
                                data: ["field": "transitions"])
        }
    }

    func size(_ params: Params) throws(ProtocolError) -> (width: Int, height: Int)? {
        guard let object = try params.object("size") else { return nil }
        let side = 1...Int64(limits.maxImageSide)
        let size = Params(object, at: "size")
        return (Int(try size.integer("width", in: side)), Int(try size.integer("height", in: side)))
    }

    /// `pencil.configure`: only the fields given change; the rest keep what `current` has.
    /// Returns the new configuration and whether the plugin is to be initialized.
    func pencilChange(_ params: Params, current: PencilConfiguration, initialized: Bool) throws(ProtocolError)
        -> (configuration: PencilConfiguration, initialize: Bool) {
        var configuration = current
        if params.has("supported") { configuration.supported = try params.bool("supported", default: true) }
        if params.has("preferredTapAction") {
            configuration.preferredTapAction = try params.choice("preferredTapAction", PreferredTapAction.self)
        }
        if params.has("policy") { configuration.policy = try params.choice("policy", TapPolicy.self) }
        // `initialized` as the result reports it: true is canvas.initialize; there is no way back.
        let initialize = try params.bool("initialized", default: initialized)
        if !initialize && initialized {
            throw ProtocolError(.invalidParams, "initialized: an initialized plugin cannot be uninitialized",
                                data: ["field": "initialized"])
        }
        return (configuration, initialize)
    }

    /// A drawing method's edit, refused when it would take `drawing` past a limit.
    func edit(_ method: Method, _ params: Params, on drawing: Drawing) throws(ProtocolError) -> DrawingEdit {
        switch method {
        case .drawingAddStroke:
            preconditionFailure("a stroke comes through assembleStroke and addStroke(_:joined:on:)")
        case .drawingAddText:
            let text = try params.decode(TextAnnotation.self)
            // Counted in Unicode code points, as JSON Schema's maxLength counts a string.
            let length = text.text.unicodeScalars.count
            if length > limits.maxTextLength { throw Self.tooLarge("text", length, limits.maxTextLength) }
            if drawing.texts.count >= limits.maxTextsPerDrawing {
                throw Self.tooLarge("texts", drawing.texts.count + 1, limits.maxTextsPerDrawing)
            }
            return .addText(text)
        case .drawingMoveText:
            return .moveText(index: Int(try params.integer("index", in: 0...Int64(Int32.max))),
                             x: try params.number("x"), y: try params.number("y"))
        case .drawingEditText: return try textChange(params)
        case .drawingErase: return .erase(try params.decode(EraseRequest.self))
        case .drawingUndo: return .undo
        case .drawingRedo: return .redo
        case .drawingClear: return .clear
        default: preconditionFailure("\(method.rawValue) is not a drawing edit")
        }
    }

    /// A whole stroke's edit, refused when it would take `drawing` past a limit.
    func addStroke(_ stroke: Stroke, joined: Bool, on drawing: Drawing) throws(ProtocolError) -> DrawingEdit {
        if drawing.strokes.count >= limits.maxStrokesPerDrawing {
            throw Self.tooLarge("strokes", drawing.strokes.count + 1, limits.maxStrokesPerDrawing)
        }
        let points = drawing.pointCount + stroke.points.count
        if points > limits.maxPointsPerDrawing { throw Self.tooLarge("points", points, limits.maxPointsPerDrawing) }
        return .addStroke(stroke, joiningLastStep: joined)
    }

    static func tooLarge(_ field: String, _ size: Int, _ limit: Int) -> ProtocolError {
        ProtocolError(.payloadTooLarge, "\(field): \(size) is over the limit of \(limit)",
                      data: ["field": .string(field), "size": .integer(Int64(size)), "limit": .integer(Int64(limit))])
    }
}

extension Limits {
    /// What every edit's resulting drawing is held to, live and when a shared session's log is
    /// replayed.
    var drawingBounds: DrawingBounds {
        DrawingBounds(maxStrokes: maxStrokesPerDrawing, maxPoints: maxPointsPerDrawing, maxTexts: maxTextsPerDrawing)
    }
}
