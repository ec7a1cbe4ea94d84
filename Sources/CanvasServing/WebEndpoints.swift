import CanvasOperations
import CanvasService
import CanvasProtocol
import Logging
import WebTransport

/// Where web pages reach canvasd (spec §1.2): the ws:// endpoints (`WebTransport`, on SwiftNIO)
/// and what is particular to web peers here: their tokens, and the hand-off of their messages
/// to the dispatcher and of its answers back.
final class WebEndpoints {
    let transport: WebTransport
    let tokens: WebTokens?
    let tls: WebTLS?
    /// Appended to the routing envelope of a web request, so that its reply, which may come
    /// later (after a save), goes back to the web connection it came on. Random, so no tcp://
    /// client can forge it.
    let marker: [UInt8] = (0..<16).map { _ in UInt8.random(in: 0...255) }
    var endpoint: String { transport.requestsAddress }
    var eventsEndpoint: String { transport.eventsAddress }
    private let logger: Logger

    init(configuration: WebConfiguration, maxMessageBytes: Int, maxFrames: Int, pulse: ServerPulse, logger: Logger,
         wake: @escaping @Sendable () -> Void) throws(ServerStartError) {
        let scheme = configuration.tls == nil ? "ws://" : "wss://"
        for endpoint in [configuration.endpoint, configuration.eventsEndpoint] {
            guard endpoint.lowercased().hasPrefix(scheme) else {
                throw ServerStartError.notWebSocket(endpoint: endpoint, expected: String(scheme.dropLast(3)))
            }
            if configuration.tokens == nil, !ServiceSecurity.isLocal(endpoint) { throw ServerStartError.unauthenticatedWeb(endpoint: endpoint) }
        }
        tokens = configuration.tokens
        tls = configuration.tls
        self.logger = logger
        let settings = WebTransport.Configuration(
            requestsEndpoint: configuration.endpoint, eventsEndpoint: configuration.eventsEndpoint,
            limits: configuration.connections,
            // As libzmq's bound on these sockets was: a request over `maxMessageBytes` but under
            // this is read, and refused as too large with its id.
            maxMessageBytes: max(maxMessageBytes * 4, 16 << 20),
            // A request within the limit always fits, with room for the flags and its frames.
            maxFrameBytes: maxMessageBytes + 64 * 1024,
            maxFrames: maxFrames,
            maxQueuedBytes: configuration.maxQueuedBytes, proxies: configuration.proxies, tls: configuration.tls)
        var credential: (@Sendable (String) -> WebCredential?)?
        if let tokens = configuration.tokens { credential = { token in tokens.credential(of: token) } }
        do {
            transport = try WebTransport(configuration: settings, credential: credential, health: Self.health(pulse), logger: logger, wake: wake)
        } catch {
            throw .web(error.description)
        }
    }

    /// What a web port answers a balancer's plain GET: the loop's liveness, and readiness short
    /// of the session store (the health endpoint's `/readyz` asks the store too).
    private static func health(_ pulse: ServerPulse) -> @Sendable (String) -> (status: Int, body: String)? {
        { path in
            let stuck = pulse.sinceTurn > 2
            switch path {
            case "/livez", "/healthz": return stuck ? (503, "request loop stuck\n") : (200, "ok\n")
            case "/readyz": return stuck ? (503, "not ready: request loop stuck\n") : pulse.draining ? (503, "not ready: draining\n") : (200, "ready\n")
            default: return nil
            }
        }
    }

    /// Hands every message waiting to the dispatcher (requests) or decides it (subscriptions),
    /// and returns what the requests produced, in order.
    /// `sendingAtOnce`: where a reply ready before the dispatcher's turn ends may go (as for a
    /// tcp request waited for), used when one message alone was waiting: with more, a later
    /// one's reply would pass the events of one before it.
    func serve(_ dispatcher: Dispatcher, at now: ContinuousClock.Instant,
               sendingAtOnce: ((Dispatcher.Output.Reply) -> Void)? = nil) -> Dispatcher.Output {
        var output = Dispatcher.Output()
        let messages = transport.take()
        let sendNow = messages.count == 1 ? sendingAtOnce : nil
        for message in messages {
            switch message {
            case .request(let connection, let frames, let dropped):
                let answered = request(connection, frames, dropped: dropped, dispatcher, at: now, sendingAtOnce: sendNow)
                output.events += answered.events
                output.replies += answered.replies
            case .subscription(let connection, let topic, let owner, let serial):
                subscription(connection, topic, owner: owner, serial: serial, dispatcher)
            }
        }
        return output
    }

    /// A request: its token decides its owner, and shows the connection's credential.
    ///
    /// A web peer's message is the request itself: no delimiter frame is taken off (no browser
    /// sends one), so an empty frame first is the request, and is refused as unreadable. The
    /// token is read from the request the dispatcher decodes, in the same parse.
    private func request(_ connection: UInt64, _ frames: [[UInt8]], dropped: Int, _ dispatcher: Dispatcher,
                         at now: ContinuousClock.Instant, sendingAtOnce: ((Dispatcher.Output.Reply) -> Void)?) -> Dispatcher.Output {
        let envelope = [Self.bytes(connection), marker]
        guard let tokens else {
            return dispatcher.handle(frames, envelope: envelope, droppedFrames: dropped, at: now, sendingAtOnce: sendingAtOnce,
                                     authenticate: nil)
        }
        let logger = logger
        return dispatcher.handle(frames, envelope: envelope, droppedFrames: dropped, at: now, sendingAtOnce: sendingAtOnce,
                                 authenticate: { request in
            // A valid token proves who the peer is, `hello`'s included (answered without one).
            let credential = request.token.flatMap { self.credential(of: $0, on: connection, tokens) }
            if request.method == "hello" { return .success(nil) }
            guard request.token != nil else {
                return .failure(ProtocolError(.unauthorized, "this server wants an access token in every web request (\"token\")",
                                              data: ["reason": "missingToken"]))
            }
            guard let credential else {
                logger.warning("web request with an unknown token refused")
                return .failure(ProtocolError(.unauthorized, "the access token is not known to this server", data: ["reason": "unknownToken"]))
            }
            return .success(credential.owner)
        })
    }

    /// What `token` stands for, shown on `connection`. The token a connection showed last is
    /// remembered with what it stood for, so that a page sending the same token in every
    /// request costs one hash and one telling of the event loop, not one per request (telling it
    /// woke it before each reply: a tenth of the web round trip). Comparing with the remembered
    /// token tells a peer nothing it did not send itself. Forgotten when the tokens are read
    /// again, and wholesale past a bound, since closed connections are not reported here.
    private func credential(of token: String, on connection: UInt64, _ tokens: WebTokens) -> WebCredential? {
        if let known = verified[connection], known.token == token { return known.credential }
        guard let credential = tokens.credential(of: token) else { return nil }
        if verified.count >= Self.maxVerified { verified.removeAll(keepingCapacity: true) }
        verified[connection] = (token, credential)
        transport.authenticated(connection, as: credential)
        return credential
    }

    private var verified: [UInt64: (token: String, credential: WebCredential)] = [:]
    private static let maxVerified = 65_536

    /// A subscription with a valid token (any, without tokens): applied only for topics the
    /// owner may have; one that needs the session store's word waits for it off the loop.
    private func subscription(_ connection: UInt64, _ topic: [UInt8], owner: String?, serial: UInt64, _ dispatcher: Dispatcher) {
        let transport = transport, logger = logger
        let settle: @Sendable (Bool) -> Void = { allowed in
            transport.settle(connection, topic: topic, serial: serial, allowed: allowed)
            if allowed {
                logger.debug("web subscription applied", metadata: ["topic": "\(String(decoding: topic, as: UTF8.self))"])
            } else {
                logger.info("web subscription refused", metadata: ["topic": "\(String(decoding: topic, as: UTF8.self))", "client": "\(owner ?? "-")"])
            }
        }
        switch dispatcher.subscription(owner, to: topic, always: true) {
        case .allowed: settle(true)
        case .refused: settle(false)
        case .askStore(let session): dispatcher.askOwner(of: session, for: owner, settle)
        }
    }

    /// Sends a reply whose envelope is a web request's; false for any other reply.
    func send(_ reply: Dispatcher.Output.Reply) -> Bool {
        guard reply.envelope.count == 2, reply.envelope[1] == marker, let connection = Self.connection(reply.envelope[0]) else { return false }
        transport.reply(to: connection, reply.bytes)
        return true
    }

    func publish(_ event: [[UInt8]]) { transport.publish(event) }

    /// Reads the tokens again; the connections that showed a token now gone are closed, and
    /// no other.
    func reloadTokens() {
        guard let tokens else { return }
        do {
            let reloaded = try tokens.reload()
            verified.removeAll()
            logger.info("web tokens reloaded", metadata: ["tokens": "\(reloaded.count)", "revoked": "\(reloaded.revoked.count)"])
            if !reloaded.revoked.isEmpty { transport.revoke(reloaded.revoked) }
        } catch {
            logger.error("web tokens not reloaded; the previous ones stay", metadata: ["error": "\(error)"])
        }
    }

    /// Reads wss://'s certificate and key again; on failure the ones in use stay.
    func reloadTLS() {
        guard let tls else { return }
        do {
            try tls.reload()
            logger.info("web TLS certificate reloaded", metadata: ["certificate": "\(tls.certificatePath)"])
        } catch {
            logger.error("web TLS certificate not reloaded; the previous one stays", metadata: ["error": "\(error)"])
        }
    }

    private static func bytes(_ connection: UInt64) -> [UInt8] { withUnsafeBytes(of: connection.bigEndian, Array.init) }

    private static func connection(_ bytes: [UInt8]) -> UInt64? {
        guard bytes.count == 8 else { return nil }
        return bytes.reduce(0) { $0 << 8 | UInt64($1) }
    }
}
