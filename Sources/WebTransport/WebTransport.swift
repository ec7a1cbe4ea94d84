public import Logging
import NIOCore
import NIOPosix
import Synchronization
import Glibc

/// What web peers sent, waiting for the request loop. The event loop pushes; the request loop
/// takes everything at once. `wake` is called when the inbox stops being empty, so a burst of
/// messages costs the loop one wake-up.
final class WebInbox: Sendable {
    private let messages = Mutex<[WebInbound]>([])
    private let wake: @Sendable () -> Void

    init(wake: @escaping @Sendable () -> Void) { self.wake = wake }

    func push(_ message: WebInbound) {
        let wasEmpty = messages.withLock { messages in
            defer { messages.append(message) }
            return messages.isEmpty
        }
        if wasEmpty { wake() }
    }

    func take() -> [WebInbound] {
        messages.withLock { messages in
            defer { messages = [] }
            return messages
        }
    }
}

/// Both endpoints' tallies as of the last sweep, for the loop's metrics.
private final class Tallies: Sendable {
    let value = Mutex<(requests: ConnectionRules.Tally, events: ConnectionRules.Tally)>((.init(), .init()))
}

/// canvasd's ws:// endpoints (spec §1.2) on SwiftNIO: the request endpoint and the events
/// endpoint, ZWS 2.0 on each, with every connection a `WebConnection` its endpoint knows (its
/// source, the tokens it showed, its subscriptions, its requests in flight) and holds to
/// `ConnectionRules`.
///
/// The request loop and the endpoints meet in two places only: messages come to the loop
/// through `take()` (the loop is woken by `wake` when there are some), and everything the loop
/// decides goes to the endpoints' one event loop as a task (`reply`, `publish`, `settle`,
/// `authenticated`, `revoke`), in the order the loop decided it.
public final class WebTransport: Sendable {
    public struct Configuration: Sendable {
        public var requestsEndpoint: String
        public var eventsEndpoint: String
        /// Each endpoint's bounds on its connections.
        public var limits: ConnectionRules.Limits
        /// Bytes of one message (all its frames): past them the connection is closed (1009).
        public var maxMessageBytes: Int
        /// Bytes of one WebSocket frame, and of a whole message before the connection has
        /// authenticated: what a peer that has shown nothing may make canvasd hold (larger
        /// messages from one that has come in fragments, as browsers send them).
        public var maxFrameBytes: Int
        /// Frames of one message kept; the rest are counted only (the request is refused as too
        /// large by the dispatcher).
        public var maxFrames: Int
        /// A peer's unread outbound bytes: a message that would take them past this closes the
        /// connection (1008), unless nothing was queued.
        public var maxQueuedBytes: Int
        /// Messages of one connection the loop has not answered yet: past them the connection is
        /// not read until it answers some.
        public var maxInFlight: Int
        /// Addresses of proxies whose connections start with a PROXY v2 header naming the client.
        public var proxies: Set<String>
        /// wss:// instead of ws://, with these.
        public var tls: WebTLS?

        public init(requestsEndpoint: String, eventsEndpoint: String, limits: ConnectionRules.Limits, maxMessageBytes: Int,
                    maxFrameBytes: Int? = nil, maxFrames: Int, maxQueuedBytes: Int = WebTransport.defaultQueuedBytes, maxInFlight: Int = 64, proxies: Set<String> = [],
                    tls: WebTLS? = nil) {
            self.requestsEndpoint = requestsEndpoint
            self.eventsEndpoint = eventsEndpoint
            self.limits = limits
            self.maxMessageBytes = maxMessageBytes
            self.maxFrameBytes = min(maxFrameBytes ?? maxMessageBytes, maxMessageBytes)
            self.maxFrames = maxFrames
            self.maxQueuedBytes = maxQueuedBytes
            self.maxInFlight = maxInFlight
            self.proxies = proxies
            self.tls = tls
        }
    }

    public static let defaultQueuedBytes = 1 << 20

    /// Why the endpoints could not be served: which one, and the native cause.
    public struct StartError: Error, CustomStringConvertible {
        public let description: String
    }

    /// The endpoints as bound (a port 0 resolved).
    public let requestsAddress: String
    public let eventsAddress: String
    private let group: MultiThreadedEventLoopGroup
    private let requests: WebEndpoint
    private let events: WebEndpoint
    private let inbox: WebInbox
    private let tallies = Tallies()
    private let logger: Logger

    /// Binds both endpoints (nothing is accepted before `start`). `credential`: what a token
    /// stands for, nil when the server takes no tokens. `health`: the answer to a plain HTTP
    /// GET of a path on a web port, nil for none.
    public init(configuration: Configuration, credential: (@Sendable (String) -> WebCredential?)?,
                health: @escaping @Sendable (String) -> (status: Int, body: String)?, logger: Logger,
                wake: @escaping @Sendable () -> Void) throws(StartError) {
        // One event loop for every web connection: the endpoints' state lives on it unshared.
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let loop = group.next()
        let inbox = WebInbox(wake: wake)
        requests = WebEndpoint(kind: .requests, loop: loop, settings: configuration, inbox: inbox, credential: credential, health: health, logger: logger)
        events = WebEndpoint(kind: .events, loop: loop, settings: configuration, inbox: inbox, credential: credential, health: health, logger: logger)
        var bound: [String] = []
        for (endpoint, address) in [(requests, configuration.requestsEndpoint), (events, configuration.eventsEndpoint)] {
            guard let (host, port) = Self.hostAndPort(address) else {
                try? group.syncShutdownGracefully()
                throw StartError(description: "\(address): expected \(configuration.tls == nil ? "ws" : "wss")://HOST:PORT")
            }
            do {
                bound.append(try endpoint.bind(host: host, port: port))
            } catch {
                requests.stop()
                try? group.syncShutdownGracefully()
                let code = (error as? IOError)?.errnoCode
                let reason = code.map { "\(String(cString: strerror($0))) (errno \($0))" } ?? "\(error)"
                throw StartError(description: "web endpoint \(address): binding: \(reason)")
            }
        }
        requestsAddress = bound[0]
        eventsAddress = bound[1]
        self.group = group
        self.inbox = inbox
        self.logger = logger
    }

    /// Starts accepting, and the sweep that closes what has run out of time.
    public func start() {
        // SCHED_BATCH (3, which Glibc's sched.h declares only for _GNU_SOURCE), as libzmq's I/O
        // thread runs: a fair share like any thread, but waking it to write a reply does not
        // take the request loop's core in the middle of its turn.
        requests.loop.execute {
            var parameters = sched_param(sched_priority: 0)
            _ = sched_setscheduler(0, 3, &parameters)
        }
        requests.start()
        events.start()
        let requests = requests, events = events, tallies = tallies
        requests.loop.scheduleRepeatedTask(initialDelay: .milliseconds(100), delay: .milliseconds(100)) { _ in
            requests.sweep()
            events.sweep()
            tallies.value.withLock { $0 = (requests.tally, events.tally) }
        }
    }

    /// Closes both endpoints and every connection, and ends the event loop.
    public func stop() {
        requests.stop()
        events.stop()
        try? group.syncShutdownGracefully()
    }

    /// Every message waiting, oldest first.
    public func take() -> [WebInbound] { inbox.take() }

    /// Both endpoints' connections as of the last sweep (at most 100 ms old).
    public var tally: (requests: ConnectionRules.Tally, events: ConnectionRules.Tally) { tallies.value.withLock { $0 } }

    // MARK: The loop's answers, each a task on the event loop in the order given

    /// The request from `connection` showed `credential` (nil: without tokens, or a request that
    /// proved nothing): the connection has authenticated.
    public func authenticated(_ connection: UInt64, as credential: WebCredential?) {
        let requests = requests
        requests.loop.execute { requests.authenticated(connection, as: credential) }
    }

    /// The reply to a request from `connection`.
    public func reply(to connection: UInt64, _ bytes: [UInt8]) {
        let requests = requests
        requests.loop.execute { requests.reply(connection, bytes) }
    }

    /// The loop's answer to a subscription (`WebInbound.subscription`).
    public func settle(_ connection: UInt64, topic: [UInt8], serial: UInt64, allowed: Bool) {
        let events = events
        events.loop.execute { events.settle(connection, topic: topic, serial: serial, allowed: allowed) }
    }

    /// An event, to every web subscriber of a prefix of its topic.
    public func publish(_ event: [[UInt8]]) {
        let events = events
        events.loop.execute { events.publish(event) }
    }

    /// Closes the connections, on both endpoints, that showed any of these tokens (by digest).
    public func revoke(_ digests: Set<[UInt8]>) {
        let requests = requests, events = events, logger = logger
        requests.loop.execute {
            let closed = (requests.revoke(digests), events.revoke(digests))
            logger.notice("web connections of revoked tokens closed", metadata: [
                "requests": "\(closed.0)", "events": "\(closed.1)", "tokens": "\(digests.count)"])
        }
    }

    /// `ws://HOST:PORT[/path]`, `ws://[v6]:PORT`, the same with `wss://`; `*` or no port is 0 (any).
    static func hostAndPort(_ endpoint: String) -> (String, Int)? {
        let lowered = endpoint.lowercased()
        guard lowered.hasPrefix("ws://") || lowered.hasPrefix("wss://") else { return nil }
        var rest = endpoint.drop { $0 != "/" }.dropFirst(2)
        if let slash = rest.firstIndex(of: "/") { rest = rest[..<slash] }
        let host: Substring, port: Substring
        if rest.hasPrefix("["), let close = rest.firstIndex(of: "]") {
            host = rest[rest.index(after: rest.startIndex)..<close]
            port = rest[close...].dropFirst().drop { $0 == ":" }
        } else if let colon = rest.lastIndex(of: ":") {
            host = rest[..<colon]
            port = rest[rest.index(after: colon)...]
        } else {
            (host, port) = (rest, "")
        }
        guard !host.isEmpty else { return nil }
        if port.isEmpty || port == "*" { return (String(host), 0) }
        guard let number = Int(port), (0...65535).contains(number) else { return nil }
        return (String(host), number)
    }
}
