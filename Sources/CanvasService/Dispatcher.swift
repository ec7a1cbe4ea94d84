import CanvasCore
public import CanvasProtocol
import DocumentStore
import Foundation
public import Logging

/// Turns request frames into exactly one reply and any events, and runs the sessions' timers.
///
/// It routes each request by its `Method`: server methods at once, document methods to jobs
/// off the loop, session methods through the session's slot in the `SessionTable` (ready,
/// running, or waiting for a job with requests queued behind it). It does no socket I/O: the
/// server hands it frames and the time, and sends what it returns, so tests can drive it with
/// a made-up clock.
public final class Dispatcher {
    public struct Output {
        /// A reply and the routing envelope of the request it answers.
        public struct Reply {
            public var envelope: [[UInt8]]
            public var bytes: [UInt8]
        }

        /// Replies to send now: to this request, unless it waits for a job, and to earlier
        /// requests whose jobs finished.
        public var replies: [Reply] = []
        /// Events to publish, each as its two frames. They go out before the replies.
        public var events: [[[UInt8]]] = []
    }

    /// Where saves run, given the document each writes. The server runs them on workers beside
    /// its loop, so no request waits on a disk; nil runs each save in place (tests, the fuzzer).
    public typealias SaveExecutor = @Sendable (_ document: String, _ save: @escaping @Sendable () -> Void) -> Void

    public static let serverName = ServerMethods.serverName
    /// Drawings up to this many points are encoded in the loop, and their result images rendered
    /// there when small too (ActionExecutor.rendersOffLoop); larger ones on a worker.
    static let inlineDrawingPoints = 2_000

    private var table = SessionTable()
    private var timers = TransitionTimers()
    private var jobs: Jobs
    private let server: ServerMethods
    private let canvas: CanvasMethods
    /// nil when the document folder could not be used: document methods then answer UNAVAILABLE.
    private let documents: DocumentMethods?
    private let limits: Limits
    /// Sheds large replies when the process is over its memory budget.
    private var memory: MemoryPressure
    private let idleTimeout: Duration
    private let logger: Logger
    /// Whether clients are authenticated: sessions are then private to their owner, and
    /// nothing server-wide names them.
    private let authenticated: Bool
    /// Sequence numbers of the server-wide `documents.*` events.
    private var documentSeq: UInt64 = 0
    /// With `--session-store`: sessions written there before each acknowledgement, and taken
    /// over from there when another instance held them. nil costs nothing.
    private let shared: SharedSessions?
    private let metrics: ServiceMetrics?

    public convenience init(configuration: ServiceConfiguration, logger: Logger, saves: SaveExecutor? = nil, reads: SaveExecutor? = nil) {
        self.init(configuration: configuration, logger: logger, saves: saves, reads: reads, shared: nil)
    }

    init(configuration: ServiceConfiguration, logger: Logger, saves: SaveExecutor?, reads: SaveExecutor?, shared: SharedSessions?,
         metrics: ServiceMetrics? = nil) {
        self.shared = shared
        self.metrics = metrics
        limits = configuration.limits
        memory = MemoryPressure(budget: configuration.limits.memoryBudgetBytes)
        idleTimeout = configuration.idleTimeout
        self.logger = logger
        if case .curve = configuration.security { authenticated = true } else { authenticated = false }
        jobs = Jobs(saves: saves, reads: reads)
        do {
            let store = try DocumentStore(folder: URL(fileURLWithPath: configuration.documentsPath),
                                          keepRevisions: configuration.keepRevisions,
                                          maxInkPointsPerPage: configuration.limits.maxPointsPerPage, saveMode: configuration.saveMode)
            documents = DocumentMethods(store: store, limits: configuration.limits)
        } catch {
            logger.error("documents not served", metadata: ["folder": "\(configuration.documentsPath)", "error": "\(error)"])
            documents = nil
        }
        let params = SessionParams(limits: limits)
        server = ServerMethods(limits: limits, params: params, idleTimeout: idleTimeout, authenticated: authenticated, logger: logger,
                               shared: shared, instance: configuration.instanceName)
        canvas = CanvasMethods(params: params, executor: ActionExecutor(logger: logger, maxImageSide: limits.maxImageSide),
                               documents: documents)
    }

    public var sessionCount: Int { table.count }
    /// Jobs started beside the loop and not yet answered.
    public var jobsInFlight: Int { jobs.inFlight }

    /// Whether `client` may receive events under `topic`. Without authentication every local
    /// client may; with it, only its own sessions' topics and the shared `documents.` topic.
    /// `always`: check even without CurveZMQ (web peers, whose sessions belong to their token).
    public func maySubscribe(_ client: String?, to topic: [UInt8], always: Bool = false) -> Bool {
        if !(authenticated || always) || table.maySubscribe(client, to: topic) { return true }
        // A session held by another instance (or none yet): its owner as the store has it.
        guard let shared, let dot = topic.firstIndex(of: UInt8(ascii: ".")) else { return false }
        let id = String(decoding: topic[..<dot], as: UTF8.self)
        return !table.contains(id) && shared.owner(of: id) == (client ?? "")
    }

    // MARK: Turns

    /// Answers one request (its frames without the routing envelope) from `client`, the
    /// authenticated identity that sent it (nil without authentication). The reply carries
    /// `envelope` back; it may come later, from `collectSaves`, if the request waits for a job.
    /// `droppedFrames` counts frames past those given, which the server read and threw away
    /// (a request of that many frames is refused, but not kept in memory to be refused).
    ///
    /// `sendingAtOnce`, when given, sends a reply that nothing will change any more before the
    /// rest of the turn (remembering it for retries, putting the session back): a read whose
    /// reply is ready. Such a reply is not in the output. The server passes it when it was
    /// idle, so the client waits for less; in a burst it lets the replies gather instead.
    ///
    /// `authenticate`, for web peers of a server with access tokens, decides the client from the
    /// request as decoded here (its `token`), before anything runs: what is checked is what runs.
    public func handle(_ frames: [[UInt8]], envelope: [[UInt8]] = [], from client: String? = nil, droppedFrames: Int = 0,
                       at now: ContinuousClock.Instant, sendingAtOnce send: ((Output.Reply) -> Void)? = nil,
                       authenticate: Authenticator? = nil) -> Output {
        var call = Call(client: client, connection: envelope.first, now: now, sendingAtOnce: send)
        receive(frames, envelope: envelope, droppedFrames: droppedFrames, authenticate: authenticate, &call)
        finishJobs(&call)
        return end(call)
    }

    /// Answers the requests whose jobs have finished since the last call (and whatever queued
    /// behind them). The server calls it when its job queues say one is done.
    public func collectSaves(at now: ContinuousClock.Instant) -> Output {
        var call = Call(now: now)
        finishJobs(&call)
        return end(call)
    }

    public var nextDeadline: ContinuousClock.Instant? { timers.nextDeadline }

    /// Finishes the timed transitions whose time has come. Returns the events to publish.
    public func fireTimers(at now: ContinuousClock.Instant) -> [[[UInt8]]] {
        var call = Call(now: now)
        for timer in timers.due(at: now) { fire(timer.ticket, on: timer.session, &call) }
        return end(call).events
    }

    /// Closes sessions idle for longer than the idle timeout. Returns the events to publish.
    public func expireIdle(at now: ContinuousClock.Instant) -> [[[UInt8]]] {
        var call = Call(now: now)
        for session in table.idle(before: now - idleTimeout) {
            guard let shared else {
                close(session, event: "session.expired", &call)
                continue
            }
            // Announced only by the instance that still held it; a copy another instance took
            // over (or one the store could not be asked about) is just let go.
            if (try? shared.remove(session.id)) == true {
                close(session, event: "session.expired", &call)
            } else {
                table.remove(session.id)
                timers.cancel(session: session.id)
            }
        }
        return end(call).events
    }

    private func end(_ call: Call) -> Output {
        timers.add(call.timers)
        return call.output
    }

    // MARK: Routing

    /// Who sent a decoded request (nil: no one in particular), or why it is refused.
    public typealias Authenticator = (Request) -> Result<String?, ProtocolError>

    private func receive(_ frames: [[UInt8]], envelope: [[UInt8]], droppedFrames: Int = 0, authenticate: Authenticator? = nil,
                         _ call: inout Call) {
        let size = frames.reduce(0) { $0 + $1.count } + (frames.count + droppedFrames) * Limits.frameOverheadBytes
        guard size <= limits.maxMessageBytes else {
            let error = ProtocolError(.payloadTooLarge, "the request is \(size) bytes; the limit is \(limits.maxMessageBytes)",
                                      data: ["limit": .integer(Int64(limits.maxMessageBytes)), "size": .integer(Int64(size))])
            // Answered with the request's id when its JSON frame can be read, so a client with
            // several requests in flight knows which one it was.
            var id: RequestID?
            if let first = frames.first, first.count <= limits.maxMessageBytes * 4 {
                switch RequestDecoder.decode([first]) {
                case .success(let request): id = request.id
                case .failure(let unreadable): id = unreadable.id
                }
            }
            call.reply(ReplyEncoder.failure(id: id, error: error), to: envelope)
            return
        }
        switch RequestDecoder.decode(frames) {
        case .failure(let unreadable):
            call.reply(ReplyEncoder.failure(id: unreadable.id, error: unreadable.error), to: envelope)
        case .success(let request):
            metrics?.request(method: Method(named: request.method)?.rawValue ?? "other")
            if let authenticate {
                switch authenticate(request) {
                case .success(let client): call.client = client
                case .failure(let refused):
                    call.reply(ReplyEncoder.failure(id: request.id, error: refused), to: envelope)
                    return
                }
            }
            if let reply = answer(request, frames: frames, envelope: envelope, &call) { call.reply(reply, to: envelope) }
        }
    }

    /// The reply, or nil when the request waits (for its job, or behind another's) or its
    /// reply already went out (`Call.sendAtOnce`).
    private func answer(_ request: Request, frames: [[UInt8]], envelope: [[UInt8]], _ call: inout Call) -> [UInt8]? {
        let method = Method(named: request.method)
        let params = Params(request.params)
        do throws(ProtocolError) {
            switch method?.scope {
            case .server?:
                let result = method == .hello ? server.hello() : try server.openSession(params, &table, call)
                return ReplyEncoder.success(id: request.id, result: result)
            case .documentWrite? where request.session == nil, .documentRead? where request.session == nil:
                // Document work is file and PDF work: off the loop. With a session, it goes
                // through the session instead (below), in order with its other requests and
                // remembered for retries.
                try startDocumentJob(method!, params, request, envelope: envelope, client: call.client, now: call.now)
                return nil
            case .documentWrite?, .documentRead?, .session?, nil:
                break
            }
            guard let sessionID = request.session else {
                guard method != nil else { throw Self.methodNotFound(request.method) }
                throw ProtocolError(.invalidRequest, "\(request.method) needs a session")
            }
            // Another client's session is answered exactly like one that does not exist, so
            // session ids cannot be probed. A session held by a job keeps what comes for it, an
            // unknown method too, so that every reply of a session keeps its order.
            guard table.isOwned(sessionID, by: call.client) else {
                guard method != nil else { throw Self.methodNotFound(request.method) }
                if let shared, !table.contains(sessionID),
                   let session = try shared.takeOver(sessionID, owner: call.client, connection: call.connection, now: call.now) {
                    adopt(session, &call)
                    return answer(request, frames: frames, envelope: envelope, &call)
                }
                throw ProtocolError(.unknownSession, "no session \"\(sessionID)\": never opened, closed, or expired",
                                    data: ["session": .string(sessionID)])
            }
            guard let session = table.arrive(sessionID, .request(frames: frames, envelope: envelope, client: call.client)) else {
                return nil   // queued behind a job
            }
            guard let method else {
                table.finish(session)
                throw Self.methodNotFound(request.method)
            }
            // Consumed: this binding must not outlive the call, or the session's buffers would
            // have two owners and the request would copy them whole to change them.
            return serve(method, request, params, consume session, frames: frames, envelope: envelope, &call)
        } catch {
            return ReplyEncoder.failure(id: request.id, error: error)
        }
    }

    private static func methodNotFound(_ name: String) -> ProtocolError {
        ProtocolError(.methodNotFound, "no method \"\(name)\"", data: ["method": .string(name)])
    }

    // MARK: Sessions

    /// Runs a request on a session its slot handed over. Before this returns, the session is
    /// back in the table, gone with a job, or closed.
    private func serve(_ method: Method, _ request: Request, _ params: Params, _ session: consuming ServiceSession,
                       frames: [[UInt8]], envelope: [[UInt8]], _ call: inout Call) -> [UInt8]? {
        session.lastActive = call.now
        // Written only when needed: to store the reply (for a read, after it went out), or to
        // tell a retry from a reused id.
        lazy var fingerprint = ReplyCache.fingerprint(request)
        let mark = call.output.events.count
        // What the method finds before it runs when no job ran for it: a result image left out.
        var found: JobOutcome?
        do throws(ProtocolError) {
            // A retry of a request already answered gets the same reply, and nothing runs twice.
            switch session.replies.lookup(request.id, request: fingerprint) {
            case .retry(let cached):
                // A reply already given stays true wherever the session is now.
                table.finish(session)
                return cached
            case .notKept where method.changesNothing, .miss:
                break   // a read answered again is the same answer
            case .notKept:
                throw ProtocolError(.unavailable, "id \(request.id) was answered, but its reply was over \(limits.maxCachedReplyBytes) bytes and not kept; it is not run twice",
                                    data: ["reason": "replyNotKept", "limit": .integer(Int64(limits.maxCachedReplyBytes))])
            case .reused:
                // Well-formed, but it clashes with what the session already holds under that id.
                throw ProtocolError(.conflict, "id \(request.id) was already used for a different request in this session",
                                    data: ["id": request.id.json])
            }
            if try startJob(method, request, params, &session, fingerprint, envelope: envelope, call, found: &found) { return nil }
        } catch {
            table.finish(session)
            return ReplyEncoder.failure(id: request.id, error: error)
        }
        if shared == nil, method.changesNothing {
            // A read: its reply is final here, so it goes first when it may, and is remembered
            // and the session put back while the client already has it.
            let reply = run(method, request, params, &session, found: found, &call)
            let sent = call.sendAtOnce(reply, to: envelope)
            session.replies.store(reply, for: request.id, request: fingerprint)
            table.finish(session)
            return sent ? nil : reply
        }
        let reply = runAndRemember(method, request, params, fingerprint, &session, found: found, &call)
        if let shared {
            // Written before the reply goes out; a copy found stale is dropped and the request
            // answered again on the session as the store has it.
            let asked: StoreOutcome
            if method == .sessionClose {
                // Removed only by its holder: a stale copy is taken back first, then closed.
                asked = Self.ask { () throws(ProtocolError) in try shared.remove(session.id) }
            } else if method.changesNothing {
                // A read answers from the local copy only if it is still the stored one.
                asked = Self.ask { () throws(ProtocolError) in try shared.confirm(&session, now: call.now) }
            } else {
                asked = write(&session, call)
            }
            switch keepOrDrop(asked, session.id, eventsFrom: mark, &call) {
            case .kept:
                break
            case .failed(let error):
                return ReplyEncoder.failure(id: request.id, error: error)
            case .lost where !call.retaking:
                call.retaking = true
                defer { call.retaking = false }
                return answer(request, frames: frames, envelope: envelope, &call)
            case .lost:
                return ReplyEncoder.failure(id: request.id, error: Self.moved(session.id))
            }
        }
        if method == .sessionClose { close(session, event: "session.closed", &call) } else { table.finish(session) }
        return reply
    }

    // MARK: Shared sessions

    private enum StoreOutcome {
        case kept
        /// Another instance holds the session: the local copy was dropped.
        case lost
        /// The store could not be written: the local copy was dropped, unacknowledged.
        case failed(ProtocolError)
    }

    private static func moved(_ id: String) -> ProtocolError {
        ProtocolError(.unavailable, "session \"\(id)\" moved to another instance while this request ran; try again",
                      data: ["reason": "sessionMoved", "session": .string(id)])
    }

    /// What the store said of a local copy: still the stored one (`true`), held elsewhere, or
    /// nothing, because it could not be asked.
    private static func ask(_ question: () throws(ProtocolError) -> Bool) -> StoreOutcome {
        do throws(ProtocolError) {
            return try question() ? .kept : .lost
        } catch {
            return .failed(error)
        }
    }

    /// Writes the session's next version to the store.
    private func write(_ session: inout ServiceSession, _ call: Call) -> StoreOutcome {
        guard let shared else { return .kept }
        return Self.ask { () throws(ProtocolError) in try shared.persist(&session, now: call.now) }
    }

    /// A change the store did not keep is undone as far as anyone can see: the local copy is
    /// dropped (see `drop`). Returns `outcome`.
    private func keepOrDrop(_ outcome: StoreOutcome, _ id: String, eventsFrom mark: Int, _ call: inout Call) -> StoreOutcome {
        if case .kept = outcome { return outcome }
        drop(id, eventsFrom: mark, &call)
        return outcome
    }

    /// Drops a local copy that was not written: out of the table, its timers gone, and the
    /// events it made since `mark` not published.
    private func drop(_ id: String, eventsFrom mark: Int, _ call: inout Call) {
        let topic = Array("\(id).".utf8)
        table.remove(id)
        timers.cancel(session: id)
        call.timers.removeAll { $0.session == id }
        if mark < call.output.events.count {
            call.output.events = Array(call.output.events[..<mark]) + call.output.events[mark...].filter { !$0[0].starts(with: topic) }
        }
    }

    /// Puts a session taken over from the store in the table, with the timer of a timed
    /// transition that was under way (started again: the old instance's clock is gone).
    private func adopt(_ session: ServiceSession, _ call: inout Call) {
        table.insert(session)
        if let ticket = session.canvas.canvas.pendingTransition, case .timed(let milliseconds) = session.transitions {
            call.timers.append(TransitionTimer(deadline: call.now + .milliseconds(milliseconds), session: session.id, ticket: ticket))
        }
    }

    /// Sends the request off the loop first when it needs file or heavy work, the job taking the
    /// session with it: a document method, the page a `canvas.open` names, a large drawing's
    /// encoding, a submit's save. Returns whether it did. `found`: set when the method is to run
    /// here without its result image (`imageOmitted`), which could not be rendered off the loop.
    private func startJob(_ method: Method, _ request: Request, _ params: Params, _ session: inout ServiceSession,
                          _ fingerprint: @autoclosure () -> [UInt8], envelope: [[UInt8]], _ call: Call,
                          found: inout JobOutcome?) throws(ProtocolError) -> Bool {
        var job: PendingJob {
            PendingJob(kind: .canvas(method), request: request, envelope: envelope, client: call.client,
                       holding: (session, fingerprint()))
        }
        switch method {
        case _ where method.scope == .documentRead || method.scope == .documentWrite:
            try startDocumentJob(method, params, request, envelope: envelope, client: call.client, now: call.now,
                                 holding: (session, fingerprint()),
                                 madeBy: method.scope == .documentWrite ? madeBy(session.id, request, fingerprint()) : nil)
        case .canvasOpen:
            guard let documents, let target = try? documents.targetParams(params) else { return false }
            try jobs.read(for: job) { .page(Result { () throws(DocumentError) in try documents.store.page(target.name, target.page) }) }
        case .drawingGet where session.canvas.phase == .open && session.canvas.drawing.pointCount > Self.inlineDrawingPoints:
            // Encoding a large drawing takes long enough to hold up everyone: off the loop, from
            // a copy (the drawing is a value).
            var encoding = job
            encoding.reservedBytes = try memory.admitLargeReply("drawing.get of a large drawing", bytes: session.canvas.drawing.pointCount * 64,
                                                            now: call.now)
            let id = request.id, drawing = session.canvas.drawing, editable = session.canvas.canvas.editableDrawing
            let undo = editable?.canUndo ?? false, redo = editable?.canRedo ?? false
            do throws(ProtocolError) {
                try jobs.read(for: encoding) {
                    .reply(ReplyEncoder.success(id: id, rawResult: WireShapes.drawing(drawing, canUndo: undo, canRedo: redo)))
                }
            } catch {
                memory.release(encoding.reservedBytes)
                throw error
            }
        case .canvasSubmit where CanvasMethods.savesFirst(session):
            do throws(ProtocolError) {
                _ = try params.bool("imageData", default: false)
                let target = session.target!
                let save = try DocumentMethods.available(documents)
                    .targetSave(target, session.canvas.drawing, madeBy: madeBy(session.id, request, fingerprint()))
                // Its result image, when large, is rendered after the save, beside the loop too.
                let size = session.size, maxImageSide = limits.maxImageSide
                let render = imageToRender(method, params, session).map { drawing in
                    { @Sendable in ActionExecutor.png(drawing, size: size, maxImageSide: maxImageSide) }
                }
                jobs.save(target.name, save, for: job, render: render)
            } catch {
                // Remembered like any answer: a retry must not find the save untried.
                session.replies.store(ReplyEncoder.failure(id: request.id, error: error), for: request.id, request: fingerprint())
                throw error
            }
        case .canvasMinimize, .canvasSubmit, .canvasCancel, .pencilDoubleTap:
            // A result image of a large drawing or canvas takes tens of milliseconds (an
            // 8192-pixel square over a second): rendered off the loop, from a copy, it holds up
            // only this session. Never on the loop: with the runner full, or this owner's
            // renders at their bound, the method runs now and its result goes without the image.
            guard let drawing = imageToRender(method, params, session) else { return false }
            let size = session.size, maxImageSide = limits.maxImageSide
            do {
                try jobs.read(for: job, kind: .render) { .image(ActionExecutor.png(drawing, size: size, maxImageSide: maxImageSide)) }
            } catch {
                found = .imageOmitted(reason: error.data["reason"]?.stringValue ?? "busy")
                return false
            }
        default:
            return false
        }
        table.startJob(session.id)
        return true
    }

    /// The drawing whose result image `method` will render, when rendering it here would take
    /// long: found by running the method on a copy of the canvas, so only a request that will
    /// emit a result with an image (and not one refused, or a double-tap that does something
    /// else) waits for one.
    private func imageToRender(_ method: Method, _ params: Params, _ session: ServiceSession) -> Drawing? {
        let asked = (try? params.bool("imageData", default: false)) ?? false
        guard (asked && method != .pencilDoubleTap) || session.resultImages else { return nil }
        var trial = session.canvas
        let actions: [CanvasAction]?
        switch method {
        case .canvasMinimize: actions = try? trial.minimize()
        case .canvasSubmit: actions = try? trial.submit()
        case .canvasCancel: actions = try? trial.cancel()
        default: actions = trial.doubleTap().actions
        }
        for case .emitResult(_, let drawing, _) in actions ?? [] {
            return ActionExecutor.rendersOffLoop(drawing, session, maxImageSide: limits.maxImageSide) ? drawing : nil
        }
        return nil
    }

    /// What a session's save leaves in the document's history so that the same request, run
    /// again on another instance, finds the revision it made instead of saving twice: with
    /// several instances, the one that saved can die, or lose the session to another, before
    /// the session records the save; the retry then runs on the session as last stored. One
    /// instance alone loses its sessions with it, so it leaves nothing. The key stands for the
    /// session, the request's id and the request itself (ids are the client's, and a reused id
    /// on another request must not find this save).
    private func madeBy(_ session: String, _ request: Request, _ fingerprint: [UInt8]) -> String? {
        guard shared != nil else { return nil }
        let bytes = Array(session.utf8) + [0] + JSONCodec.serialize(request.id.json) + [0] + fingerprint
        return String(DocumentStore.sha256(bytes).prefix(32))
    }

    /// Starts a document method's job: a read on the read runner, a write where saves run.
    private func startDocumentJob(_ method: Method, _ params: Params, _ request: Request, envelope: [[UInt8]], client: String?,
                                  now: ContinuousClock.Instant,
                                  holding: (session: ServiceSession, fingerprint: [UInt8])? = nil,
                                  madeBy: String? = nil) throws(ProtocolError) {
        let documents = try DocumentMethods.available(documents)
        func job(_ kind: PendingJob.Kind) -> PendingJob {
            PendingJob(kind: kind, request: request, envelope: envelope, client: client, holding: holding)
        }
        if method.scope == .documentWrite {
            let write = try documents.prepareSave(method, params, madeBy: madeBy)
            jobs.save(write.document, write.save, for: job(.documentWrite(method, publishes: write.saves, unchangedAt: write.unchangedAt)))
        } else {
            var read = job(.documentRead)
            if method == .documentGet {
                // The file's piece, its base64 text and the reply holding that text.
                let asked = (try? params.optionalInteger("length", in: 0...Int64.max)) ?? nil
                let length = min(asked.map { Int(clamping: $0) } ?? limits.maxGetBytes, limits.maxGetBytes)
                read.reservedBytes = try memory.admitLargeReply("document.get", bytes: length * 3, now: now)
            }
            let attachments = request.attachments
            do throws(ProtocolError) {
                // The reply is written where the read ran: a document.get's is megabytes of
                // base64 to escape, which on the loop would hold up every other client.
                let id = request.id
                try jobs.read(for: read) {
                    do throws(ProtocolError) {
                        return .reply(ReplyEncoder.success(id: id, result: try documents.read(method, params, attachments: attachments, owner: client)))
                    } catch {
                        return .reply(ReplyEncoder.failure(id: id, error: error))
                    }
                }
            } catch {
                memory.release(read.reservedBytes)
                throw error
            }
        }
    }

    /// Runs a session's request and remembers its reply for retries. `found` is what a job off
    /// the loop found for it first.
    private func runAndRemember(_ method: Method, _ request: Request, _ params: Params, _ fingerprint: [UInt8],
                                _ session: inout ServiceSession, found: JobOutcome?, _ call: inout Call) -> [UInt8] {
        let reply = run(method, request, params, &session, found: found, &call)
        session.replies.store(reply, for: request.id, request: fingerprint)
        announceSaves(&call)
        return reply
    }

    /// Runs a session's request: its reply, a result or an error.
    private func run(_ method: Method, _ request: Request, _ params: Params, _ session: inout ServiceSession,
                     found: JobOutcome?, _ call: inout Call) -> [UInt8] {
        do throws(ProtocolError) {
            return try canvas.run(method, params, &session, found: found, &call).reply(id: request.id)
        } catch {
            return ReplyEncoder.failure(id: request.id, error: error)
        }
    }

    /// A due timer: its transition finishes now, or after the job holding the session.
    private func fire(_ ticket: TransitionTicket, on id: String, _ call: inout Call) {
        guard var session = table.arrive(id, .timer(ticket)) else { return }
        // A transition a client already finished leaves a stale timer: nothing to do.
        let mark = call.output.events.count
        if let actions = try? session.canvas.finishTransition(ticket) {
            canvas.executor.run(actions, &session, imageData: false, &call)
            guard case .kept = keepOrDrop(write(&session, call), session.id, eventsFrom: mark, &call) else { return }
        }
        table.finish(session)
    }

    private func close(_ session: ServiceSession, event: String, _ call: inout Call) {
        var session = session
        canvas.executor.publish(&session, event, [:], &call)
        table.remove(session.id)
        timers.cancel(session: session.id)
        logger.info("\(event)", metadata: ["session": "\(session.id)"])
    }

    // MARK: Jobs

    /// Answers every finished job, then runs what queued behind a session it held (which may
    /// start another job, and make the rest wait again).
    private func finishJobs(_ call: inout Call) {
        while case let finished = jobs.finished(), !finished.isEmpty {
            for (job, outcome) in finished {
                memory.release(job.reservedBytes)
                call.client = job.client
                call.connection = job.envelope.first
                guard case (var session, let fingerprint)? = job.holding else {
                    call.reply(documentReply(job, outcome, &call), to: job.envelope)
                    continue
                }
                let mark = call.output.events.count
                let reply: [UInt8]
                switch (job.kind, outcome) {
                case (.canvas, .reply(let bytes)):
                    // An encoding of what the session holds: nothing changed, nothing to store.
                    session.replies.store(bytes, for: job.request.id, request: fingerprint)
                    call.reply(bytes, to: job.envelope)
                    resume(session, &call)
                    continue
                case (.canvas(let method), _):
                    reply = runAndRemember(method, job.request, Params(job.request.params), fingerprint, &session,
                                           found: outcome, &call)
                default:
                    reply = documentReply(job, outcome, &call)
                    session.replies.store(reply, for: job.request.id, request: fingerprint)
                }
                guard shared != nil else {
                    call.reply(reply, to: job.envelope)
                    resume(session, &call)
                    continue
                }
                // Written first, then given back to the table with its new version; a copy that
                // was not written is then dropped, and what queued behind it runs on the session
                // as the store has it.
                let written = write(&session, call)
                let queued = table.endJob(session)
                switch written {
                case .kept:
                    call.reply(reply, to: job.envelope)
                case .lost:
                    drop(session.id, eventsFrom: mark, &call)
                    call.reply(ReplyEncoder.failure(id: job.request.id, error: Self.moved(session.id)), to: job.envelope)
                case .failed(let error):
                    drop(session.id, eventsFrom: mark, &call)
                    call.reply(ReplyEncoder.failure(id: job.request.id, error: error), to: job.envelope)
                }
                replay(queued, on: session.id, &call)
            }
        }
    }

    /// The reply to a document method, and the `document.saved` of a write that made a revision.
    private func documentReply(_ job: PendingJob, _ outcome: JobOutcome, _ call: inout Call) -> [UInt8] {
        switch (job.kind, outcome) {
        case (.documentWrite(let method, let publishes, let unchangedAt), .saved(let outcome, _)):
            do throws(ProtocolError) {
                let summary = try DocumentMethods.available(documents).run { () throws(DocumentError) in try outcome.get() }
                let result = DocumentMethods.json(summary)
                if publishes && summary.revision != unchangedAt {
                    // A write naming a session is that session's save, as a submit is (5.1).
                    let saver = job.holding.flatMap { $0.session.owner == nil ? $0.session.id : nil }
                    call.saves.append((result, method.rawValue, saver))
                    announceSaves(&call)
                }
                return ReplyEncoder.success(id: job.request.id, result: result)
            } catch {
                return ReplyEncoder.failure(id: job.request.id, error: error)
            }
        case (.documentRead, .reply(let bytes)):
            return bytes
        default:
            preconditionFailure("a job's outcome does not match its kind")
        }
    }

    /// Gives a session back after its job and replays what queued behind it, in order.
    private func resume(_ session: ServiceSession, _ call: inout Call) {
        replay(table.endJob(session), on: session.id, &call)
    }

    private func replay(_ queued: [QueuedWork], on id: String, _ call: inout Call) {
        for work in queued {
            switch work {
            case .request(let frames, let envelope, let client):
                call.client = client
                call.connection = envelope.first
                receive(frames, envelope: envelope, &call)
            case .timer(let ticket):
                fire(ticket, on: id, &call)
            }
        }
    }

    /// A save heard on the document feed (every instance's, numbered there): the event to
    /// publish on the `documents.` topic, or none for data that is not a JSON object.
    public func relay(seq: UInt64, data: [UInt8]) -> Output {
        var output = Output()
        guard seq <= 1 << 53, case .object(let fields)? = try? JSONCodec.parse(data) else {
            logger.error("document feed message unreadable; not relayed", metadata: ["seq": "\(seq)"])
            return output
        }
        output.events.append(ReplyEncoder.event(session: "documents", name: "document.saved", seq: seq, data: fields))
        return output
    }

    /// `document.saved` on the server-wide `documents.` topic, which has its own sequence, for
    /// each save the call made.
    private func announceSaves(_ call: inout Call) {
        if !call.saves.isEmpty { metrics?.saved(call.saves.count) }
        for save in call.saves {
            var data = WireShapes.saved(save.summary, cause: save.cause)
            if let session = save.session, !authenticated { data["session"] = .string(session) }
            if let shared, shared.feed != nil {
                // Numbered and published once for every instance; each relays it (`relay`).
                if case .string(let name)? = data["name"], case .integer(let revision)? = data["revision"],
                   case .string(let sha256)? = data["sha256"] {
                    _ = shared.announce(name: name, revision: Int(revision), sha256: sha256, data: JSONCodec.serialize(.object(data)))
                }
                continue
            }
            documentSeq += 1
            call.output.events.append(ReplyEncoder.event(session: "documents", name: "document.saved", seq: documentSeq, data: data))
        }
        call.saves.removeAll()
    }
}
