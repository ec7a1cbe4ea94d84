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

    /// The method's place in `allCases`, for tables indexed by method (the loop's counters, the
    /// fingerprints of requests without params). Found among 32, not numbered by hand.
    public var index: Int { Self.ordered.firstIndex(of: self)! }
    private static let ordered = allCases

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

    /// What the server needs to know of a method to route and run it: one row a method, in one
    /// exhaustive switch, so a new method is a compile error here until each is said.
    public struct Traits: Equatable, Sendable {
        public let scope: Scope
        /// It changes nothing, so a retry whose reply was too large to keep may simply run again
        /// (a read answered again is the same answer, or a newer one).
        public let changesNothing: Bool
        /// It may need a job beside the loop before it runs (a page read, a document method, a
        /// large drawing's encoding); the others run at once, spared asking.
        public let mayNeedJob: Bool
        /// Run with a session kept by a shared store, its copy is confirmed (fenced) before it
        /// writes a document.
        public var needsFence: Bool { scope == .documentWrite }

        init(_ scope: Scope, changesNothing: Bool = false, mayNeedJob: Bool? = nil) {
            self.scope = scope
            self.changesNothing = changesNothing
            self.mayNeedJob = mayNeedJob ?? (scope == .documentRead || scope == .documentWrite)
        }
    }

    public var traits: Traits {
        switch self {
        case .hello, .sessionOpen: Traits(.server)
        case .sessionClose: Traits(.session)
        case .canvasInitialize, .canvasMinimize, .canvasSubmit, .canvasCancel, .canvasFinishTransition: Traits(.session)
        // The page it names (and with `reopen`, its ink) is read beside the loop.
        case .canvasOpen: Traits(.session, mayNeedJob: true)
        case .canvasState: Traits(.session, changesNothing: true)
        case .pencilDoubleTap, .pencilConfigure: Traits(.session)
        // A large drawing is encoded beside the loop.
        case .drawingGet: Traits(.session, changesNothing: true, mayNeedJob: true)
        case .drawingAddStroke, .drawingAddText, .drawingMoveText, .drawingEditText, .drawingUndo, .drawingRedo, .drawingClear,
             .drawingErase: Traits(.session)
        case .documentList, .documentInfo, .documentRevisions, .documentGet, .documentUploadStatus:
            Traits(.documentRead, changesNothing: true)
        // An upload's parts are kept in memory, but are also answered off the loop: copying a
        // part is cheap, the order of replies per client is kept, and the loop stays free.
        case .documentUploadBegin, .documentUploadPart, .documentUploadAbort: Traits(.documentRead)
        case .documentFlatten, .documentRestore, .documentUploadCommit: Traits(.documentWrite)
        }
    }

    public var scope: Scope { traits.scope }

    /// As `Traits.changesNothing`.
    public var changesNothing: Bool { traits.changesNothing }
}
