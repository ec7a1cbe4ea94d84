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

    /// The method a request names, or nil if there is none of that name. Its UTF-8 bytes are
    /// compared with the few names of the same length, in a table made once: `init(rawValue:)`,
    /// a switch over every name, costs several times as much, and a dictionary hashes the name
    /// (SipHash, twice per request: the loop counts the method too).
    public init?(named name: String) {
        var name = name
        guard let method = name.withUTF8({ Self.method(named: $0) }) else { return nil }
        self = method
    }

    private static func method(named bytes: UnsafeBufferPointer<UInt8>) -> Method? {
        let table = byLength
        guard bytes.count < table.count else { return nil }
        for (name, method) in table[bytes.count] where name.elementsEqual(bytes) { return method }
        return nil
    }

    /// Every method's name as bytes, by the name's length.
    private static let byLength: [[(name: [UInt8], method: Method)]] = {
        var table = [[(name: [UInt8], method: Method)]](repeating: [], count: allCases.map(\.rawValue.utf8.count).max()! + 1)
        for method in allCases { table[method.rawValue.utf8.count].append((Array(method.rawValue.utf8), method)) }
        return table
    }()

    /// The method's place in `allCases`, for tables indexed by method (the loop's counters).
    public var index: Int {
        switch self {
        case .hello: 0
        case .sessionOpen: 1
        case .sessionClose: 2
        case .canvasInitialize: 3
        case .canvasOpen: 4
        case .canvasMinimize: 5
        case .canvasSubmit: 6
        case .canvasCancel: 7
        case .canvasFinishTransition: 8
        case .canvasState: 9
        case .pencilDoubleTap: 10
        case .pencilConfigure: 11
        case .drawingGet: 12
        case .drawingAddStroke: 13
        case .drawingAddText: 14
        case .drawingMoveText: 15
        case .drawingEditText: 16
        case .drawingUndo: 17
        case .drawingRedo: 18
        case .drawingClear: 19
        case .drawingErase: 20
        case .documentList: 21
        case .documentInfo: 22
        case .documentFlatten: 23
        case .documentRevisions: 24
        case .documentRestore: 25
        case .documentGet: 26
        case .documentUploadBegin: 27
        case .documentUploadPart: 28
        case .documentUploadStatus: 29
        case .documentUploadAbort: 30
        case .documentUploadCommit: 31
        }
    }

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
