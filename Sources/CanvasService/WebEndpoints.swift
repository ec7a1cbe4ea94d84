import CanvasProtocol
import Logging
import ZeroMQ

/// Where web pages reach canvasd: libzmq's ws:// transport (ZWS 2.0), a ROUTER for requests
/// and an XPUB for events, beside the tcp:// ones.
public struct WebConfiguration: Sendable {
    public var endpoint: String
    public var eventsEndpoint: String
    /// Without tokens both endpoints must be loopback (a proxy in front serves the world).
    public var tokens: WebTokens?

    public init(endpoint: String, eventsEndpoint: String, tokens: WebTokens? = nil) {
        self.endpoint = endpoint
        self.eventsEndpoint = eventsEndpoint
        self.tokens = tokens
    }
}

/// A web request refused before it reaches the dispatcher, with the id to answer it by.
struct WebRefusal: Error {
    let id: RequestID?
    let error: ProtocolError
}

/// The web sockets and what is particular to web peers: their token, and their subscriptions.
///
/// Never set `ZMQ_HEARTBEAT_*` on these sockets: libzmq 4.3.4 aborts the whole process
/// (`_mechanism != NULL`) when a ZWS2.0 peer reaches a socket with heartbeats on.
final class WebEndpoints {
    let requests: ZMQSocket
    let events: ZMQSocket
    let tokens: WebTokens?
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
        self.logger = logger
        do {
            requests = try context.socket(.router)
            try requests.setMaximumMessageSize(Int64(max(maxMessageBytes * 4, 16 << 20)))
            // No ROUTER_HANDOVER here: a web peer chooses its own routing id, and must not be
            // able to take over another peer's connection (and its replies) by naming it.
            try requests.bind(configuration.endpoint)
            endpoint = requests.lastEndpoint
            // XPUB with manual subscriptions: each one is vetted before it is applied, so a
            // page receives only its own sessions' events.
            events = try context.socket(.xpub)
            try events.setManualSubscriptions(true)
            try events.setSendHighWaterMark(10_000)
            try events.bind(configuration.eventsEndpoint)
            eventsEndpoint = events.lastEndpoint
        } catch {
            throw .transport(error)
        }
    }

    /// Who sent a web request: the owner its `token` stands for (nil without tokens). `hello`
    /// needs no token; anything else without a valid one is refused with UNAUTHORIZED.
    func owner(of body: [[UInt8]]) -> Result<String?, WebRefusal> {
        guard let tokens else { return .success(nil) }
        guard let first = body.first, let request = try? JSONCodec.parseRequest(first), request.objectValue != nil else {
            return .success(nil)   // unreadable: the dispatcher answers it, touching nothing
        }
        var id: RequestID?
        switch request["id"] {
        case .string(let s)?: id = .string(s)
        case .integer(let i)?: id = .integer(i)
        default: id = nil
        }
        if request["method"]?.stringValue == "hello" { return .success(nil) }
        guard let token = request["token"]?.stringValue else {
            return .failure(WebRefusal(id: id, error: ProtocolError(
                .unauthorized, "this server wants an access token in every web request (\"token\")", data: ["reason": "missingToken"])))
        }
        guard let owner = tokens.owner(of: token) else {
            logger.warning("web request with an unknown token refused")
            return .failure(WebRefusal(id: id, error: ProtocolError(
                .unauthorized, "the access token is not known to this server", data: ["reason": "unknownToken"])))
        }
        return .success(owner)
    }

    /// Applies the subscriptions that web peers sent and may have. With tokens a subscription
    /// is `TOKEN` `\n` `TOPIC`; without, just the topic. Only topics of the peer's own
    /// sessions (and `documents.`) are applied; a refused one is simply not applied.
    func vetSubscriptions(_ maySubscribe: (String?, [UInt8]) -> Bool) throws(ZMQError) {
        while let frames = try events.receive(wait: false) {
            guard let frame = frames.first, let kind = frame.first, kind <= 1 else { continue }
            var topic = Array(frame.dropFirst())
            var owner: String?
            if let tokens {
                guard let newline = topic.firstIndex(of: UInt8(ascii: "\n")),
                      let who = tokens.owner(of: String(decoding: topic[..<newline], as: UTF8.self)) else {
                    logger.info("web subscription without a known token refused")
                    continue
                }
                owner = who
                topic = Array(topic[(newline + 1)...])
            }
            if kind == 0 {
                try? events.unsubscribe(bytes: topic)
            } else if maySubscribe(owner, topic) {
                try events.subscribe(bytes: topic)
                logger.debug("web subscription applied", metadata: ["topic": "\(String(decoding: topic, as: UTF8.self))"])
            } else {
                logger.info("web subscription refused", metadata: [
                    "topic": "\(String(decoding: topic, as: UTF8.self))", "client": "\(owner ?? "-")",
                ])
            }
        }
    }
}
