/// Every method of the protocol. `hello` lists exactly these, and the server routes on them, so
/// the list a client reads and the list the server answers cannot drift apart.
public enum Method: String, CaseIterable, Sendable {
    case hello
    case sessionOpen = "session.open"
    case sessionClose = "session.close"

    case canvasInitialize = "canvas.initialize"
    case canvasOpen = "canvas.open"
    case canvasMinimize = "canvas.minimize"
    case canvasSubmit = "canvas.submit"
    case canvasCancel = "canvas.cancel"
    case canvasFinishTransition = "canvas.finishTransition"
    case canvasState = "canvas.state"

    case pencilDoubleTap = "pencil.doubleTap"
    case pencilConfigure = "pencil.configure"

    case drawingGet = "drawing.get"
    case drawingAddStroke = "drawing.addStroke"
    case drawingAddText = "drawing.addText"
    case drawingMoveText = "drawing.moveText"
    case drawingUndo = "drawing.undo"
    case drawingRedo = "drawing.redo"
    case drawingClear = "drawing.clear"
    case drawingErase = "drawing.erase"

    case documentList = "document.list"
    case documentInfo = "document.info"
    case documentFlatten = "document.flatten"
    case documentRevisions = "document.revisions"
    case documentRestore = "document.restore"

    /// What a method acts on, which decides how a request for it is routed.
    public enum Scope: Sendable {
        /// Needs no session: `hello`, `session.open`.
        case server
        /// Reads a document; runs off the request loop.
        case documentRead
        /// Writes a document; runs where saves run, one at a time per document.
        case documentWrite
        /// Acts on the session the request names.
        case session
    }

    public var scope: Scope {
        switch self {
        case .hello, .sessionOpen: return .server
        case .documentList, .documentInfo, .documentRevisions: return .documentRead
        case .documentFlatten, .documentRestore: return .documentWrite
        default: return .session
        }
    }

    /// Session methods that change nothing, so a retry whose reply was too large to keep may
    /// simply run again.
    public var changesNothing: Bool { self == .canvasState || self == .drawingGet }
}
