import CanvasOperations
import CanvasService
import CanvasProtocol
import Logging
import ZeroMQ

/// Where web pages reach canvasd: libzmq's ws:// transport (ZWS 2.0), a ROUTER for requests
/// and an XPUB for events, beside the tcp:// ones.
/// The web sockets and what is particular to web peers: their token, and their subscriptions.
///
/// Never set `ZMQ_HEARTBEAT_*` on these sockets: libzmq 4.3.4 aborts the whole process
/// (`_mechanism != NULL`) when a ZWS2.0 peer reaches a socket with heartbeats on.
final class WebEndpoints {
    let requests: ZMQSocket
    let events: ZMQSocket
    /// The events socket's subscriptions being vetted.
    private(set) var vetting = SubscriptionVetting()
    /// Each endpoint's connection bounds, read from the socket's monitor.
    let requestGuard: ConnectionGuard
    let eventGuard: ConnectionGuard
    let tokens: WebTokens?
    /// Decides each request's owner from its token, when the server wants tokens.
    let authenticator: Dispatcher.Authenticator?
    /// Appended to the routing envelope of a web request, so that its reply, which may come
    /// later (after a save), goes out on the web socket. Random, so no peer can forge it.
    let marker: [UInt8] = (0..<16).map { _ in UInt8.random(in: 0...255) }
    let endpoint: String
    let eventsEndpoint: String
    private let logger: Logger

    init(context: ZMQContext, configuration: WebConfiguration, maxMessageBytes: Int, logger: Logger) throws(ServerStartError) {
        if configuration.tokens == nil {
            for endpoint in [configuration.endpoint, configuration.eventsEndpoint] where !ServiceSecurity.isLocal(endpoint) {
                throw ServerStartError.unauthenticatedWeb(endpoint: endpoint)
            }
        }
        for endpoint in [configuration.endpoint, configuration.eventsEndpoint] where !endpoint.lowercased().hasPrefix("ws://") {
            throw ServerStartError.notWebSocket(endpoint: endpoint)
        }
        tokens = configuration.tokens
        authenticator = configuration.tokens.map { tokens in { [logger] request in Self.owner(of: request, tokens: tokens, logger: logger) } }
        self.logger = logger
        do {
            (requests, requestGuard) = try Self.requestSocket(context, at: configuration.endpoint, configuration, maxMessageBytes: maxMessageBytes)
            endpoint = requests.lastEndpoint
            (events, eventGuard) = try Self.eventSocket(context, at: configuration.eventsEndpoint, configuration)
            eventsEndpoint = events.lastEndpoint
        } catch {
            throw .transport(error)
        }
    }

    private static func requestSocket(_ context: ZMQContext, at endpoint: String, _ configuration: WebConfiguration,
                                      maxMessageBytes: Int) throws(ZMQError) -> (ZMQSocket, ConnectionGuard) {
        let socket = try context.socket(.router)
        try socket.setMaximumMessageSize(Int64(max(maxMessageBytes * 4, 16 << 20)))
        // No ROUTER_HANDOVER here: a web peer chooses its own routing id, and must not be
        // able to take over another peer's connection (and its replies) by naming it.
        try socket.bind(endpoint)
        return (socket, try ConnectionGuard(watching: socket, context: context, limits: configuration.connections))
    }

    private static func eventSocket(_ context: ZMQContext, at endpoint: String,
                                    _ configuration: WebConfiguration) throws(ZMQError) -> (ZMQSocket, ConnectionGuard) {
        // XPUB with manual subscriptions: each one is vetted before it is applied, so a
        // page receives only its own sessions' events.
        let socket = try context.socket(.xpub)
        try socket.setManualSubscriptions(true)
        try socket.setSendHighWaterMark(Limits.eventQueueMessages)
        try socket.bind(endpoint)
        return (socket, try ConnectionGuard(watching: socket, context: context, limits: configuration.connections))
    }

    /// Cuts off every web peer at the TCP level: after a token is revoked its connections (and
    /// the subscriptions they hold, which libzmq applies per connection and cannot be taken back
    /// from outside) must end. Pages with a valid token reconnect and subscribe again, as after
    /// a restart. The sockets stay bound: closing and binding a ws:// endpoint again while peers
    /// connect takes libzmq 4.3.4 down with the process. A connection accepted after the
    /// monitor's last event has sent nothing the loop has read, so whatever it sends is judged
    /// by the tokens as they are now.
    func disconnectAll(now: ContinuousClock.Instant) throws(ZMQError) {
        let requestPeers = try requestGuard.cutOffAll(now: now)
        let eventPeers = try eventGuard.cutOffAll(now: now)
        logger.notice("every web peer disconnected: a token was revoked", metadata: [
            "requests": "\(endpoint)", "requestPeers": "\(requestPeers)", "events": "\(eventsEndpoint)", "eventPeers": "\(eventPeers)",
        ])
    }

    /// Reads both endpoints' connection events, cutting off what is past the bounds.
    func guardConnections(now: ContinuousClock.Instant) {
        for (name, watch) in [("requests", requestGuard), ("events", eventGuard)] {
            let before = watch.tally
            do {
                try watch.service(now: now)
            } catch {
                logger.error("web connections not watched", metadata: ["endpoint": "\(name)", "error": "\(error)"])
            }
            let after = watch.tally
            if after.cutOff > before.cutOff {
                logger.warning("web connections cut off", metadata: [
                    "endpoint": "\(name)", "pastCap": "\(after.refused - before.refused)",
                    "madeRoom": "\(after.evicted - before.evicted)",
                    "upgradeTimedOut": "\(after.timedOut - before.timedOut)",
                    "notAuthenticated": "\(after.unauthenticated - before.unauthenticated)",
                    "open": "\(after.open)", "authenticated": "\(after.authenticated)",
                    "maxConnections": "\(watch.limits.maxConnections)",
                ])
            }
        }
    }

    /// Decides a request's owner as `authenticator` does, and tells the request endpoint's
    /// guard whether the message (`frames`, their sizes) proved who sent it: a valid token, `hello`'s
    /// included (which is answered without one); a message the dispatcher cannot read as a
    /// request proves nothing. Without tokens every message proves as much as any can.
    func authenticating(frames: [Int], now: ContinuousClock.Instant, _ handle: (Dispatcher.Authenticator?) -> Dispatcher.Output) -> Dispatcher.Output {
        guard let tokens, let authenticator else {
            requestGuard.heard(frames: frames, proof: true)
            requestGuard.settle(now: now)
            return handle(nil)
        }
        var proved = false
        let output = withoutActuallyEscaping({ (request: Request) -> Result<String?, ProtocolError> in
            let owner = authenticator(request)
            if case .success(.some) = owner {
                proved = true
            } else if request.method == "hello", let token = request.token, tokens.owner(of: token) != nil {
                proved = true
            }
            return owner
        }, do: { handle($0) })
        requestGuard.heard(frames: frames, proof: proved)
        requestGuard.settle(now: now)
        return output
    }

    /// Who sent a web request: the owner its `token` stands for. `hello` needs no token;
    /// anything else without a valid one is refused with UNAUTHORIZED.
    private static func owner(of request: Request, tokens: WebTokens, logger: Logger) -> Result<String?, ProtocolError> {
        if request.method == "hello" { return .success(nil) }
        guard let token = request.token else {
            return .failure(ProtocolError(.unauthorized, "this server wants an access token in every web request (\"token\")",
                                          data: ["reason": "missingToken"]))
        }
        guard let owner = tokens.owner(of: token) else {
            logger.warning("web request with an unknown token refused")
            return .failure(ProtocolError(.unauthorized, "the access token is not known to this server", data: ["reason": "unknownToken"]))
        }
        return .success(owner)
    }

    /// Publishes an event to web peers (held while a subscription's answer is awaited).
    func publish(_ event: [[UInt8]]) throws(ZMQError) {
        try vetting.publish(event, on: events)
    }

    /// Applies the subscriptions that web peers sent and may have. With tokens a subscription
    /// is `TOKEN` `\n` `TOPIC`; without, just the topic. Only topics of the peer's own
    /// sessions (and `documents.`) are applied; a refused one is simply not applied.
    func vetSubscriptions(check: (String?, [UInt8]) -> SubscriptionCheck,
                          ask: (_ session: String, _ owner: String?, _ answer: @escaping @Sendable (Bool) -> Void) -> Void) throws(ZMQError) {
        let events = events, tokens = tokens, logger = logger, eventGuard = eventGuard
        try vetting.vet(socket: events, next: { () throws(ZMQError) in
            while let frames = try events.receive(wait: false) {
                guard let frame = frames.first, let kind = frame.first, kind <= 1 else { continue }
                var topic = Array(frame.dropFirst())
                var owner: String?
                if let tokens {
                    guard let newline = topic.firstIndex(of: UInt8(ascii: "\n")),
                          let who = tokens.owner(of: String(decoding: topic[..<newline], as: UTF8.self)) else {
                        eventGuard.heard(frames: [frame.count], proof: false)
                        logger.info("web subscription without a known token refused")
                        continue
                    }
                    owner = who
                    topic = Array(topic[(newline + 1)...])
                }
                // A subscription with a valid token (any, without tokens) is this endpoint's
                // proof of who the peer is, whether or not its topic is then allowed.
                eventGuard.heard(frames: [frame.count], proof: true)
                return (kind, topic, owner)
            }
            return nil
        }, check: check, ask: ask, applied: { topic, owner, allowed in
            if allowed {
                logger.debug("web subscription applied", metadata: ["topic": "\(String(decoding: topic, as: UTF8.self))"])
            } else {
                logger.info("web subscription refused", metadata: ["topic": "\(String(decoding: topic, as: UTF8.self))", "client": "\(owner ?? "-")"])
            }
        })
        eventGuard.settle(now: .now)
    }
}
