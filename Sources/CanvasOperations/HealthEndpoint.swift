import Foundation
import Glibc
public import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import SessionStore
import Synchronization

/// What the health endpoint reads of the running server: when its loop last turned, and
/// whether it is draining. Written by the loop, read by the endpoint's thread.
public final class ServerPulse: Sendable {
    private let lastTurn = Atomic<UInt64>(ServerPulse.monotonicNanoseconds())
    private let drainingFlag = Atomic<Bool>(false)

    public init() {}

    package func turned() { lastTurn.store(Self.monotonicNanoseconds(), ordering: .relaxed) }
    public func startDraining() { drainingFlag.store(true, ordering: .relaxed) }
    public var draining: Bool { drainingFlag.load(ordering: .relaxed) }

    /// Seconds since the loop last turned.
    package var sinceTurn: Double { Double(Self.monotonicNanoseconds() &- lastTurn.load(ordering: .relaxed)) / 1e9 }

    package static func monotonicNanoseconds() -> UInt64 {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return UInt64(now.tv_sec) * 1_000_000_000 + UInt64(now.tv_nsec)
    }
}

/// A small HTTP endpoint for orchestrators and load balancers (`--health-endpoint`), on an event
/// loop of its own so that it can tell a stuck request loop from a live one:
///
/// - `GET /livez`: 200 while the request loop has turned within `stuckAfter` (it turns at least
///   every 200 ms when idle), else 503: the process should be restarted.
/// - `GET /readyz`: 200 when live, not draining, and (with a session store) the store answers
///   a PING; else 503 with the reason: take the instance out of rotation.
/// - `GET /metrics`: `ServiceMetrics` in Prometheus text format.
///
/// SwiftNIO's HTTP/1 server serves it: connections are many and kept alive, and none of them
/// holds up another, so a peer that connects and sends nothing, or a byte at a time, cannot make
/// a load balancer's probe time out and take a healthy instance out (issue 33).
public final class HealthEndpoint: Sendable {
    public let address: String
    private let group: MultiThreadedEventLoopGroup
    private let channel: any Channel
    private let probes: StoreProbe?

    /// How much of one request head (its target and header fields) is read; past it, 431.
    package static let headLimit = 8 * 1024
    /// Seconds a connection may stay silent, before a request or after an answer.
    static let idleTimeout: TimeAmount = .seconds(5)
    /// Seconds from a request's first byte (or the connection's opening) to the end of its head:
    /// a head trickled in a byte at a time is cut off here.
    static let headTimeout: TimeAmount = .seconds(5)
    /// Connections open at once, so that health connections cannot take the descriptors the
    /// request sockets need. Past it, the connection that has waited longest for its next
    /// request is closed to make room (`WaitingConnections`): held connections, however many,
    /// never keep a new probe out.
    package static let connectionLimit = 4096
    package static let backlog: Int32 = 1024

    /// Why the endpoint could not be served: what was being done and the native cause.
    public struct StartError: Error, CustomStringConvertible {
        public let description: String
    }

    /// Binds `address` (`HOST:PORT`, or `PORT` for loopback; port 0 picks one). Nothing is
    /// accepted before `start()`.
    public convenience init(address: String, pulse: ServerPulse, metrics: ServiceMetrics, instance: String, sessionStore: String?,
                            logger: Logger) throws(StartError) {
        try self.init(address: address, pulse: pulse, metrics: metrics, instance: instance, sessionStore: sessionStore,
                      logger: logger, connectionLimit: Self.connectionLimit)
    }

    /// `connectionLimit` other than the one served: for a test to reach it with a few connections.
    /// `storeAnswered`: called each time the store answers a PING (the server ends its store
    /// lanes' rest then).
    package init(address: String, pulse: ServerPulse, metrics: ServiceMetrics, instance: String, sessionStore: String?,
         logger: Logger, connectionLimit: Int, storeAnswered: (@Sendable () -> Void)? = nil) throws(StartError) {
        let (host, port) = Self.split(address)
        guard (0...65535).contains(port) else { throw StartError(description: "--health-endpoint \(address): expected HOST:PORT or PORT") }
        var probeAddress = in_addr()
        guard inet_pton(AF_INET, host, &probeAddress) == 1 else {
            throw StartError(description: "--health-endpoint \(address): \(host) is not an IPv4 address")
        }
        let store = try? sessionStore.map { (text) throws(RedisError) in try RedisURL(text) }
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let probes = store.map { StoreProbe(url: $0, answered: storeAnswered) }
        let answers = HealthAnswers(pulse: pulse, metrics: metrics, instance: instance, probes: probes)
        let waiting = WaitingConnections()
        let bootstrap = ServerBootstrap(group: group)
            .serverChannelOption(.backlog, value: Self.backlog)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .serverChannelOption(.autoRead, value: false)
            .serverChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture(withResultOf: {
                    try channel.pipeline.syncOperations.addHandler(ConnectionLimit(limit: connectionLimit, waiting: waiting))
                })
            }
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture(withResultOf: {
                    var limits = NIOHTTPDecoderLimitConfiguration()
                    limits.maxHeaderListSize = Self.headLimit
                    limits.maxHeaderFieldSize = Self.headLimit
                    try channel.pipeline.syncOperations.addHandler(IdleStateHandler(readTimeout: Self.idleTimeout))
                    // Protocol errors are answered by `HealthHTTPHandler`: a head past the limit
                    // gets 431, not NIO's bare 400.
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline(
                        withErrorHandling: false, withEncoderConfiguration: .init(), withDecoderLimitConfiguration: limits)
                    try channel.pipeline.syncOperations.addHandler(HealthHTTPHandler(answers: answers, waiting: waiting, logger: logger))
                })
            }
            .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
            .childChannelOption(.allowRemoteHalfClosure, value: true)
        let channel: any Channel
        do {
            channel = try bootstrap.bind(host: host, port: port).wait()
        } catch {
            try? group.syncShutdownGracefully()
            probes?.stop()
            let code = (error as? IOError)?.errnoCode
            let reason = code.map { "\(String(cString: strerror($0))) (errno \($0))" } ?? "\(error)"
            throw StartError(description: "health endpoint \(host):\(port): binding: \(reason)"
                          + (code == EADDRINUSE ? "; give --health-endpoint another port" : ""))
        }
        self.address = "\(host):\(channel.localAddress?.port ?? port)"
        self.group = group
        self.channel = channel
        self.probes = probes
    }

    /// Starts accepting connections.
    public func start() {
        _ = channel.setOption(.autoRead, value: true)
    }

    /// Closes the listener and every connection, and ends the endpoint's threads.
    public func stop() {
        try? channel.close().wait()
        try? group.syncShutdownGracefully()
        probes?.stop()
    }

    private static func split(_ address: String) -> (String, Int) {
        guard let colon = address.lastIndex(of: ":") else { return ("127.0.0.1", Int(address) ?? -1) }
        return (String(address[..<colon]), Int(address[address.index(after: colon)...]) ?? -1)
    }
}

/// Keeps connections within `limit` open ones. On the listener's pipeline, which receives each
/// accepted connection as a `Channel`. At the limit, the open connection that has waited
/// longest for a request is closed and the new one served: a probe sends its request at once,
/// so it is never the one that has waited longest, and connections held open (polling now and
/// then, or sending nothing) take turns being closed instead of keeping every probe out. Only
/// when every open connection is being answered is the new one closed.
package final class ConnectionLimit: ChannelInboundHandler {
    typealias InboundIn = any Channel
    typealias InboundOut = any Channel
    /// Counted down by each connection's close, which may run after the listener's handler is gone.
    package final class Count: Sendable { let value = Atomic<Int>(0) }
    private let limit: Int
    private let waiting: WaitingConnections
    private let open = Count()

    package init(limit: Int, waiting: WaitingConnections) {
        self.limit = limit
        self.waiting = waiting
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let child = Self.unwrapInboundIn(data)
        // The one closed to make room counts down when its close completes: until then the
        // count is past the limit by the closes under way.
        guard open.value.load(ordering: .relaxed) < limit || waiting.closeLongestWaiting() else {
            child.close(promise: nil)
            return
        }
        open.value.add(1, ordering: .relaxed)
        let open = self.open
        child.closeFuture.whenComplete { _ in open.value.subtract(1, ordering: .relaxed) }
        context.fireChannelRead(data)
    }
}

/// The health endpoint's connections that are waiting for a request (just accepted, or kept
/// alive after an answer), in the order they started waiting: the first is the one to close
/// when the endpoint is full. A connection being answered is not here.
package final class WaitingConnections: @unchecked Sendable {
    // @unchecked: everything is behind `lock` (the endpoint has one event loop, but the
    // listener's and the connections' handlers are each other's only by that choice).
    private final class Entry {
        let channel: any Channel
        var previous: Entry?
        var next: Entry?
        init(_ channel: any Channel) { self.channel = channel }
    }

    private let lock = NSLock()
    private var entries: [ObjectIdentifier: Entry] = [:]
    private var first: Entry?
    private var last: Entry?

    package init() {}

    package var count: Int { lock.withLock { entries.count } }

    /// `channel` waits for its next request from now on (last in the order).
    func waits(_ channel: any Channel) {
        lock.withLock {
            let key = ObjectIdentifier(channel)
            if let entry = entries[key] { unlink(entry) }
            let entry = Entry(channel)
            entries[key] = entry
            entry.previous = last
            last?.next = entry
            last = entry
            if first == nil { first = entry }
        }
    }

    /// `channel` is being answered, or is gone.
    func stops(_ channel: any Channel) {
        lock.withLock {
            if let entry = entries.removeValue(forKey: ObjectIdentifier(channel)) { unlink(entry) }
        }
    }

    /// Closes the connection that has waited longest; false when none is waiting.
    package func closeLongestWaiting() -> Bool {
        let victim: (any Channel)? = lock.withLock {
            guard let entry = first else { return nil }
            entries[ObjectIdentifier(entry.channel)] = nil
            unlink(entry)
            return entry.channel
        }
        guard let victim else { return false }
        victim.close(promise: nil)
        return true
    }

    private func unlink(_ entry: Entry) {
        if let previous = entry.previous { previous.next = entry.next } else if first === entry { first = entry.next }
        if let next = entry.next { next.previous = entry.previous } else if last === entry { last = entry.previous }
        entry.previous = nil
        entry.next = nil
    }
}

/// What each path answers: a status, a body and its type. Sendable: everything it reads is.
package struct HealthAnswers: Sendable {
    package let pulse: ServerPulse
    package let metrics: ServiceMetrics
    package let instance: String
    package let probes: StoreProbe?
    package let stuckAfter: Double = 2.0

    package struct Answer: Sendable {
        var status: HTTPResponseStatus
        var body: String
        var type = "text/plain"
    }

    package static let usage = "GET /livez, /readyz or /metrics\n"

    /// The answer to `method` `uri`; only `/readyz` with a session store waits (for its PING,
    /// off the event loop).
    func answer(_ method: HTTPMethod, _ uri: String, on loop: any EventLoop) -> EventLoopFuture<Answer> {
        guard method == .GET || method == .HEAD else { return loop.makeSucceededFuture(Answer(status: .badRequest, body: Self.usage)) }
        let path = uri.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false).first.map(String.init) ?? ""
        switch path {
        case "/livez", "/healthz":
            let since = pulse.sinceTurn
            return loop.makeSucceededFuture(since <= stuckAfter
                ? Answer(status: .ok, body: "ok\n")
                : Answer(status: .serviceUnavailable, body: "request loop stuck for \(String(format: "%.1f", since)) s\n"))
        case "/readyz":
            if let reason = notReady() {
                return loop.makeSucceededFuture(Answer(status: .serviceUnavailable, body: "not ready: \(reason)\n"))
            }
            guard let probes else { return loop.makeSucceededFuture(Answer(status: .ok, body: "ready\n")) }
            return probes.check(on: loop).map { reason in
                reason.map { Answer(status: .serviceUnavailable, body: "not ready: \($0)\n") } ?? Answer(status: .ok, body: "ready\n")
            }
        case "/metrics":
            let resident = MemoryPressure.residentBytes().map(Double.init) ?? 0
            return loop.makeSucceededFuture(Answer(status: .ok, body: metrics.exposition(instance: instance, extra: .init(
                residentBytes: resident, draining: pulse.draining, loopIdleSeconds: pulse.sinceTurn)),
                type: ServiceMetrics.contentType))
        default:
            return loop.makeSucceededFuture(Answer(status: .notFound, body: "no such path: try /livez, /readyz or /metrics\n"))
        }
    }

    /// Why this instance should not get new clients now, short of asking the store, or nil.
    private func notReady() -> String? {
        let since = pulse.sinceTurn
        if since > stuckAfter { return "request loop stuck for \(String(format: "%.1f", since)) s" }
        if pulse.draining { return "draining" }
        return nil
    }
}

/// The session store's PING for `/readyz`. hiredis blocks, so it runs on a thread of its own,
/// never on the event loop; probes that arrive while one PING is out share its answer, so a
/// store that stopped answering costs one timeout however many probes wait on it.
package final class StoreProbe: @unchecked Sendable {
    // @unchecked: `connection` is used by the pool's one thread alone; `inFlight` is behind its lock.
    private let url: RedisURL
    private let pool = NIOThreadPool(numberOfThreads: 1)
    private var connection: RedisConnection?
    private let inFlight = Mutex<EventLoopFuture<String?>?>(nil)
    /// Told each time the store answers: the server ends its store lanes' rest, so that once
    /// `/readyz` says ready again, requests are served again too (not refused until the lanes' rest, which
    /// grows to seconds while the store is away, runs out).
    private let answered: (@Sendable () -> Void)?

    init(url: RedisURL, answered: (@Sendable () -> Void)? = nil) {
        self.url = url
        self.answered = answered
        pool.start()
    }

    /// Why the store is not usable (nil: it answered), from a PING made now or one under way.
    func check(on loop: any EventLoop) -> EventLoopFuture<String?> {
        let (future, started) = inFlight.withLock { current -> (EventLoopFuture<String?>, Bool) in
            if let current { return (current, false) }
            let future = pool.runIfActive(eventLoop: loop) { self.ping() }
            current = future
            return (future, true)
        }
        // Outside the lock: a future already failed (the pool stopped) runs this at once.
        if started { future.whenComplete { _ in self.inFlight.withLock { $0 = nil } } }
        return future.recover { "session store: not checked (\($0))" }
    }

    private func ping() -> String? {
        do {
            if connection == nil { connection = try RedisConnection(url: url, timeout: .seconds(1)) }
            _ = try connection!.command(["PING"], doing: "checking the session store")
            answered?()
            return nil
        } catch {
            connection = nil
            return "session store: \(error)"
        }
    }

    package func stop() { try? pool.syncShutdownGracefully() }
}

/// One connection's requests, answered in turn. A connection that is silent for the idle
/// timeout, or takes longer than the head timeout to send a request head, is closed; a protocol
/// error gets its answer (400, or 431 for a head past the limit) and the connection is closed
/// once the peer stops sending.
package final class HealthHTTPHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let answers: HealthAnswers
    private let waiting: WaitingConnections
    private let logger: Logger
    private var request: HTTPRequestHead?
    private var headDeadline: Scheduled<Void>?
    /// A protocol error was answered: what arrives after it is read and dropped.
    private var failed = false
    /// An answer is being made (a `/readyz` may wait for the store's PING).
    private var answering = false
    /// The peer has closed its side: the answer under way is the last.
    private var inputClosed = false

    package init(answers: HealthAnswers, waiting: WaitingConnections, logger: Logger) {
        self.answers = answers
        self.waiting = waiting
        self.logger = logger
    }

    func channelActive(context: ChannelHandlerContext) {
        armHeadDeadline(context: context)
        waiting.waits(context.channel)
        context.fireChannelActive()
    }

    func channelInactive(context: ChannelHandlerContext) {
        headDeadline?.cancel()
        waiting.stops(context.channel)
        context.fireChannelInactive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !failed else { return }
        switch Self.unwrapInboundIn(data) {
        case .head(let head):
            headDeadline?.cancel()
            headDeadline = nil
            waiting.stops(context.channel)
            request = head
        case .body:
            break   // no path takes a body; a POST's is read and refused with the request
        case .end:
            guard let head = request else { return }
            request = nil
            respond(to: head, context: context)
        }
    }

    private func respond(to head: HTTPRequestHead, context: ChannelHandlerContext) {
        answering = true
        let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        answers.answer(head.method, head.uri, on: context.eventLoop).whenSuccess { answer in
            let (handler, context) = loopBound.value
            handler.answering = false
            handler.send(answer, head: head, keepAlive: head.isKeepAlive && answer.status != .badRequest && !handler.inputClosed,
                         context: context)
        }
    }

    private func send(_ answer: HealthAnswers.Answer, head: HTTPRequestHead, keepAlive: Bool, context: ChannelHandlerContext) {
        guard context.channel.isActive else { return }
        let body = Array(answer.body.utf8)
        var headers = HTTPHeaders([("Content-Type", answer.type), ("Content-Length", String(body.count))])
        if !keepAlive { headers.add(name: "Connection", value: "close") }
        context.write(Self.wrapOutboundOut(.head(HTTPResponseHead(version: head.version, status: answer.status, headers: headers))),
                      promise: nil)
        if head.method != .HEAD {
            context.write(Self.wrapOutboundOut(.body(.byteBuffer(context.channel.allocator.buffer(bytes: body)))), promise: nil)
        }
        let sent = context.writeAndFlush(Self.wrapOutboundOut(.end(nil)))
        if keepAlive {
            armHeadDeadline(context: context)
            waiting.waits(context.channel)
        } else {
            finish(after: sent, context: context)
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        guard !failed else { return }
        failed = true
        headDeadline?.cancel()
        guard let parserError = error as? HTTPParserError else {
            context.close(promise: nil)
            return
        }
        let tooLarge = parserError == .headerOverflow
        let answer = HealthAnswers.Answer(
            status: tooLarge ? .requestHeaderFieldsTooLarge : .badRequest,
            body: tooLarge ? "request head over \(HealthEndpoint.headLimit) bytes\n" : HealthAnswers.usage)
        logger.debug("health endpoint: refused a request", metadata: ["error": "\(parserError)", "status": "\(answer.status.code)"])
        send(answer, head: HTTPRequestHead(version: .http1_1, method: .GET, uri: "/"), keepAlive: false, context: context)
    }

    /// Our side is finished: the output is closed once the answer is out, and the rest of what
    /// the peer sends is read and dropped until it closes or goes idle. Closing with unread bytes
    /// would reset the connection, and the answer could be lost on the way.
    private func finish(after sent: EventLoopFuture<Void>, context: ChannelHandlerContext) {
        failed = true
        // However the peer goes on, the connection ends by the head timeout.
        armHeadDeadline(context: context)
        let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        sent.whenComplete { _ in
            let (handler, context) = loopBound.value
            context.close(mode: handler.inputClosed ? .all : .output, promise: nil)
        }
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        switch event {
        case is IdleStateHandler.IdleStateEvent:
            context.close(promise: nil)
        case ChannelEvent.inputClosed:
            // The peer is done sending; an answer under way is still sent, then we close.
            inputClosed = true
            if !answering { context.close(promise: nil) }
        default:
            context.fireUserInboundEventTriggered(event)
        }
    }

    private func armHeadDeadline(context: ChannelHandlerContext) {
        headDeadline?.cancel()
        let loopBound = NIOLoopBound(context, eventLoop: context.eventLoop)
        headDeadline = context.eventLoop.scheduleTask(in: HealthEndpoint.headTimeout) {
            loopBound.value.close(promise: nil)
        }
    }
}
