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
    case drawingEditText = "drawing.editText"
    case drawingUndo = "drawing.undo"
    case drawingRedo = "drawing.redo"
    case drawingClear = "drawing.clear"
    case drawingErase = "drawing.erase"

    case documentList = "document.list"
    case documentInfo = "document.info"
    case documentFlatten = "document.flatten"
    case documentRevisions = "document.revisions"
    case documentRestore = "document.restore"
    case documentGet = "document.get"
    case documentUploadBegin = "document.upload.begin"
    case documentUploadPart = "document.upload.part"
    case documentUploadStatus = "document.upload.status"
    case documentUploadAbort = "document.upload.abort"
    case documentUploadCommit = "document.upload.commit"

    /// The method a request names, or nil if there is none of that name. Looked up in a table
    /// made once: `init(rawValue:)`, a switch over every name, costs several times as much.
    public init?(named name: String) {
        guard let method = Self.byName[name] else { return nil }
        self = method
    }

    private static let byName = Dictionary(uniqueKeysWithValues: allCases.map { ($0.rawValue, $0) })

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
        // An upload's parts are kept in memory, but are also answered off the loop: copying a
        // part is cheap, the order of replies per client is kept, and the loop stays free.
        case .documentList, .documentInfo, .documentRevisions, .documentGet,
             .documentUploadBegin, .documentUploadPart, .documentUploadStatus, .documentUploadAbort: return .documentRead
        case .documentFlatten, .documentRestore, .documentUploadCommit: return .documentWrite
        default: return .session
        }
    }

    /// Methods that change nothing, so a retry whose reply was too large to keep may simply
    /// run again (a read answered again is the same answer, or a newer one).
    public var changesNothing: Bool {
        switch self {
        case .canvasState, .drawingGet, .documentList, .documentInfo, .documentRevisions, .documentGet, .documentUploadStatus:
            return true
        default:
            return false
        }
    }
}
