import CanvasProtocol

/// What `canvas.open`'s `reopen` asks to load as the drawing: nothing, the page's canvas ink
/// (`true`), or that and other programs' `/Ink` annotations (`"all"`, spec 5.2).
enum ReopenScope: Equatable {
    case nothing
    case canvasInk
    case allInk

    init(_ params: Params) throws(ProtocolError) {
        guard params.has("reopen"), let value = params["reopen"] else {
            self = .nothing
            return
        }
        switch value {
        case .bool(let reopens): self = reopens ? .canvasInk : .nothing
        case .string("all"): self = .allInk
        default: throw ProtocolError(.invalidParams, "reopen: must be true, false or \"all\", not \(value.typeName)", data: ["field": "reopen"])
        }
    }

    var reopens: Bool { self != .nothing }
}
