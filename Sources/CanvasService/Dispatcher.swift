import CanvasCore
import CanvasProtocol
import Foundation
import Synchronization
public import Logging
import InkRendering
import DocumentStore

/// Turns request frames into exactly one reply and any events, and runs the sessions' timers.
///
/// It owns every session and does no socket I/O: the server hands it frames and the time, and
/// sends what it returns. Tests can drive it with a made-up clock.
public final class Dispatcher {
    public struct Output {
        /// A reply and the routing envelope of the request it answers.
        public struct Reply {
            public var envelope: [[UInt8]]
            public var bytes: [UInt8]
        }

        /// Replies to send now: to this request, unless it waits for a save, and to earlier
        /// requests whose saves finished.
        public var replies: [Reply] = []
        /// Events to publish, each as its two frames. They go out before the replies.
        public var events: [[[UInt8]]] = []
    }

    /// Where saves run, given the document each writes. The server runs them on workers beside
    /// its loop, so no request waits on a disk; nil runs each save in place (tests, the fuzzer).
    public typealias SaveExecutor = @Sendable (_ document: String, _ save: @escaping @Sendable () -> Void) -> Void

    /// What a job run off the loop gives back: a save's new summary, a document read's
    /// result, or a page's geometry.
    enum JobOutcome: Sendable {
        case saved(Result<DocumentSummary, DocumentError>)
        case read(Result<[String: JSONValue], ProtocolError>)
        case reply([UInt8])
        case page(Result<PageSummary, DocumentError>)
    }

    /// A job started off the loop (a save, or a read of a document) and not yet answered.
    private struct PendingSave {
        enum Kind {
            /// `publishes`: whether it makes a revision, and so a `document.saved`.
            case document(method: String, publishes: Bool)
            /// A submit into its document target: the session waits, out of the table, with
            /// the requests that came for it meanwhile queued in `parked`.
            case submit(ServiceSession, fingerprint: [UInt8])
            /// `document.list`, `.info` or `.revisions`.
            case read
            /// `canvas.open` on a document page, waiting for the page's geometry; the session
            /// is parked as for a submit.
            case openTarget(ServiceSession, fingerprint: [UInt8])
            /// `drawing.get` of a large drawing, encoded off the loop; the session is parked.
            case sessionRead(ServiceSession, fingerprint: [UInt8])
        }
        let kind: Kind
        let request: Request
        let envelope: [[UInt8]]
        let client: String?
    }

    /// A session whose submit is saving: who owns it, and what came for it since, in order.
    private struct ParkedSession {
        let owner: String?
        var connection: [UInt8]? = nil
        var queue: [(frames: [[UInt8]], envelope: [[UInt8]], client: String?)] = []
    }

    /// Finished saves, posted by whichever thread ran them.
    private final class SaveInbox: Sendable {
        private let finished = Mutex<[(job: UInt64, outcome: JobOutcome)]>([])
        func post(_ job: UInt64, _ outcome: JobOutcome) { finished.withLock { $0.append((job, outcome)) } }
        func take() -> [(job: UInt64, outcome: JobOutcome)] {
            finished.withLock { list in
                defer { list.removeAll() }
                return list
            }
        }
    }

    private struct Timer {
        let deadline: ContinuousClock.Instant
        let session: String
        let ticket: TransitionTicket
    }

    private var sessions: [String: ServiceSession] = [:]
    private var timers: [Timer] = []
    private var events: [[[UInt8]]] = []
    private var replies: [Output.Reply] = []
    private let saveExecutor: SaveExecutor?
    /// Where document reads run (nil: in place). Reads are bounded in time by the store; this
    /// bounds how many may wait.
    private let readExecutor: SaveExecutor?
    private var pendingReads = 0
    static let maxPendingReads = 64
    private let inbox = SaveInbox()
    private var pendingSaves: [UInt64: PendingSave] = [:]
    private var nextSaveJob: UInt64 = 0
    private var parked: [String: ParkedSession] = [:]
    private let limits: Limits
    private let idleTimeout: Duration
    private let logger: Logger
    private var now = ContinuousClock.now
    /// nil when the document folder could not be used: document methods then answer UNAVAILABLE.
    private let documents: DocumentMethods?
    /// Sequence numbers of the server-wide `documents.*` events.
    private var documentSeq: UInt64 = 0
    /// Who sent the request being answered.
    private var client: String?
    /// The connection it came on (its routing id), for the per-client session limit when
    /// clients are not authenticated.
    private var connection: [UInt8]?
    /// Whether clients are authenticated: sessions are then private to their owner, and
    /// nothing server-wide names them.
    private let authenticated: Bool

    public static let serverName = "canvasd/0.2.0"

    /// Methods this server answers, as `hello` lists them.
    public static let methods = [
        "hello", "session.open", "session.close",
        "canvas.initialize", "canvas.open", "canvas.minimize", "canvas.submit", "canvas.cancel",
        "canvas.finishTransition", "canvas.state",
        "pencil.doubleTap", "pencil.configure",
        "drawing.get", "drawing.addStroke", "drawing.addText", "drawing.moveText",
        "drawing.undo", "drawing.redo", "drawing.clear", "drawing.erase",
    ] + DocumentMethods.methods

    private static let methodNames = Set(methods)
    /// Drawings up to this many points are encoded in the loop; larger ones on a worker.
    static let inlineDrawingPoints = 2_000

    /// `drawing.get`'s result as JSON text, straight from the drawing's own encoding.
    static func drawingResult(_ drawing: Drawing, canUndo: Bool, canRedo: Bool) -> [UInt8] {
        var text = Array((try? JSONEncoder().encode(drawing)) ?? Data(#"{"strokes":[],"texts":[]}"#.utf8))
        guard text.last == UInt8(ascii: "}") else { return Array(#"{"strokes":[],"texts":[]}"#.utf8) }
        text.removeLast()
        text += Array(#","canUndo":\#(canUndo),"canRedo":\#(canRedo)}"#.utf8)
        return text
    }

    /// Session methods that change nothing, so a retry whose reply was not kept may run again.
    static let readOnlyMethods: Set<String> = ["canvas.state", "drawing.get"]

    public init(configuration: ServiceConfiguration, logger: Logger, saves: SaveExecutor? = nil, reads: SaveExecutor? = nil) {
        self.limits = configuration.limits
        self.saveExecutor = saves
        self.readExecutor = reads
        self.idleTimeout = configuration.idleTimeout
        self.logger = logger
        if case .curve = configuration.security { authenticated = true } else { authenticated = false }
        do {
            let store = try DocumentStore(folder: URL(fileURLWithPath: configuration.documentsPath),
                                          keepRevisions: configuration.keepRevisions,
                                          maxInkPointsPerPage: configuration.limits.maxPointsPerPage)
            documents = DocumentMethods(store: store, limits: configuration.limits)
        } catch {
            logger.error("documents not served", metadata: ["folder": "\(configuration.documentsPath)", "error": "\(error)"])
            documents = nil
        }
    }

    public var sessionCount: Int { sessions.count + parked.count }

    /// Whether `client` may receive events under `topic` (a subscription prefix): only topics
    /// inside one of its own sessions (`<session>.` and longer), or the shared `documents.`
    /// topic. A shorter prefix would match other clients' sessions, so it is refused.
    /// `always`: check even without CurveZMQ (web peers, whose sessions belong to their token).
    public func maySubscribe(_ client: String?, to topic: [UInt8], always: Bool = false) -> Bool {
        guard authenticated || always else { return true }
        let shared = Array("documents.".utf8)
        if topic.count >= shared.count ? topic.starts(with: shared) : false { return true }
        guard let dot = topic.firstIndex(of: UInt8(ascii: ".")) else { return false }
        let session = String(decoding: topic[..<dot], as: UTF8.self)
        if let open = sessions[session] { return open.owner == client }
        if let saving = parked[session] { return saving.owner == client }
        return false
    }

    // MARK: Requests

    /// Answers one request (its frames without the routing envelope) from `client`, the
    /// authenticated identity that sent it (nil without authentication). The reply carries
    /// `envelope` back; it may come later, from `collectSaves`, if the request waits for a save.
    /// `droppedFrames` counts frames past those given, which the server read and threw away
    /// (a request of that many frames is refused, but not kept in memory to be refused).
    public func handle(_ frames: [[UInt8]], envelope: [[UInt8]] = [], from client: String? = nil, droppedFrames: Int = 0,
                       at now: ContinuousClock.Instant) -> Output {
        self.now = now
        events = []
        replies = []
        receive(frames, envelope: envelope, from: client, droppedFrames: droppedFrames)
        finishSaves()
        return Output(replies: replies, events: events)
    }

    /// Answers the requests whose saves have finished since the last call (and whatever queued
    /// behind them). The server calls it when its save queue says a save is done.
    public func collectSaves(at now: ContinuousClock.Instant) -> Output {
        self.now = now
        events = []
        replies = []
        finishSaves()
        return Output(replies: replies, events: events)
    }

    private func receive(_ frames: [[UInt8]], envelope: [[UInt8]], from client: String?, droppedFrames: Int = 0) {
        self.client = client
        connection = envelope.first
        let size = frames.reduce(0) { $0 + $1.count } + (frames.count + droppedFrames) * Limits.frameOverheadBytes
        guard size <= limits.maxMessageBytes else {
            let error = ProtocolError(.payloadTooLarge, "the request is \(size) bytes; the limit is \(limits.maxMessageBytes)",
                                      data: ["limit": .integer(Int64(limits.maxMessageBytes)), "size": .integer(Int64(size))])
            replies.append(Output.Reply(envelope: envelope, bytes: ReplyEncoder.failure(id: nil, error: error)))
            return
        }
        switch RequestDecoder.decode(frames) {
        case .failure(let unreadable):
            replies.append(Output.Reply(envelope: envelope, bytes: ReplyEncoder.failure(id: unreadable.id, error: unreadable.error)))
        case .success(let request):
            if let reply = answer(request, frames: frames, envelope: envelope) {
                replies.append(Output.Reply(envelope: envelope, bytes: reply))
            }
        }
    }

    /// The reply, or nil when the request waits: for its save, or behind another's.
    private func answer(_ request: Request, frames: [[UInt8]], envelope: [[UInt8]]) -> [UInt8]? {
        let params = Params(request.params)
        do throws(ProtocolError) {
            switch request.method {
            case "hello": return ReplyEncoder.success(id: request.id, result: hello())
            case "session.open": return ReplyEncoder.success(id: request.id, result: try openSession(params))
            case let method where DocumentMethods.saves(method):
                let (document, save, publishes) = try documentStore().prepareSave(method, params)
                startSave(document, save, PendingSave(kind: .document(method: method, publishes: publishes), request: request,
                                                      envelope: envelope, client: client))
                return nil
            case let method where method.hasPrefix("document.") && DocumentMethods.methods.contains(method):
                // Reading a document is file and PDF work: off the loop, like a save.
                let documents = try documentStore()
                try startRead(PendingSave(kind: .read, request: request, envelope: envelope, client: client)) {
                    .read(Result { () throws(ProtocolError) in try documents.call(method, params) })
                }
                return nil
            default: break
            }
            // A session whose submit is saving answers nothing until the save is done: what
            // comes for it waits, in order, and runs after; errors too, so that every reply of
            // a session keeps its order.
            if let sessionID = request.session, !parked.isEmpty, let saving = parked[sessionID], saving.owner == client {
                parked[sessionID]?.queue.append((frames, envelope, client))
                return nil
            }
            guard Self.methodNames.contains(request.method) else {
                throw ProtocolError(.methodNotFound, "no method \"\(request.method)\"", data: ["method": .string(request.method)])
            }
            guard let sessionID = request.session else {
                throw ProtocolError(.invalidRequest, "\(request.method) needs a session")
            }
            // Taken out of the table while it is worked on, so its buffers (the reply cache, the
            // drawing) have one owner and change in place instead of being copied per request.
            // Another client's session is answered exactly like one that does not exist, so
            // session ids cannot be probed.
            func unknown() -> ProtocolError {
                ProtocolError(.unknownSession, "no session \"\(sessionID)\": never opened, closed, or expired",
                              data: ["session": .string(sessionID)])
            }
            guard var session = sessions.removeValue(forKey: sessionID) else { throw unknown() }
            guard session.owner == client else {
                sessions[sessionID] = session
                throw unknown()
            }
            // Closed, or parked with its save: either way not put back here.
            var keptOut = false
            defer { if !keptOut { sessions[sessionID] = session } }
            session.lastActive = now
            // A retry of a request already answered gets the same reply, and nothing runs twice.
            let fingerprint = Self.fingerprint(request)
            switch session.replies.lookup(request.id, request: fingerprint) {
            case .retry(let cached):
                return cached
            case .notKept where Self.readOnlyMethods.contains(request.method):
                break   // nothing changed the first time: answering again is the same answer
            case .notKept:
                throw ProtocolError(.unavailable, "id \(request.id) was answered, but its reply was over \(limits.maxCachedReplyBytes) bytes and not kept; it is not run twice",
                                    data: ["reason": "replyNotKept", "limit": .integer(Int64(limits.maxCachedReplyBytes))])
            case .reused:
                // Well-formed, but it clashes with what the session already holds under that id.
                throw ProtocolError(.conflict, "id \(request.id) was already used for a different request in this session",
                                    data: ["id": request.id.json])
            case .miss:
                break
            }
            if request.method == "canvas.open", let target = try? documentStore().targetParams(params) {
                // The page is looked up off the loop; the session waits for it, as for a submit.
                let documents = try documentStore()
                try startRead(PendingSave(kind: .openTarget(session, fingerprint: fingerprint), request: request,
                                          envelope: envelope, client: client)) {
                    .page(Result { () throws(DocumentError) in try documents.store.page(target.name, target.page) })
                }
                keptOut = true
                parked[sessionID] = ParkedSession(owner: session.owner, connection: session.connection)
                return nil
            }
            if request.method == "drawing.get", session.canvas.phase == .open,
               session.canvas.drawing.pointCount > Self.inlineDrawingPoints {
                // Encoding a large drawing takes long enough to hold up everyone: off the loop,
                // from a snapshot (the drawing is a value), with the session parked meanwhile.
                let id = request.id, drawing = session.canvas.drawing
                let undo = session.canvas.canvas.editableDrawing?.canUndo ?? false
                let redo = session.canvas.canvas.editableDrawing?.canRedo ?? false
                try startRead(PendingSave(kind: .sessionRead(session, fingerprint: fingerprint), request: request,
                                          envelope: envelope, client: client)) {
                    .reply(ReplyEncoder.success(id: id, rawResult: Self.drawingResult(drawing, canUndo: undo, canRedo: redo)))
                }
                keptOut = true
                parked[sessionID] = ParkedSession(owner: session.owner, connection: session.connection)
                return nil
            }
            if request.method == "canvas.submit", let target = session.target,
               session.canvas.phase == .open || session.canvas.phase == .minimized {
                // A submit into a document saves first, off the loop; the session waits for it.
                do throws(ProtocolError) {
                    _ = try params.bool("imageData", default: false)
                    let save = try documentStore().targetSave(target, session.canvas.drawing)
                    keptOut = true
                    parked[sessionID] = ParkedSession(owner: session.owner, connection: session.connection)
                    startSave(target.name, save, PendingSave(kind: .submit(session, fingerprint: fingerprint), request: request,
                                                             envelope: envelope, client: client))
                    return nil
                } catch {
                    let reply = ReplyEncoder.failure(id: request.id, error: error)
                    session.replies.store(reply, for: request.id, request: fingerprint)
                    return reply
                }
            }
            let reply = runAndRemember(request, params, fingerprint, &session, saved: nil)
            if request.method == "session.close" {
                keptOut = true
                closeSession(sessionID, event: "session.closed", last: session)
            }
            return reply
        } catch {
            return ReplyEncoder.failure(id: request.id, error: error)
        }
    }

    /// What a retry must repeat: `{"method":…,"params":…}` as `JSONCodec.serialize` writes it
    /// (keys sorted, numbers in one form), written directly instead of building that object.
    static func fingerprint(_ request: Request) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(64)
        out.append(contentsOf: #"{"method":"#.utf8)
        JSONCodec.append(.string(request.method), to: &out)
        out.append(contentsOf: #","params":"#.utf8)
        JSONCodec.append(.object(request.params), to: &out)
        out.append(UInt8(ascii: "}"))
        return out
    }

    /// Runs a session's request and remembers its reply for retries. `saved` and `page` are
    /// what a job off the loop found for it: a submit's save, an open's page.
    private func runAndRemember(_ request: Request, _ params: Params, _ fingerprint: [UInt8], _ session: inout ServiceSession,
                                saved: Result<DocumentSummary, DocumentError>?,
                                page: Result<PageSummary, DocumentError>? = nil) -> [UInt8] {
        let reply: [UInt8]
        do throws(ProtocolError) {
            reply = ReplyEncoder.success(id: request.id, result: try run(request.method, params, &session, saved: saved, page: page))
        } catch {
            reply = ReplyEncoder.failure(id: request.id, error: error)
        }
        session.replies.store(reply, for: request.id, request: fingerprint)
        return reply
    }

    // MARK: Saves

    private func startSave(_ document: String, _ save: @escaping PreparedSave, _ pending: PendingSave) {
        nextSaveJob += 1
        let job = nextSaveJob, inbox = self.inbox
        pendingSaves[job] = pending
        let work: @Sendable () -> Void = { inbox.post(job, .saved(Result(catching: save))) }
        if let saveExecutor { saveExecutor(document, work) } else { work() }
    }

    /// Starts a read of a document off the loop, or refuses at once when too many wait (each is
    /// bounded in time, but a flood of them must not grow without end).
    private func startRead(_ pending: PendingSave, _ read: @escaping @Sendable () -> JobOutcome) throws(ProtocolError) {
        guard pendingReads < Self.maxPendingReads else {
            throw ProtocolError(.unavailable, "\(pendingReads) document reads are waiting; try again",
                                data: ["reason": "busy", "limit": .integer(Int64(Self.maxPendingReads))])
        }
        pendingReads += 1
        nextSaveJob += 1
        let job = nextSaveJob, inbox = self.inbox
        pendingSaves[job] = pending
        let work: @Sendable () -> Void = { inbox.post(job, read()) }
        // Reads of one document need not wait for each other: each job is its own key.
        if let readExecutor { readExecutor("read \(job)", work) } else { work() }
    }

    /// Answers every finished save, then runs what queued behind a parked session (which may
    /// start another save, and park it again).
    private func finishSaves() {
        while case let finished = inbox.take(), !finished.isEmpty {
            for (job, outcome) in finished {
                guard let pending = pendingSaves.removeValue(forKey: job) else { continue }
                client = pending.client
                switch (pending.kind, outcome) {
                case (.document(let method, let publishes), .saved(let outcome)):
                    let reply: [UInt8]
                    switch outcome {
                    case .success(let summary):
                        let result = DocumentMethods.json(summary)
                        if publishes { publishSaved(result, cause: method, session: nil) }
                        reply = ReplyEncoder.success(id: pending.request.id, result: result)
                    case .failure(let error):
                        reply = ReplyEncoder.failure(id: pending.request.id, error: DocumentMethods.protocolError(error))
                    }
                    replies.append(Output.Reply(envelope: pending.envelope, bytes: reply))
                case (.read, .read(let outcome)):
                    pendingReads -= 1
                    let reply: [UInt8]
                    switch outcome {
                    case .success(let result): reply = ReplyEncoder.success(id: pending.request.id, result: result)
                    case .failure(let error): reply = ReplyEncoder.failure(id: pending.request.id, error: error)
                    }
                    replies.append(Output.Reply(envelope: pending.envelope, bytes: reply))
                case (.submit(var session, let fingerprint), .saved(let outcome)):
                    let reply = runAndRemember(pending.request, Params(pending.request.params), fingerprint, &session, saved: outcome)
                    replies.append(Output.Reply(envelope: pending.envelope, bytes: reply))
                    unpark(session)
                case (.sessionRead(var session, let fingerprint), .reply(let reply)):
                    pendingReads -= 1
                    session.replies.store(reply, for: pending.request.id, request: fingerprint)
                    replies.append(Output.Reply(envelope: pending.envelope, bytes: reply))
                    unpark(session)
                case (.openTarget(var session, let fingerprint), .page(let outcome)):
                    pendingReads -= 1
                    let reply = runAndRemember(pending.request, Params(pending.request.params), fingerprint, &session,
                                               saved: nil, page: outcome)
                    replies.append(Output.Reply(envelope: pending.envelope, bytes: reply))
                    unpark(session)
                default:
                    preconditionFailure("a job's outcome does not match its kind")
                }
            }
        }
    }

    /// Puts a session back in the table after its job, and runs what queued behind it (which
    /// may park it again).
    private func unpark(_ session: ServiceSession) {
        sessions[session.id] = session
        let waiting = parked.removeValue(forKey: session.id)?.queue ?? []
        for (index, next) in waiting.enumerated() {
            if parked[session.id] != nil {
                // Parked again by a request in the queue: the rest wait once more.
                parked[session.id]?.queue += waiting[index...]
                break
            }
            receive(next.frames, envelope: next.envelope, from: next.client)
        }
    }

    private func run(_ method: String, _ params: Params, _ session: inout ServiceSession,
                     saved savedOutcome: Result<DocumentSummary, DocumentError>?,
                     page pageOutcome: Result<PageSummary, DocumentError>?) throws(ProtocolError) -> [String: JSONValue] {
        switch method {
        case "session.close":
            return ["closed": true]
        case "canvas.initialize":
            session.canvas.initialize()
            return ["state": .string(session.canvas.phase.rawValue)]
        case "canvas.state":
            return stateResult(session)
        case "canvas.open":
            if params.has("document") || params.has("page") {
                // The target is checked now, so nobody draws for a page that is not there.
                let (name, page) = try documentStore().targetParams(params)
                guard let pageOutcome else { preconditionFailure("canvas.open on a document runs after its page is read") }
                let geometry = try documentStore().run { () throws(DocumentError) in try pageOutcome.get() }
                if session.canvas.phase == .closed || session.canvas.phase == .minimized {
                    session.target = DocumentTarget(name: name, page: page)
                    session.size = (Int(geometry.width.rounded(.up)), Int(geometry.height.rounded(.up)))
                } else if session.canvas.phase == .open, session.target?.name != name || session.target?.page != page {
                    // The open drawing was made for its own page; keeping it while saying "open"
                    // would let the client believe its ink goes to the page it just named.
                    var data: [String: JSONValue] = [:]
                    if let current = session.target { data = ["document": .string(current.name), "page": .integer(Int64(current.page))] }
                    let current = session.target.map { "page \($0.page) of \($0.name)" } ?? "no document"
                    throw ProtocolError(.conflict, "the canvas is already open on \(current); submit or cancel it first", data: data)
                }
            }
            if let size = try sizeParam(params) { session.size = size }
            try perform(&session, imageData: false) { canvas throws(CanvasRejection) in try canvas.open() }
            return ["state": .string(session.canvas.phase.rawValue)]
        case "canvas.minimize", "canvas.submit", "canvas.cancel":
            let wantsImage = try params.bool("imageData", default: false)
            // A submit with a document target saves first; only a save that worked ends the
            // drawing, so a failed one leaves the canvas as it was for another try.
            var saved: [String: JSONValue]?
            if method == "canvas.submit", session.target != nil,
               session.canvas.phase == .open || session.canvas.phase == .minimized {
                guard let outcome = savedOutcome else { preconditionFailure("a submit into a document runs after its save") }
                saved = DocumentMethods.json(try documentStore().run { () throws(DocumentError) in try outcome.get() })
            }
            let result = try perform(&session, imageData: wantsImage) { canvas throws(CanvasRejection) in
                switch method {
                case "canvas.minimize": return try canvas.minimize()
                case "canvas.submit": return try canvas.submit()
                default: return try canvas.cancel()
                }
            }
            var reply = result ?? [:]
            reply["state"] = .string(session.canvas.phase.rawValue)
            if method != "canvas.minimize" { session.target = nil }
            if let saved {
                reply["document"] = .object(saved)
                // An empty drawing saves nothing: the reply names the current revision, and no
                // event announces a save that did not happen.
                if reply["hasContent"] == .bool(true) { publishSaved(saved, cause: method, session: &session) }
            }
            return reply
        case "canvas.finishTransition":
            try perform(&session, imageData: false) { canvas throws(CanvasRejection) in try canvas.finishTransition() }
            return ["state": .string(session.canvas.phase.rawValue)]
        case "pencil.doubleTap":
            return doubleTap(&session)
        case "pencil.configure":
            // Only the fields given change; the rest keep what the session has.
            var configuration = session.canvas.pencil.configuration
            if params.has("supported") { configuration.supported = try params.bool("supported", default: true) }
            if params.has("preferredTapAction") {
                configuration.preferredTapAction = try params.choice("preferredTapAction", PreferredTapAction.self)
            }
            if params.has("policy") { configuration.policy = try params.choice("policy", TapPolicy.self) }
            // `initialized` as the result reports it: true is canvas.initialize; there is no way back.
            let initialize = try params.bool("initialized", default: session.canvas.pencil.initialized)
            if !initialize && session.canvas.pencil.initialized {
                throw ProtocolError(.invalidParams, "initialized: an initialized plugin cannot be uninitialized",
                                    data: ["field": "initialized"])
            }
            session.canvas.configurePencil(configuration)
            if initialize { session.canvas.initialize() }
            return ["pencil": pencilJSON(session), "state": .string(session.canvas.phase.rawValue)]
        case "drawing.get":
            try requireOpen(session)
            let drawing = session.canvas.drawing
            var result = (try? JSONCodec.value(of: drawing))?.objectValue ?? [:]
            result["canUndo"] = .bool(session.canvas.canvas.editableDrawing?.canUndo ?? false)
            result["canRedo"] = .bool(session.canvas.canvas.editableDrawing?.canRedo ?? false)
            return result
        default:
            return try edit(method, params, &session)
        }
    }

    // MARK: Documents

    private func documentStore() throws(ProtocolError) -> DocumentMethods {
        guard let documents else {
            throw ProtocolError(.unavailable, "the document folder is not usable; see the server's log", data: ["feature": "documents"])
        }
        return documents
    }

    /// `document.saved`: on the session that saved, if one did, and on the server-wide
    /// `documents` topic, which has its own sequence.
    private func publishSaved(_ summary: [String: JSONValue], cause: String, session: inout ServiceSession) {
        publish(&session, "document.saved", savedEvent(summary, cause: cause))
        publishSaved(summary, cause: cause, session: session.id)
    }

    private func publishSaved(_ summary: [String: JSONValue], cause: String, session: String?) {
        var data = savedEvent(summary, cause: cause)
        if let session, !authenticated { data["session"] = .string(session) }
        documentSeq += 1
        events.append(ReplyEncoder.event(session: "documents", name: "document.saved", seq: documentSeq, data: data))
    }

    private func savedEvent(_ summary: [String: JSONValue], cause: String) -> [String: JSONValue] {
        var data = summary
        data["cause"] = .string(cause)
        return data
    }

    // MARK: Sessions

    private func hello() -> [String: JSONValue] {
        let reported = limits.json.objectValue ?? [:]
        return [
            "protocol": .string(ProtocolVersion.string),
            "server": .string(Self.serverName),
            "methods": .array(Self.methods.map { .string($0) }),
            "limits": .object(reported),
            "idleTimeoutMs": .integer(Int64(idleTimeout.components.seconds * 1000)),
            "security": authenticated ? "curve" : "loopback",
        ]
    }

    private func openSession(_ params: Params) throws(ProtocolError) -> [String: JSONValue] {
        let pencil = params.has("pencil") ? try params.decode(PencilConfiguration.self, field: "pencil") : PencilConfiguration()
        let transitions = try transitionsParam(params)
        let initialized = try params.bool("initialized", default: true)
        let resultImages = try params.bool("resultImages", default: false)
        let size = try sizeParam(params)
        guard sessionCount < limits.maxSessions else {
            throw ProtocolError(.unavailable, "the server has its maximum of \(limits.maxSessions) sessions",
                                data: ["limit": .integer(Int64(limits.maxSessions))])
        }
        // One client: a key when clients are authenticated, a connection when they are not.
        let held = authenticated
            ? sessions.values.count(where: { $0.owner == client }) + parked.values.count(where: { $0.owner == client })
            : connection.map { mine in
                sessions.values.count(where: { $0.connection == mine }) + parked.values.count(where: { $0.connection == mine })
            } ?? 0
        if held >= limits.maxSessionsPerClient {
            throw ProtocolError(.unavailable, "this client has its maximum of \(limits.maxSessionsPerClient) sessions",
                                data: ["limit": .integer(Int64(limits.maxSessionsPerClient))])
        }
        var id: String
        repeat { id = String(UInt64.random(in: 1...UInt64.max), radix: 16) } while sessions[id] != nil || parked[id] != nil
        let session = ServiceSession(
            id: id, owner: client, connection: connection,
            canvas: CanvasSession(pencil: pencil, transitions: transitions, initialized: initialized),
            transitions: transitions, size: size, resultImages: resultImages, lastActive: now,
            replies: ReplyCache(capacity: limits.replyCacheSize, maxReplyBytes: limits.maxCachedReplyBytes,
                                maxBytes: limits.maxCachedBytesPerSession))
        sessions[id] = session
        logger.info("session opened", metadata: ["session": "\(id)", "transitions": "\(transitions)", "client": "\(client ?? "-")"])
        return [
            "session": .string(id),
            "state": .string(session.canvas.phase.rawValue),
            "pencil": pencilJSON(session),
            "transitions": transitionsJSON(transitions),
        ]
    }

    private func closeSession(_ id: String, event: String, last session: ServiceSession) {
        var session = session
        publish(&session, event, [:])
        sessions[id] = nil
        timers.removeAll { $0.session == id }
        logger.info("\(event)", metadata: ["session": "\(id)"])
    }

    /// Closes sessions idle for longer than the idle timeout. Returns the events to publish.
    public func expireIdle(at now: ContinuousClock.Instant) -> [[[UInt8]]] {
        self.now = now
        events = []
        for (id, session) in sessions where now - session.lastActive > idleTimeout {
            closeSession(id, event: "session.expired", last: session)
        }
        return events
    }

    // MARK: Timers

    public var nextDeadline: ContinuousClock.Instant? { timers.map(\.deadline).min() }

    /// Finishes the timed transitions whose time has come. Returns the events to publish.
    public func fireTimers(at now: ContinuousClock.Instant) -> [[[UInt8]]] {
        self.now = now
        events = []
        let due = timers.filter { $0.deadline <= now }
        timers.removeAll { $0.deadline <= now }
        for timer in due {
            guard var session = sessions[timer.session] else { continue }
            // A transition a client already finished leaves a stale timer: nothing to do.
            if let actions = try? session.canvas.finishTransition(timer.ticket) {
                run(actions, &session, imageData: false)
                sessions[timer.session] = session
            }
        }
        return events
    }

    // MARK: Canvas

    /// Runs a canvas command and its actions; returns the CanvasResult it produced, as JSON.
    @discardableResult
    private func perform(_ session: inout ServiceSession, imageData: Bool,
                         _ command: (inout CanvasSession) throws(CanvasRejection) -> [CanvasAction]) throws(ProtocolError) -> [String: JSONValue]? {
        let actions: [CanvasAction]
        do {
            actions = try command(&session.canvas)
        } catch {
            throw invalidState(error, session)
        }
        return run(actions, &session, imageData: imageData)
    }

    private func invalidState(_ rejection: CanvasRejection, _ session: ServiceSession) -> ProtocolError {
        ProtocolError(.invalidState, rejection.description,
                      data: ["reason": .string(rejection.rawValue), "state": .string(session.canvas.phase.rawValue)])
    }

    private func doubleTap(_ session: inout ServiceSession) -> [String: JSONValue] {
        let report = session.canvas.doubleTap()
        let canvasResult = run(report.actions, &session, imageData: false)
        var result: [String: JSONValue] = [
            "outcome": .string(report.outcome.name),
            "state": .string(session.canvas.phase.rawValue),
        ]
        var eventData: [String: JSONValue] = ["outcome": .string(report.outcome.name)]
        switch report.outcome {
        case .ignored(let reason):
            result["reason"] = .string(reason.rawValue)
            eventData["reason"] = .string(reason.rawValue)
        case .minimized:
            result["canvasResult"] = canvasResult.map { .object($0) }
        case .preference(_, let tools):
            result["tool"] = toolsJSON(tools)
        case .opened:
            break
        }
        publish(&session, "pencil.doubleTap", eventData)
        return result
    }

    /// Carries out a machine's actions: events, timers, log lines. Returns the CanvasResult
    /// emitted, if any, with the image when the caller asked for it.
    @discardableResult
    private func run(_ actions: [CanvasAction], _ session: inout ServiceSession, imageData: Bool) -> [String: JSONValue]? {
        var canvasResult: [String: JSONValue]?
        for action in actions {
            switch action {
            case .stateChanged(let from, let to, let cause):
                publish(&session, "canvas.stateChanged",
                        ["from": .string(from.rawValue), "to": .string(to.rawValue), "state": .string(to.rawValue),
                         "cause": .string(cause.rawValue)])
            case .emitResult(let result, let drawing, let cause):
                var json: [String: JSONValue] = ["action": .string(result.action.rawValue), "hasContent": .bool(result.hasContent)]
                let image = imageData || session.resultImages ? png(drawing, session) : nil
                if imageData, let image { json["imageData"] = .string(image) }
                canvasResult = json
                var eventData = json
                eventData["cause"] = .string(cause.rawValue)
                if session.resultImages, let image { eventData["imageData"] = .string(image) } else { eventData["imageData"] = nil }
                publish(&session, "canvas.result", eventData)
            case .startTransitionTimer(let ticket, let milliseconds):
                timers.append(Timer(deadline: now + .milliseconds(milliseconds), session: session.id, ticket: ticket))
            case .toolChanged(let tools):
                publish(&session, "pencil.toolChanged", ["tool": toolsJSON(tools)])
            case .logWarning(let message):
                logger.warning("\(message)", metadata: ["session": "\(session.id)"])
            }
        }
        return canvasResult
    }

    private func png(_ drawing: Drawing, _ session: ServiceSession) -> String? {
        let extent = InkRenderer.extent(of: drawing)
        let width = min(session.size?.width ?? extent.width, limits.maxImageSide)
        let height = min(session.size?.height ?? extent.height, limits.maxImageSide)
        do {
            return Data(try InkRenderer.png(drawing, width: width, height: height)).base64EncodedString()
        } catch {
            logger.error("imageData not rendered", metadata: ["session": "\(session.id)", "error": "\(error)"])
            return nil
        }
    }

    private func publish(_ session: inout ServiceSession, _ name: String, _ data: [String: JSONValue]) {
        events.append(ReplyEncoder.event(session: session.id, name: name, seq: session.nextSeq(), data: data))
    }

    // MARK: Drawing

    private func requireOpen(_ session: ServiceSession) throws(ProtocolError) {
        let phase = session.canvas.phase
        guard phase == .open else { throw invalidState(phase.isTransition ? .transition : .notOpen, session) }
    }

    private func edit(_ method: String, _ params: Params, _ session: inout ServiceSession) throws(ProtocolError) -> [String: JSONValue] {
        let drawing = session.canvas.drawing
        let edit: DrawingEdit
        switch method {
        case "drawing.addStroke":
            if case .array(let points)? = params.values["points"], points.count > limits.maxPointsPerStroke {
                throw tooLarge("points", points.count, limits.maxPointsPerStroke)
            }
            let stroke = try params.decode(Stroke.self)
            edit = .addStroke(stroke)
            if drawing.strokes.count >= limits.maxStrokesPerDrawing {
                throw tooLarge("strokes", drawing.strokes.count + 1, limits.maxStrokesPerDrawing)
            }
            let points = drawing.pointCount + stroke.points.count
            if points > limits.maxPointsPerDrawing { throw tooLarge("points", points, limits.maxPointsPerDrawing) }
        case "drawing.addText":
            let text = try params.decode(TextAnnotation.self)
            // Counted in Unicode code points, as JSON Schema's maxLength counts a string.
            let length = text.text.unicodeScalars.count
            if length > limits.maxTextLength { throw tooLarge("text", length, limits.maxTextLength) }
            if drawing.texts.count >= limits.maxTextsPerDrawing {
                throw tooLarge("texts", drawing.texts.count + 1, limits.maxTextsPerDrawing)
            }
            edit = .addText(text)
        case "drawing.moveText":
            edit = .moveText(index: Int(try params.integer("index", in: 0...Int64(Int32.max))),
                             x: try params.number("x"), y: try params.number("y"))
        case "drawing.erase":
            edit = .erase(try params.decode(EraseRequest.self))
        case "drawing.undo": edit = .undo
        case "drawing.redo": edit = .redo
        case "drawing.clear": edit = .clear
        default:
            throw ProtocolError(.methodNotFound, "no method \"\(method)\"")
        }
        let report: EditReport
        do {
            report = try session.canvas.edit(edit)
        } catch {
            switch error {
            case .rejected(let rejection): throw invalidState(rejection, session)
            case .invalid(.noSuchText(let index, let count)):
                throw ProtocolError(.notFound, "there is no text \(index); the drawing has \(count)",
                                    data: ["index": .integer(Int64(index)), "count": .integer(Int64(count))])
            case .invalid(.invalid(let validation)):
                throw ProtocolError(.invalidParams, "\(validation.field): \(validation.description)",
                                    data: ["field": .string(validation.field)])
            }
        }
        run(report.actions, &session, imageData: false)
        let after = session.canvas.drawing
        return [
            "changed": .bool(report.changed), "canUndo": .bool(report.canUndo), "canRedo": .bool(report.canRedo),
            "strokes": .integer(Int64(after.strokes.count)), "texts": .integer(Int64(after.texts.count)),
        ]
    }

    private func tooLarge(_ field: String, _ size: Int, _ limit: Int) -> ProtocolError {
        ProtocolError(.payloadTooLarge, "\(field): \(size) is over the limit of \(limit)",
                      data: ["field": .string(field), "limit": .integer(Int64(limit))])
    }

    // MARK: JSON shapes

    private func stateResult(_ session: ServiceSession) -> [String: JSONValue] {
        var result: [String: JSONValue] = [
            "state": .string(session.canvas.phase.rawValue),
            "hasContent": .bool(session.canvas.hasContent),
            "seq": .integer(Int64(session.seq)),
            "pencil": pencilJSON(session),
            "tool": toolsJSON(session.canvas.pencil.tools),
            "transitions": transitionsJSON(session.transitions),
        ]
        if let size = session.size { result["size"] = ["width": .integer(Int64(size.width)), "height": .integer(Int64(size.height))] }
        return result
    }

    private func pencilJSON(_ session: ServiceSession) -> JSONValue {
        let pencil = session.canvas.pencil
        return [
            "supported": .bool(pencil.configuration.supported),
            "preferredTapAction": .string(pencil.configuration.preferredTapAction.rawValue),
            "policy": .string(pencil.configuration.policy.rawValue),
            "initialized": .bool(pencil.initialized),
        ]
    }

    private func toolsJSON(_ tools: ToolSelection) -> JSONValue {
        ["current": .string(tools.current.rawValue), "previous": .string(tools.previous.rawValue)]
    }

    private func transitionsJSON(_ mode: TransitionMode) -> JSONValue {
        switch mode {
        case .instant: return "instant"
        case .manual: return "manual"
        case .timed(let ms): return ["ms": .integer(Int64(ms))]
        }
    }

    private func transitionsParam(_ params: Params) throws(ProtocolError) -> TransitionMode {
        switch params.values["transitions"] {
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

    private func sizeParam(_ params: Params) throws(ProtocolError) -> (width: Int, height: Int)? {
        guard let object = try params.object("size") else { return nil }
        let side = 1...Int64(limits.maxImageSide)
        let size = Params(object, at: "size")
        return (Int(try size.integer("width", in: side)), Int(try size.integer("height", in: side)))
    }
}
