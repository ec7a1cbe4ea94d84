public import CanvasOperations
public import CanvasService
public import Logging
import Foundation
import Dispatch
import CanvasProtocol
import SessionStore
import DocumentStore
public import ZeroMQ

/// Why the server could not start.
public enum ServerStartError: Error, CustomStringConvertible {
    case transport(ZMQError)
    /// No keys were given and an endpoint can be reached from other machines.
    case unauthenticatedRemote(endpoint: String)
    case curveUnavailable
    /// A ws:// endpoint beyond loopback without `--web-tokens`.
    case unauthenticatedWeb(endpoint: String)
    case notWebSocket(endpoint: String, expected: String)
    /// The ws:// endpoints could not be served.
    case web(String)
    /// `--session-store` was given and could not be reached: what was done, and why.
    case sessionStore(String)
    /// `--health-endpoint` could not be served.
    case health(String)
    /// Told to stop before it served (while it waited for its instance name's lease).
    case stopped(String)

    public var description: String {
        switch self {
        case .transport(let error): return error.description
        case .unauthenticatedRemote(let endpoint):
            return "refusing to serve \(endpoint) without authentication: bind to 127.0.0.1, ::1 or ipc://, "
                + "or give --curve-secret-key and --allowed-keys"
        case .curveUnavailable: return "this libzmq was built without CurveZMQ (zmq_has(\"curve\") is false)"
        case .unauthenticatedWeb(let endpoint):
            return "refusing to serve \(endpoint) to web peers without access tokens: bind it to 127.0.0.1 (behind a proxy), or give --web-tokens"
        case .notWebSocket(let endpoint, let expected):
            return "\(endpoint) is not a \(expected):// endpoint" + (expected == "wss" ? " (--web-tls-cert serves wss://)" : "")
        case .sessionStore(let reason), .health(let reason), .stopped(let reason), .web(let reason): return reason
        }
    }
}

/// The sockets and the loop: a ROUTER for requests, a PUB for events, and the dispatcher
/// between them, all on the calling thread (a ZeroMQ socket belongs to one thread).
///
/// With CurveZMQ keys, both sockets are CURVE servers behind a ZAP handler that admits only the
/// allowed client keys; every request carries its client's key as the owner of what it opens,
/// and the event socket is an XPUB that applies a subscription only to topics of sessions the
/// subscriber owns (and the shared `documents` topic).
public final class CanvasServer {
    private let context: ZMQContext
    private let requests: ZMQSocket
    private let eventSocket: ZMQSocket
    /// The event socket's subscriptions being vetted (with CurveZMQ).
    private var eventVetting = SubscriptionVetting()
    private let dispatcher: Dispatcher
    private let configuration: ServerConfiguration
    private let logger: Logger
    private let clock = ContinuousClock()
    /// Saves run here, one per document and as many documents at once as there are cores
    /// (so a slow save into a large document holds up no other), and say they are done through
    /// `waker`, a DEALER connected over inproc to the request socket: the loop learns of it in
    /// the same receive that brings requests, with no extra poll.
    private let saves: SaveRunner
    /// Reads of documents (`document.list`, `.info`, `.revisions`, the page of `canvas.open`):
    /// file and PDF work too, so off the loop as well, answered the same way.
    private let reads: SaveRunner
    /// With a session store: the threads that speak to it (`storeLanes`), answering the same way.
    private let stores: [StoreLine]
    private let waker: SaveWaker
    /// Messages from this routing id are the waker's, not a client's. Random, so no client
    /// can pose as it (and one that did would only make the loop look for finished saves).
    private let wakerID: [UInt8] = (0..<16).map { _ in UInt8.random(in: 0...255) }
    /// Messages from this routing id are saves heard on the document feed (several instances).
    private let relayID: [UInt8] = (0..<16).map { _ in UInt8.random(in: 0...255) }
    /// Messages from this routing id say web peers' messages are waiting (`WebEndpoints`).
    private let webID: [UInt8] = (0..<16).map { _ in UInt8.random(in: 0...255) }
    private var relay: SaveWaker?
    /// Whether the last request `serveLoopback` answered was waited for, not found queued.
    private var waitedFor = false
    /// Only with CurveZMQ: the handshake gatekeeper, and the keys it admits.
    private let zap: ZAPHandler?
    private let allowedKeys: AllowedKeys?
    /// Only with ws:// endpoints: the web endpoints.
    private let web: WebEndpoints?
    /// What this instance counts, and how its loop is doing, for the health endpoint.
    public let metrics = ServiceMetrics(housekeeping: Housekeeping.Work.allCases.map(\.rawValue))
    public let pulse = ServerPulse()
    private let health: HealthEndpoint?
    /// With a session store: what holds this instance's name there.
    private let shared: SharedSessions?
    /// The health endpoint's address, with the port it was given.
    public var healthEndpoint: String? { health?.address }

    /// The endpoints actually bound (a `*` port resolved).
    public let endpoint: String
    public let eventsEndpoint: String
    /// The ws:// endpoints bound, when web peers are served.
    public var webEndpoint: String? { web?.endpoint }
    public var webEventsEndpoint: String? { web?.eventsEndpoint }

    /// `shouldStop` is asked while start-up waits for the instance name's lease (up to one
    /// lease period, `SharedSessions.claimName`); when it says so, start-up ends with `.stopped`.
    public init(configuration: ServerConfiguration, logger: Logger, shouldStop: () -> Bool = { false }) throws(ServerStartError) {
        self.configuration = configuration
        self.logger = logger
        do {
            context = try Self.makeContext()
            switch configuration.security {
            case .loopbackOnly:
                for endpoint in [configuration.endpoint, configuration.eventsEndpoint] where !ServiceSecurity.isLocal(endpoint) {
                    throw ServerStartError.unauthenticatedRemote(endpoint: endpoint)
                }
                zap = nil
                allowedKeys = nil
                requests = try context.socket(.router)
                eventSocket = try context.socket(.pub)
            case .curve(let serverKeys, let allowed):
                guard ZMQContext.has("curve") else { throw ServerStartError.curveUnavailable }
                allowedKeys = allowed
                // Bound before the server's sockets: libzmq admits every CURVE client while no
                // handler is listening.
                zap = try ZAPHandler(context: context) { [logger] request in
                    guard request.mechanism == "CURVE", let key = request.clientKey else {
                        return .deny(reason: "CURVE required")
                    }
                    guard allowed.contains(key) else {
                        logger.warning("client key refused", metadata: ["key": "\(key.z85)", "address": "\(request.address)"])
                        return .deny(reason: "unknown key")
                    }
                    return .allow(userID: key.z85)
                }
                requests = try context.socket(.router)
                try requests.makeCurveServer(secretKey: serverKeys.secretKey)
                try requests.setZAPDomain("canvasd")
                eventSocket = try context.socket(.xpub)
                try eventSocket.makeCurveServer(secretKey: serverKeys.secretKey)
                try eventSocket.setZAPDomain("canvasd")
                try eventSocket.setManualSubscriptions(true)
            }
            try Self.bind(requests: requests, events: eventSocket, configuration)
            // Read before the inproc bind below, which would otherwise be the "last endpoint".
            endpoint = requests.lastEndpoint
            eventsEndpoint = eventSocket.lastEndpoint
            let wakeEndpoint = "inproc://canvasd-saves-\(UInt64.random(in: 0...UInt64.max))"
            try requests.bind(wakeEndpoint)
            let socket = try context.socket(.dealer)
            try socket.setRoutingID(wakerID)
            try socket.connect(wakeEndpoint)
            waker = SaveWaker(socket)
            if let webConfiguration = configuration.web {
                // Web peers' messages wait in the transport; this tells the loop they are there,
                // in the same receive that brings requests.
                let webSocket = try context.socket(.dealer)
                try webSocket.setRoutingID(webID)
                try webSocket.connect(wakeEndpoint)
                let webWaker = SaveWaker(webSocket)
                web = try WebEndpoints(configuration: webConfiguration, maxMessageBytes: configuration.service.limits.maxMessageBytes,
                                       maxFrames: Self.maxFrames(configuration.service.limits), pulse: pulse, logger: logger,
                                       wake: { webWaker.wake() })
            } else {
                web = nil
            }
            if configuration.sessionStore != nil {
                let relaySocket = try context.socket(.dealer)
                try relaySocket.setRoutingID(relayID)
                try relaySocket.connect(wakeEndpoint)
                relay = SaveWaker(relaySocket)
            }
        } catch let error as ServerStartError {
            throw error
        } catch let error as ZMQError {
            throw .transport(error)
        } catch {
            fatalError("unexpected error \(error)")
        }
        var lanes: [(shared: SharedSessions, line: StoreLine)] = []
        // Redis answers in well under a millisecond here; a lane's thread waits 500 ms at
        // most for one that does not, and then lets it rest (SharedSessions), until the rest
        // runs out or the health endpoint's PING finds it answering.
        let rest = StoreRest()
        if let url = configuration.sessionStore {
            do throws(any Error) {
                for _ in 0..<Self.storeLanes {
                    let store = try SessionSnapshotStore(url: url, instance: configuration.service.instanceName, ttl: configuration.service.storedSessionLife,
                                                         timeout: .milliseconds(500), replicas: configuration.sessionStoreReplicas,
                                                         replicaTimeout: configuration.sessionStoreReplicaTimeout)
                    let waker = self.waker
                    lanes.append((SharedSessions(store: store, limits: configuration.service.limits, logger: logger, rest: rest),
                                  StoreLine { waker.wake() }))
                }
                let shared = lanes[0].shared
                do throws(SharedSessions.NameClaimError) {
                    try shared.claimName(shouldStop: shouldStop)
                } catch {
                    switch error {
                    case .store(let why): throw ServerStartError.sessionStore(why)
                    case .stopped(let why): throw ServerStartError.stopped(why)
                    }
                }
                // Saves are announced for every instance, each relaying what it hears.
                let feed = try DocumentFeed(url: url, markLife: configuration.service.idleTimeout * 2, logger: logger)
                let relay = self.relay!
                try feed.listen({ seq, data in relay.send([Array(String(seq).utf8), data]) },
                                failed: { [logger] error in logger.error("document feed interrupted; listening again", metadata: ["error": "\(error)"]) })
                shared.feed = feed
                logger.info("sessions shared through the session store",
                            metadata: ["store": "\(shared.address)", "lanes": "\(lanes.count)", "instance": "\(configuration.service.instanceName)",
                                       "replicas": "\(configuration.sessionStoreReplicas)"])
            } catch let error as ServerStartError {
                throw error
            } catch {
                throw .sessionStore("\(error)")
            }
        }
        if let address = configuration.healthEndpoint {
            do throws(HealthEndpoint.StartError) {
                health = try HealthEndpoint(address: address, pulse: pulse, metrics: metrics, instance: configuration.service.instanceName,
                                            sessionStore: configuration.sessionStore, logger: logger,
                                            connectionLimit: HealthEndpoint.connectionLimit,
                                            storeAnswered: { _ = rest.answered() })
            } catch {
                throw .health(error.description)
            }
        } else {
            health = nil
        }
        for lane in lanes { lane.shared.metrics = metrics }
        let waker = self.waker
        let saves = SaveRunner(width: ProcessInfo.processInfo.activeProcessorCount) { waker.wake() }
        let reads = SaveRunner(width: ProcessInfo.processInfo.activeProcessorCount) { waker.wake() }
        self.saves = saves
        self.reads = reads
        self.stores = lanes.map(\.line)
        self.shared = lanes.first?.shared
        dispatcher = Dispatcher(configuration: configuration.serviceAsRun, logger: logger,
                                saves: { document, save in saves.submit(document, save) },
                                reads: { key, read in reads.submit(key, read) },
                                lanes: lanes.map { lane in StoreLane(shared: lane.shared, run: { work in lane.line.submit(work) }) },
                                metrics: metrics)
    }

    /// Connections to the session store, each with its own thread: a session's steps go to one,
    /// so this many sessions' steps can wait on Redis at once. (One alone bounded an instance
    /// to one Redis round trip at a time, under the synchronous loop's throughput.)
    static let storeLanes = 4

    private static func bind(requests: ZMQSocket, events eventSocket: ZMQSocket,
                             _ configuration: ServerConfiguration) throws(ZMQError) {
        try prepareRequestSocket(requests, limits: configuration.service.limits)
        try requests.bind(configuration.endpoint)
        // A subscriber that stops reading loses events past this queue; the server never waits for it.
        try eventSocket.setSendHighWaterMark(Limits.eventQueueMessages)
        try eventSocket.bind(configuration.eventsEndpoint)
    }

    /// Serves until `shouldStop` says so; it is asked at least every `checkInterval`.
    /// `reloadKeys` is asked as often; when it says so, the allowed keys are read again.
    /// `shouldDrain`, once it says so, starts a drain: the instance goes unready (`/readyz`
    /// 503), serves on for `drainTime` while the balancer moves its clients away (every
    /// session it holds is in the session store already, written before each reply), then
    /// stops as `shouldStop` would.
    public func run(checkInterval: Duration = .milliseconds(200), reloadKeys: () -> Bool = { false },
                    shouldDrain: () -> Bool = { false }, shouldStop: () -> Bool) throws(ZMQError) {
        switch configuration.security {
        case .loopbackOnly where web != nil:
            logger.notice("no CurveZMQ keys configured: serving tcp without authentication, on loopback only", metadata: [
                "requests": "\(endpoint)", "events": "\(eventsEndpoint)", "zmq": "\(ZMQContext.version)",
            ])
        case .loopbackOnly:
            logger.notice("no CurveZMQ keys configured: serving without authentication, on loopback only", metadata: [
                "requests": "\(endpoint)", "events": "\(eventsEndpoint)", "zmq": "\(ZMQContext.version)",
            ])
        case .curve(let keys, let allowed):
            logger.info("canvasd serving with CurveZMQ", metadata: [
                "requests": "\(endpoint)", "events": "\(eventsEndpoint)", "zmq": "\(ZMQContext.version)",
                "serverKey": "\(keys.publicKey.z85)", "allowedKeys": "\(allowed.count)",
            ])
        }
        if let web {
            logger.notice(web.tokens == nil ? "serving web peers without tokens, on loopback only" : "serving web peers with access tokens",
                          metadata: ["requests": "\(web.endpoint)", "events": "\(web.eventsEndpoint)",
                                     "tokens": "\(web.tokens?.count ?? 0)"])
        }
        web?.transport.start()
        if let health {
            health.start()
            logger.notice("health and metrics served", metadata: ["address": "http://\(health.address)", "paths": "/livez /readyz /metrics"])
        }
        var nextSweep = clock.now + .seconds(1)
        var timeout: Int32 = -2
        // Whether requests may be queued already, so the loop looks for a burst before it
        // waits. Not after the queue was found empty: that look, a system call, would come
        // right after the reply went out, beside the I/O thread that is sending it.
        var mayBeQueued = true
        var drainEnds: ContinuousClock.Instant?
        while !shouldStop() {
            pulse.turned()
            if drainEnds == nil, shouldDrain() {
                drainEnds = clock.now + configuration.drainTime
                pulse.startDraining()
                // Without a drain time (no balancer to tell) a stop is just a stop, logged as one.
                if configuration.drainTime > .zero {
                    logger.notice("draining: unready now, stopping after the drain time",
                                  metadata: ["drainMs": "\(configuration.drainTime.milliseconds)",
                                             "sessions": "\(dispatcher.sessionCount)"])
                }
            }
            if let drainEnds, clock.now >= drainEnds { break }
            let reload = reloadKeys()
            if reload {
                web?.reloadTokens()
                web?.reloadTLS()
            }
            if reload, let allowedKeys {
                do {
                    let count = try allowedKeys.reload()
                    logger.info("allowed keys reloaded", metadata: ["keys": "\(count)"])
                } catch {
                    logger.error("allowed keys not reloaded; the previous ones stay", metadata: ["error": "\(error)"])
                }
            }
            var wait = checkInterval
            if let deadline = dispatcher.nextDeadline { wait = min(wait, max(.zero, deadline - clock.now)) }
            let milliseconds = Int32(wait.milliseconds)
            do {
                if zap == nil {
                    try serveLoopback(waitingAtMost: milliseconds, timeout: &timeout, mayBeQueued: &mayBeQueued)
                } else {
                    // Subscriptions wait to be vetted here, so both sockets are watched, but not
                    // an XPUB whose subscription waits for the store's answer
                    // (`SubscriptionVetting`): the lane that answers wakes the loop.
                    var watched = [requests]
                    let vettingEvents = eventVetting.reading
                    if vettingEvents { watched.append(eventSocket) }
                    let ready = try ZMQSocket.poll(watched, timeoutMilliseconds: Int(milliseconds))
                    if (vettingEvents && ready[1]) || eventVetting.answered { try vetSubscriptions() }
                    if ready[0] {
                        // A burst is served before polling again; `receive` never blocks here.
                        var served = 0
                        while served < Self.burst,
                              let message = try requests.receiveRouted(wait: false, readUserID: true, keepingAtMost: maxFrames) {
                            deliver(serve(message, owner: message.userID, at: clock.now))
                            served += 1
                        }
                    }
                }
            } catch where error.isInterrupted {
                continue   // a signal: go round and ask shouldStop
            }
            let now = clock.now
            if let deadline = dispatcher.nextDeadline, deadline <= now { publish(dispatcher.fireTimers(at: now)) }
            if now >= nextSweep {
                if let shared, let line = stores.first {
                    // On its lane's thread, like every call to the store. Unready when two
                    // processes share a name.
                    let pulse = self.pulse
                    line.submit { if !shared.renewName() { pulse.startDraining() } }
                }
                let tallies = web.map { [$0.transport.tally.requests, $0.transport.tally.events] } ?? []
                metrics.gauges(sessions: dispatcher.sessionCount, jobsInFlight: dispatcher.jobsInFlight,
                               webConnections: tallies.reduce(0) { $0 + $1.open },
                               webCutOff: tallies.reduce(0) { $0 + $1.cutOff })
                metrics.publish()
                publish(dispatcher.expireIdle(at: now))
                nextSweep = now + .seconds(1)
            }
        }
        // Saves under way finish (a save is never cut short by a stop), and are answered: a
        // save's answer may start the session's write, so a few rounds.
        for _ in 0..<8 {
            saves.wait()
            reads.wait()
            for line in stores { line.wait() }
            deliver(dispatcher.collectSaves(at: clock.now))
            if dispatcher.jobsInFlight == 0 { break }
        }
        for line in stores { line.stop() }
        logger.info("canvasd stopping", metadata: ["sessions": "\(dispatcher.sessionCount)"])
        shared?.releaseName()
        zap?.stop()
        health?.stop()
        web?.transport.stop()
    }

    /// One turn of the loop when only the request socket needs watching (no CurveZMQ; web
    /// peers' messages are announced on it too, by the web waker): a blocking receive with a
    /// timeout, not a poll followed by a receive, so one trip into libzmq per request instead
    /// of three.
    ///
    /// A request that had to be waited for found the queue empty, and its client is waiting on
    /// this reply alone: it goes out first thing. One that was queued already starts a burst:
    /// the requests queued behind it are answered before any reply goes out, so libzmq's I/O
    /// thread is woken once and writes the replies together. Waking it (an eventfd write, and
    /// on two cores often a switch to it) is the largest single cost of a pipelined request,
    /// larger than answering it. Each output keeps its events before its reply, in order.
    private func serveLoopback(waitingAtMost milliseconds: Int32, timeout: inout Int32, mayBeQueued: inout Bool) throws(ZMQError) {
        var first: ZMQSocket.RoutedMessage?
        if mayBeQueued { first = try requests.receiveRouted(wait: false, keepingAtMost: maxFrames) }
        if first == nil {
            if milliseconds != timeout {
                try requests.setReceiveTimeout(milliseconds: milliseconds)
                timeout = milliseconds
            }
            if milliseconds > 0, dispatcher.awaitsStore {
                switch try awaitStoreAnswer() {
                case .answered(let output):
                    deliver(output)
                    if !output.replies.isEmpty { handOver() }
                    return
                case .request(let message):
                    first = message
                case .none:
                    break
                }
            }
        }
        if first == nil {
            let waiting = clock.now
            mayBeQueued = true
            guard let message = try requests.receiveRouted(wait: milliseconds > 0, keepingAtMost: maxFrames) else { return }
            let now = clock.now
            if now - waiting >= Self.queuedWithin {
                mayBeQueued = false
                // Handed over only when the request before was waited for too: a client in
                // round trips. The first one waited for after a burst is more likely the next
                // of a pipelining client's, whose following requests are on their way.
                let handingOver = waitedFor
                waitedFor = true
                let output = serve(message, owner: nil, at: now, sendingAtOnce: true, handingOver: handingOver)
                deliver(output)
                if handingOver, !output.replies.isEmpty { handOver() }
                return
            }
            first = message
        }
        waitedFor = false
        guard let first else { return }
        var outputs: [Dispatcher.Output] = []
        outputs.reserveCapacity(Self.burst)
        defer { for output in outputs { deliver(output) } }
        // One clock reading per request: where one ends, the next begins.
        var mark = clock.now
        outputs.append(serve(first, owner: nil, at: &mark))
        mayBeQueued = false
        while outputs.count < Self.burst {
            guard let next = try requests.receiveRouted(wait: false, keepingAtMost: maxFrames) else { return }
            outputs.append(serve(next, owner: nil, at: &mark))
        }
        mayBeQueued = true
    }

    /// Reads the subscriptions that subscribers sent (XPUB in manual mode) and applies those
    /// their identity may have: its own sessions' topics and the shared `documents` topic.
    /// A refused one is simply not applied, so its subscriber receives nothing for it.
    private func vetSubscriptions() throws(ZMQError) {
        let socket = eventSocket, dispatcher = dispatcher, logger = logger
        try eventVetting.vet(socket: socket, next: { () throws(ZMQError) in
            while let message = try socket.receiveWithUserID(wait: false) {
                guard let frame = message.frames.first, let kind = frame.first, kind <= 1 else { continue }
                return (kind, Array(frame.dropFirst()), message.userID)
            }
            return nil
        }, check: { client, topic in dispatcher.subscription(client, to: topic) },
           ask: { id, client, answer in dispatcher.askOwner(of: id, for: client, answer) },
           applied: { topic, client, allowed in
            if allowed {
                logger.debug("subscription applied", metadata: ["topic": "\(String(decoding: topic, as: UTF8.self))"])
            } else {
                logger.info("subscription refused", metadata: ["topic": "\(String(decoding: topic, as: UTF8.self))", "client": "\(client ?? "-")"])
            }
        })
    }

    /// The context the server's sockets are made in. Public so that a benchmark's ROUTER echo
    /// serves from the same.
    ///
    /// Its I/O thread is scheduled as a batch thread, so that waking it (every reply after a
    /// pause does) does not take this thread's core mid-burst: with the default policy, on a
    /// machine of few cores, it woke every few replies and ran while the loop waited to send
    /// the rest. It trades a little of the round trip for pipelined throughput;
    /// `canvasbench latency --pipelined-only --against` (with `chrt -b` on the other canvasd's
    /// I/O thread) shows both.
    public static func makeContext() throws(ZMQError) -> ZMQContext {
        let context = try ZMQContext()
        try context.setBackgroundScheduling(.batch)
        return context
    }

    /// The options of the ROUTER socket requests come in on. Public so that a benchmark's
    /// ROUTER echo serves with exactly the same ones.
    public static func prepareRequestSocket(_ socket: ZMQSocket, limits: Limits) throws(ZMQError) {
        // libzmq drops a peer that sends one frame over this; requests over the limit but under
        // it get a PAYLOAD_TOO_LARGE reply instead, so the connection survives ordinary mistakes.
        try socket.setMaximumMessageSize(Int64(max(limits.maxMessageBytes * 4, 16 << 20)))
        try socket.setRouterHandover(true)
    }

    /// Frames of one request kept in memory: enough to see that a request of more is over the
    /// byte limit (each frame counts `Limits.frameOverheadBytes`), plus the envelope.
    private var maxFrames: Int { Self.maxFrames(configuration.service.limits) }

    public static func maxFrames(_ limits: Limits) -> Int { limits.maxMessageBytes / Limits.frameOverheadBytes + 3 }

    /// Requests read (and answered) in one go before their replies are sent. Replies held
    /// back save libzmq's I/O thread a wake-up each, but keep the first of them waiting for
    /// the rest; a burst as long as a client's pipeline leaves that client with nothing back
    /// until all are answered, and canvasd idle meanwhile. The size is the one
    /// `canvasbench latency --pipelined-only --against` found best; its commit has the figures.
    private static let burst = 32

    /// A receive that returns sooner than this found its request queued (libzmq hands it over
    /// without a system call); waking from a wait takes longer. Wrong either way costs little:
    /// one look that finds nothing, or one reply sent alone.
    private static let queuedWithin: Duration = .microseconds(5)

    /// What to send for one message: the answers to a request, or to the saves that finished.
    /// `sendingAtOnce`: a reply ready before the dispatcher's turn ends goes out then.
    /// `mark`: when its handling began (and the dispatcher's time for it); moved on to when it
    /// ended, which is when the next request of a burst begins, so a burst reads the clock
    /// once per request.
    ///
    /// The reply goes back behind the request's envelope: the routing id ROUTER put first,
    /// and the empty delimiter REQ clients send (DEALER clients may not).
    private func serve(_ message: ZMQSocket.RoutedMessage, owner: String?, at mark: inout ContinuousClock.Instant,
                       sendingAtOnce: Bool = false, handingOver: Bool = true) -> Dispatcher.Output {
        guard let sender = message.envelope.first else { return Dispatcher.Output() }
        if sender == wakerID {
            defer { mark = clock.now }
            return dispatcher.collectSaves(at: mark)
        }
        let sendNow: ((Dispatcher.Output.Reply) -> Void)? = sendingAtOnce ? { [self] reply in
            send(reply)
            if handingOver { handOver() }
        } : nil
        if sender == webID, let web {
            defer { mark = clock.now }
            return web.serve(dispatcher, at: mark, sendingAtOnce: sendNow)
        }
        if sender == relayID, message.envelope.count == 1, message.body.count == 2,
           let seq = UInt64(String(decoding: message.body[0], as: UTF8.self)) {
            defer { mark = clock.now }
            return dispatcher.relay(seq: seq, data: message.body[1])
        }
        let output = dispatcher.handle(message.body, envelope: message.envelope, from: owner, droppedFrames: message.dropped,
                                       at: mark, sendingAtOnce: sendNow)
        let end = clock.now
        metrics.handled(seconds: (end - mark).seconds)
        mark = end
        return output
    }

    private func serve(_ message: ZMQSocket.RoutedMessage, owner: String?, at now: ContinuousClock.Instant,
                       sendingAtOnce: Bool = false, handingOver: Bool = true) -> Dispatcher.Output {
        var mark = now
        return serve(message, owner: owner, at: &mark, sendingAtOnce: sendingAtOnce, handingOver: handingOver)
    }

    private enum StoreWait {
        case answered(Dispatcher.Output)
        case request(ZMQSocket.RoutedMessage)
    }

    /// How long the loop watches for a session store's answer before it sleeps: a change's
    /// call takes 60-80 µs on the 2-core machine, a replica's WAIT about twice that.
    private static let storeWatch: Duration = .microseconds(250)

    /// With a call to the session store out and no request waiting, watches for its answer (or
    /// a request) for a short while, yielding the core between looks, before the loop sleeps:
    /// the lane posts its answer and then wakes the loop through the request socket, and that
    /// wake-up (the loop's thread brought back from a blocking receive on the other core) took
    /// 26 µs of the 70 a change's call takes (`make bench-cluster`'s round trip with the store).
    /// Under load the loop always has a request waiting, and never watches.
    private func awaitStoreAnswer() throws(ZMQError) -> StoreWait? {
        let until = clock.now + Self.storeWatch
        repeat {
            if dispatcher.anyJobFinished { return .answered(dispatcher.collectSaves(at: clock.now)) }
            if let message = try requests.receiveRouted(wait: false, keepingAtMost: maxFrames) { return .request(message) }
            sched_yield()
        } while clock.now < until
        return nil
    }

    /// Lets libzmq's I/O thread, just woken to write a reply, run before whatever this thread
    /// does next (the reply cache, the loop, the next wait): the scheduler tends to wake it on
    /// the waker's core, where it would wait for all of that. Where it has a core of its own,
    /// this returns at once. Only for a request that was waited for, and only when the one
    /// before was waited for too: yielding inside a burst, or right after one (most often a
    /// pipelining client's next request), costs pipelined throughput more than it gives the
    /// round trip (`canvasbench latency --against` shows both).
    private func handOver() { sched_yield() }

    private func deliver(_ output: Dispatcher.Output) {
        // Events first: a client that has its reply can expect the events it caused to be on the way.
        publish(output.events)
        for reply in output.replies { send(reply) }
    }

    private func send(_ reply: Dispatcher.Output.Reply) {
        metrics.replied(reply.bytes)
        do {
            if let web, web.send(reply) { return }
            try requests.send(envelope: reply.envelope, body: reply.bytes, wait: false)
        } catch {
            logger.warning("reply not sent", metadata: ["error": "\(error)"])
        }
    }

    private func publish(_ events: [[[UInt8]]]) {
        for event in events {
            do {
                try eventVetting.publish(event, on: eventSocket)
            } catch {
                logger.warning("event not published", metadata: ["error": "\(error)"])
            }
            web?.publish(event)
        }
    }
}

/// The save workers' end of the inproc pipe that tells the loop a save is done.
// A ZeroMQ socket may move between threads given a full memory barrier between uses; the lock
// gives that, and keeps two workers from using it at once.
private final class SaveWaker: @unchecked Sendable {
    private let socket: ZMQSocket
    private let lock = NSLock()

    init(_ socket: ZMQSocket) { self.socket = socket }

    func wake() {
        // Never waits: if the pipe is full, wake-ups are already queued and one is enough (and
        // a stopping loop that no longer reads must not leave a worker stuck).
        lock.withLock { _ = try? socket.send([[]], wait: false) }
    }

    /// Hands a message to the loop, waiting while its queue is full (a feed relayed must not
    /// lose saves to a burst).
    func send(_ frames: [[UInt8]]) {
        lock.withLock { _ = try? socket.send(frames, wait: true) }
    }
}
