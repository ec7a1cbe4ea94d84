package import CanvasOperations
import CanvasCore
public import CanvasProtocol
import DocumentStore
import Foundation
public import Logging

/// Turns request frames into exactly one reply and any events, and runs the sessions' timers.
///
/// A request goes one way: `receive` decodes it into its one in-flight value
/// (`InFlightRequest`), `answer` routes it by its `Method` (`hello` at once, document methods
/// without a session to jobs off the loop, the rest to a session), and a session's request then
/// goes through its machine (`RequestFlow`), whose actions `SessionRequests` carries out, the
/// session's persistence (`SessionPersistence`: local, or a shared store) keeping each change
/// before its reply goes. Whatever holds a session, its slot in the `SessionTable` queues what
/// comes for it meanwhile, and keeps the request while a job or the store works for it.
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
        /// Sessions let go of during the call, freed with the output once the server has sent
        /// it: what the call's replies need not wait for.
        var released: [ServiceSession] = []

        package init() {}
    }

    /// Where saves run, given the document each writes. The server runs them on workers beside
    /// its loop, so no request waits on a disk; nil runs each save in place (tests, the fuzzer).
    public typealias SaveExecutor = @Sendable (_ document: String, _ save: @escaping @Sendable () -> Void) -> Void
    /// Where a lane of the session store is spoken to: one thread, in order (`StoreLine`).
    package typealias StoreExecutor = @Sendable (_ work: @escaping @Sendable () -> Void) -> Void

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
    /// Where sessions are kept: in this process, or (`--session-store`) written to a shared
    /// store before each acknowledgement and taken over from there, each session through one
    /// of the store's lanes (its own thread and connection).
    let persistence: SessionPersistence
    let metrics: ServiceMetrics?

    public convenience init(configuration: ServiceConfiguration, logger: Logger, saves: SaveExecutor? = nil, reads: SaveExecutor? = nil) {
        self.init(configuration: configuration, logger: logger, saves: saves, reads: reads, lanes: [])
    }

    package init(configuration: ServiceConfiguration, logger: Logger, saves: SaveExecutor?, reads: SaveExecutor?, lanes: [StoreLane],
         metrics: ServiceMetrics? = nil) {
        persistence = lanes.isEmpty ? .local : .shared(lanes: lanes)
        self.metrics = metrics
        limits = configuration.limits
        memory = MemoryPressure(budget: configuration.limits.memoryBudgetBytes)
        idleTimeout = configuration.idleTimeout
        self.logger = logger
        authenticated = configuration.clientsAuthenticated
        jobs = Jobs(saves: saves, reads: reads)
        do {
            let store = try DocumentStore(folder: URL(fileURLWithPath: configuration.documentsPath),
                                          keepRevisions: configuration.keepRevisions,
                                          maxInkPointsPerPage: configuration.limits.maxPointsPerPage, saveMode: configuration.saveMode,
                                          housekeeping: Housekeeping(logger: logger, counted: { [metrics] work in metrics?.housekeepingFailed(work.rawValue) }))
            documents = DocumentMethods(store: store, limits: configuration.limits,
                                        uploads: Uploads(idleLimit: configuration.uploadIdleTimeout))
        } catch {
            logger.error("documents not served", metadata: ["folder": "\(configuration.documentsPath)", "error": "\(error)"])
            documents = nil
        }
        let params = SessionParams(limits: limits)
        server = ServerMethods(limits: limits, params: params, idleTimeout: idleTimeout, authenticated: authenticated, logger: logger,
                               instance: configuration.instanceName)
        canvas = CanvasMethods(params: params, executor: ActionExecutor(logger: logger, maxImageSide: limits.maxImageSide, imageTimeBudget: limits.imageTimeBudget),
                               documents: documents)
    }

    public var sessionCount: Int { table.count }

    /// A method routed where nothing answers it: a method added without its handler.
    static func noHandler(_ method: Method?) -> ProtocolError {
        ProtocolError(.internal, "\(method?.rawValue ?? "?"): this server routes it but has no handler for it")
    }
    /// Jobs (and store steps) started beside the loop and not yet answered.
    public var jobsInFlight: Int { jobs.inFlight }

    /// Whether a call to the session store is out, whose answer `collectSaves` takes.
    public var awaitsStore: Bool { jobs.awaitsStore }

    /// Whether a job has finished that `collectSaves` has not taken yet.
    public var anyJobFinished: Bool { jobs.anyFinished }

    /// Whether `client` may receive events under `topic`. Without authentication every local
    /// client may; with it, only its own sessions' topics and the shared `documents.` topic.
    /// `always`: check even without CurveZMQ (web peers, whose sessions belong to their token).
    /// A session held by another instance (or none yet) is the store's to say (`askOwner`).
    public func subscription(_ client: String?, to topic: [UInt8], always: Bool = false) -> SubscriptionCheck {
        if !(authenticated || always) || table.maySubscribe(client, to: topic) { return .allowed }
        guard case .shared = persistence, let dot = topic.firstIndex(of: UInt8(ascii: ".")) else { return .refused }
        let id = String(decoding: topic[..<dot], as: UTF8.self)
        return table.holds(id) ? .refused : .askStore(session: id)
    }

    /// Asks the session store, on the session's lane, whether `client` opened session `id`;
    /// `answer` is called there with the answer (false when the store cannot say: a
    /// subscription not applied is the safe answer).
    public func askOwner(of id: String, for client: String?, _ answer: @escaping @Sendable (Bool) -> Void) {
        guard let lane = persistence.lane(for: id) else { return answer(false) }
        let shared = lane.shared, expected = client ?? ""
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
        var call = Call(now: now, sendingAtOnce: send)
        receive(frames, envelope: envelope, from: client, droppedFrames: droppedFrames, authenticate: authenticate, &call)
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
            guard let held = table.hold(session.id) else { continue }
            drive(InFlightRequest(own: .expiry, session: session.id, as: .sessionClose), .sessionClose, held, .due(.expiry), &call)
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

    func receive(_ frames: [[UInt8]], envelope: [[UInt8]], from client: String?, droppedFrames: Int = 0, authenticate: Authenticator? = nil,
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
            var sender = client
            if let authenticate {
                switch authenticate(request) {
                case .success(let client): sender = client
                case .failure(let refused):
                    call.reply(ReplyEncoder.failure(id: request.id, error: refused), to: envelope)
                    return
                }
            }
            answer(InFlightRequest(request, method, frames: frames, envelope: envelope, client: sender), &call)
        }
    }

    /// Answers a request now, or starts what answers it later (a job, a step of its session's
    /// persistence), or queues it behind what holds its session.
    func answer(_ incoming: consuming InFlightRequest, _ call: inout Call) {
        var request = incoming
        let method = request.method, params = Params(request.request)
        do throws(ProtocolError) {
            switch method?.scope {
            case .server?:
                if method == .hello {
                    call.reply(ReplyEncoder.success(id: request.id, result: server.hello()), to: request.envelope)
                    return
                }
                // A server method with no handler is the server's fault, never a session.open.
                guard method == .sessionOpen else { throw Self.noHandler(method) }
                let opened = try server.openSession(params, &table, for: request, now: call.now)
                // Answered once its persistence has the session.
                drive(request, .sessionOpen, opened.session, .created(reply: ReplyEncoder.success(id: request.id, result: opened.result)), &call)
                return
            case .documentWrite? where request.request.session == nil,
                 .documentRead? where request.request.session == nil:
                // Document work is file and PDF work: off the loop. With a session, it goes
                // through the session instead (below), in order with its other requests and
                // remembered for retries.
                if let method { try startDocumentJob(method, params, &request, now: call.now, session: nil) }
                return
            case .documentWrite?, .documentRead?, .session?, nil:
                break
            }
            guard let sessionID = request.request.session else {
                guard method != nil else { throw Self.methodNotFound(request.request.method) }
                throw ProtocolError(.invalidRequest, "\(request.request.method) needs a session")
            }
            // Another client's session is answered exactly like one that does not exist, so
            // session ids cannot be probed. A session held by a job keeps what comes for it, an
            // unknown method too, so that every reply of a session keeps its order.
            guard let session = table.arrive(sessionID, from: request.client, .request(request)) else {
                if table.isOwned(sessionID, by: request.client) { return }   // queued behind what holds the session
                guard let method else { throw Self.methodNotFound(request.request.method) }
                if table.contains(sessionID) { throw Self.unknownSession(sessionID) }
                // Not held here: its persistence may have it (a shared store), or says there is none.
                drive(request, method, nil, .notHeld, &call)
                return
            }
            guard let method else {
                resume(session, &call)
                throw Self.methodNotFound(request.request.method)
            }
            // Consumed: this binding must not outlive the call, or the session's buffers would
            // have two owners and the request would copy them whole to change them.
            serve(request, method, on: consume session, &call)
        } catch {
            call.reply(ReplyEncoder.failure(id: request.id, error: error), to: request.envelope)
        }
    }

    static func methodNotFound(_ name: String) -> ProtocolError {
        ProtocolError(.methodNotFound, "no method \"\(name)\"", data: ["method": .string(name)])
    }

    static func unknownSession(_ id: String) -> ProtocolError {
        ProtocolError(.unknownSession, "no session \"\(id)\": never opened, closed, or expired", data: ["session": .string(id)])
    }
}
