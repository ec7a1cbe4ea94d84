import CanvasCore
public import CanvasProtocol
import DocumentStore
import Foundation
public import Logging

/// Turns request frames into exactly one reply and any events, and runs the sessions' timers.
///
/// A request goes one way: `receive` decodes it, `answer` routes it by its `Method` (server
/// methods at once, document methods to jobs off the loop, session methods to their session),
/// and a session's request then lives in `SessionRequests` (run, or held by a job, then
/// remembered) and, with a session store, in `SessionStoreSteps` (written, confirmed or taken
/// over before its reply goes). Whatever holds a session, its slot in the `SessionTable` queues
/// what comes for it meanwhile. Finished jobs and store steps come back through `finishJobs`.
/// It does no socket I/O: the server hands it frames and the time, and sends what it returns,
/// so tests can drive it with a made-up clock.
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
    /// Where a lane of the session store is spoken to: one thread, in order (`StoreLine`).
    typealias StoreExecutor = @Sendable (_ work: @escaping @Sendable () -> Void) -> Void

    public static let serverName = ServerMethods.serverName
    /// Drawings up to this many points are encoded in the loop, and their result images rendered
    /// there when small too (ActionExecutor.rendersOffLoop); larger ones on a worker.
    static let inlineDrawingPoints = 2_000

    var table = SessionTable()
    var timers = TransitionTimers()
    var jobs: Jobs
    let server: ServerMethods
    let canvas: CanvasMethods
    /// nil when the document folder could not be used: document methods then answer UNAVAILABLE.
    let documents: DocumentMethods?
    let limits: Limits
    /// Sheds large replies when the process is over its memory budget.
    var memory: MemoryPressure
    let idleTimeout: Duration
    let logger: Logger
    /// Whether clients are authenticated: sessions are then private to their owner, and
    /// nothing server-wide names them.
    let authenticated: Bool
    /// Sequence numbers of the server-wide `documents.*` events.
    var documentSeq: UInt64 = 0
    /// With `--session-store`: sessions written there before each acknowledgement, and taken
    /// over from there when another instance held them, each session through one of these
    /// lanes (its own thread and connection; `lane(for:)`). Empty costs nothing.
    let lanes: [StoreLane]
    /// The first lane's store, which also announces saves on the document feed; nil without a
    /// session store. Used only on its lane's thread.
    var shared: SharedSessions? { lanes.first?.shared }
    let metrics: ServiceMetrics?

    public convenience init(configuration: ServiceConfiguration, logger: Logger, saves: SaveExecutor? = nil, reads: SaveExecutor? = nil) {
        self.init(configuration: configuration, logger: logger, saves: saves, reads: reads, lanes: [])
    }

    init(configuration: ServiceConfiguration, logger: Logger, saves: SaveExecutor?, reads: SaveExecutor?, lanes: [StoreLane],
         metrics: ServiceMetrics? = nil) {
        self.lanes = lanes
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
            documents = DocumentMethods(store: store, limits: configuration.limits,
                                        uploads: Uploads(idleLimit: configuration.uploadIdleTimeout))
        } catch {
            logger.error("documents not served", metadata: ["folder": "\(configuration.documentsPath)", "error": "\(error)"])
            documents = nil
        }
        let params = SessionParams(limits: limits)
        server = ServerMethods(limits: limits, params: params, idleTimeout: idleTimeout, authenticated: authenticated, logger: logger,
                               shared: lanes.first?.shared, instance: configuration.instanceName)
        canvas = CanvasMethods(params: params, executor: ActionExecutor(logger: logger, maxImageSide: limits.maxImageSide, imageTimeBudget: limits.imageTimeBudget),
                               documents: documents)
    }

    public var sessionCount: Int { table.count }
    /// Jobs (and store steps) started beside the loop and not yet answered.
    public var jobsInFlight: Int { jobs.inFlight }

    /// Whether `client` may receive events under `topic`. Without authentication every local
    /// client may; with it, only its own sessions' topics and the shared `documents.` topic.
    /// `always`: check even without CurveZMQ (web peers, whose sessions belong to their token).
    /// A session held by another instance (or none yet) is the store's to say (`askOwner`).
    public func subscription(_ client: String?, to topic: [UInt8], always: Bool = false) -> SubscriptionCheck {
        if !(authenticated || always) || table.maySubscribe(client, to: topic) { return .allowed }
        guard !lanes.isEmpty, let dot = topic.firstIndex(of: UInt8(ascii: ".")) else { return .refused }
        let id = String(decoding: topic[..<dot], as: UTF8.self)
        return table.holds(id) ? .refused : .askStore(session: id)
    }

    /// Asks the session store, on the session's lane, whether `client` opened session `id`;
    /// `answer` is called there with the answer (false when the store cannot say: a
    /// subscription not applied is the safe answer).
    public func askOwner(of id: String, for client: String?, _ answer: @escaping @Sendable (Bool) -> Void) {
        let lane = lane(for: id), shared = lane.shared, expected = client ?? ""
        lane { answer(shared.owner(of: id) == expected) }
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

    /// Answers the requests whose jobs (and store steps) have finished since the last call, and
    /// whatever queued behind them. The server calls it when its job queues say one is done.
    public func collectSaves(at now: ContinuousClock.Instant) -> Output {
        var call = Call(now: now)
        finishJobs(&call)
        return end(call)
    }

    public var nextDeadline: ContinuousClock.Instant? { timers.nextDeadline }

    /// Finishes the timed transitions whose time has come. Returns the events to publish (with
    /// a session store, those of each transition once it is written, from `collectSaves`).
    public func fireTimers(at now: ContinuousClock.Instant) -> [[[UInt8]]] {
        var call = Call(now: now)
        for timer in timers.due(at: now) { fire(timer.ticket, on: timer.session, &call) }
        return end(call).events
    }

    /// Closes sessions idle for longer than the idle timeout. Returns the events to publish
    /// (with a session store, once the store has let each go, from `collectSaves`).
    public func expireIdle(at now: ContinuousClock.Instant) -> [[[UInt8]]] {
        var call = Call(now: now)
        for session in table.idle(before: now - idleTimeout) {
            if shared == nil {
                close(session, event: "session.expired", &call)
            } else if let held = table.hold(session.id) {
                expire(held)
            }
        }
        return end(call).events
    }

    func end(_ call: Call) -> Output {
        timers.add(call.timers)
        return call.output
    }

    // MARK: Routing

    /// Who sent a decoded request (nil: no one in particular), or why it is refused.
    public typealias Authenticator = (Request) -> Result<String?, ProtocolError>

    func receive(_ frames: [[UInt8]], envelope: [[UInt8]], droppedFrames: Int = 0, authenticate: Authenticator? = nil,
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
            // Looked up once: the method goes along from here.
            let method = Method(named: request.method)
            metrics?.request(method)
            if let authenticate {
                switch authenticate(request) {
                case .success(let client): call.client = client
                case .failure(let refused):
                    call.reply(ReplyEncoder.failure(id: request.id, error: refused), to: envelope)
                    return
                }
            }
            if let reply = answer(request, method, frames: frames, envelope: envelope, &call) { call.reply(reply, to: envelope) }
        }
    }

    /// The reply, or nil when the request waits (for its job, a store step, or behind another
    /// request of its session) or its reply already went out (`Call.sendAtOnce`). `method`: the
    /// one `request` names, nil when this server has none of that name.
    func answer(_ request: Request, _ method: Method?, frames: [[UInt8]], envelope: [[UInt8]], _ call: inout Call) -> [UInt8]? {
        let params = Params(request.params)
        do throws(ProtocolError) {
            switch method?.scope {
            case .server?:
                if method == .hello { return ReplyEncoder.success(id: request.id, result: server.hello()) }
                let opened = try server.openSession(params, &table, call)
                let reply = ReplyEncoder.success(id: request.id, result: opened.result)
                if shared != nil {
                    create(opened.session, reply: reply, for: request, envelope: envelope, &call)
                    return nil
                }
                return reply
            case .documentWrite? where request.session == nil, .documentRead? where request.session == nil:
                // Document work is file and PDF work: off the loop. With a session, it goes
                // through the session instead (below), in order with its other requests and
                // remembered for retries.
                let madeBy = method!.scope == .documentWrite ? Self.madeBy(request, client: call.client) : nil
                try startDocumentJob(method!, params, request, envelope: envelope, client: call.client, now: call.now, madeBy: madeBy)
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
            guard let session = table.arrive(sessionID, from: call.client,
                                             .request(request, method, frames: frames, envelope: envelope, client: call.client))
            else {
                if table.isOwned(sessionID, by: call.client) { return nil }   // queued behind what holds the session
                guard method != nil else { throw Self.methodNotFound(request.method) }
                if shared != nil, !table.contains(sessionID) {
                    takeOver(request, frames: frames, envelope: envelope, &call)
                    return nil
                }
                throw Self.unknownSession(sessionID)
            }
            guard let method else {
                resume(session, &call)
                throw Self.methodNotFound(request.method)
            }
            // Consumed: this binding must not outlive the call, or the session's buffers would
            // have two owners and the request would copy them whole to change them.
            return serve(method, request, params, consume session, frames: frames, envelope: envelope, &call)
        } catch {
            return ReplyEncoder.failure(id: request.id, error: error)
        }
    }

    static func methodNotFound(_ name: String) -> ProtocolError {
        ProtocolError(.methodNotFound, "no method \"\(name)\"", data: ["method": .string(name)])
    }

    static func unknownSession(_ id: String) -> ProtocolError {
        ProtocolError(.unknownSession, "no session \"\(id)\": never opened, closed, or expired", data: ["session": .string(id)])
    }

    // MARK: Documents

    /// The key a write sent without a session leaves with the revision it makes, so that the
    /// same request sent again (its reply lost, to this instance or another) answers that
    /// revision instead of saving twice or answering `CONFLICT`: it stands for the client (its
    /// key or token, where it has one), the request's id and the request itself, so an id used
    /// again on another request does not find it.
    static func madeBy(_ request: Request, client: String?) -> String {
        let bytes = Array("document".utf8) + [0] + Array((client ?? "").utf8) + [0] + JSONCodec.serialize(request.id.json) + [0]
            + ReplyCache.fingerprint(request)
        return String(DocumentStore.sha256(bytes).prefix(32))
    }

    /// Starts a document method's job: a read on the read runner, a write where saves run.
    /// `holding`: the session the request named, which the job holds (with the request's frames).
    func startDocumentJob(_ method: Method, _ params: Params, _ request: Request, envelope: [[UInt8]], client: String?,
                          now: ContinuousClock.Instant,
                          holding: (session: ServiceSession, fingerprint: [UInt8])? = nil, frames: [[UInt8]] = [],
                          madeBy: String? = nil, fence: DocumentStore.WriteFence? = nil) throws(ProtocolError) {
        let documents = try DocumentMethods.available(documents)
        func job(_ kind: PendingJob.Kind) -> PendingJob {
            var job = PendingJob(kind: kind, request: request, envelope: envelope, client: client, holding: holding)
            job.frames = frames
            return job
        }
        if method.scope == .documentWrite {
            let write = try documents.prepareSave(method, params, madeBy: madeBy, fence: fence)
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
                let id = request.id, owner = Uploads.owner(client: client, envelope: envelope)
                try jobs.read(for: read) {
                    do throws(ProtocolError) {
                        return .reply(ReplyEncoder.success(id: id, result: try documents.read(method, params, attachments: attachments, owner: owner)))
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

    /// The reply to a document method, and the `document.saved` of a write that made a revision.
    func documentReply(_ job: PendingJob, _ request: Request, _ outcome: JobOutcome, _ call: inout Call) -> [UInt8] {
        switch (job.kind, outcome) {
        case (.documentWrite(let method, let publishes, let unchangedAt), .saved(let outcome, _)):
            do throws(ProtocolError) {
                let summary = try DocumentMethods.available(documents).run { () throws(DocumentError) in try outcome.get() }
                let result = DocumentMethods.json(summary)
                if publishes && summary.revision != unchangedAt && !summary.madeBefore {
                    // A write naming a session is that session's save, as a submit is (5.1).
                    let saver = job.holding.flatMap { $0.session.owner == nil ? $0.session.id : nil }
                    call.saves.append((result, method.rawValue, saver))
                    announceSaves(&call)
                }
                return ReplyEncoder.success(id: request.id, result: result)
            } catch {
                return ReplyEncoder.failure(id: request.id, error: error)
            }
        case (.documentRead, .reply(let bytes)):
            return bytes
        default:
            preconditionFailure("a job's outcome does not match its kind")
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
    func announceSaves(_ call: inout Call) {
        if !call.saves.isEmpty { metrics?.saved(call.saves.count) }
        for save in call.saves {
            var data = WireShapes.saved(save.summary, cause: save.cause)
            if let session = save.session, !authenticated { data["session"] = .string(session) }
            if let lane = lanes.first, let shared, shared.feed != nil {
                // Numbered and published once for every instance; each relays it (`relay`). Told
                // on the first store lane's thread, like everything said to the store.
                if case .string(let name)? = data["name"], case .integer(let revision)? = data["revision"],
                   case .string(let sha256)? = data["sha256"] {
                    let bytes = JSONCodec.serialize(.object(data))
                    lane { _ = shared.announce(name: name, revision: Int(revision), sha256: sha256, data: bytes) }
                }
                continue
            }
            documentSeq += 1
            call.output.events.append(ReplyEncoder.event(session: "documents", name: "document.saved", seq: documentSeq, data: data))
        }
        call.saves.removeAll()
    }
}
