import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import NIOWebSocket

/// One ws:// endpoint (the request one or the events one): its listener, its connections, the
/// rules they are held to, and the topics its connections subscribed to.
///
/// Everything here runs on `loop`, the transport's one event loop: the listener's children are
/// made on it, and the request loop reaches it only through `loop.execute`. That is the only
/// reason it is `@unchecked Sendable`.
final class WebEndpoint: @unchecked Sendable {
    enum Kind: String, Sendable { case requests, events }

    let kind: Kind
    let loop: any EventLoop
    private let settings: WebTransport.Configuration
    private let inbox: WebInbox
    private let credential: (@Sendable (String) -> WebCredential?)?
    private let health: @Sendable (String) -> (status: Int, body: String)?
    private let logger: Logger
    private var rules: ConnectionRules
    private var connections: [UInt64: WebConnection] = [:]
    private var nextID: UInt64 = 1
    private var nextSerial: UInt64 = 1
    /// Which connections hold each topic, and how many topics there are of each length: an
    /// event's subscribers are found by looking up its topic's prefixes of those lengths only.
    private var topics: [[UInt8]: Set<UInt64>] = [:]
    private var topicLengths: [Int: Int] = [:]
    private var listener: (any Channel)?
    var tally: ConnectionRules.Tally { rules.tally }
    static let sendBuffer: SocketOptionValue = 128 * 1024

    init(kind: Kind, loop: any EventLoop, settings: WebTransport.Configuration, inbox: WebInbox,
         credential: (@Sendable (String) -> WebCredential?)?, health: @escaping @Sendable (String) -> (status: Int, body: String)?,
         logger: Logger) {
        self.kind = kind
        self.loop = loop
        self.settings = settings
        self.inbox = inbox
        self.credential = credential
        self.health = health
        self.logger = logger
        rules = ConnectionRules(limits: settings.limits)
    }

    // MARK: The listener

    /// Binds `host:port`; nothing is accepted before `start`.
    func bind(host: String, port: Int) throws -> String {
        let bootstrap = ServerBootstrap(group: loop)
            .serverChannelOption(.backlog, value: 1024)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .serverChannelOption(.autoRead, value: false)
            .childChannelInitializer { [self] channel in
                channel.eventLoop.makeCompletedFuture(withResultOf: { try self.accepted(channel) })
            }
            .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
            .childChannelOption(.allowRemoteHalfClosure, value: true)
            // One read per readiness: a request comes in one read, and a second would only
            // find the socket empty (the poll is level-triggered, so more data brings it back).
            .childChannelOption(.maxMessagesPerRead, value: 1)
            // A fixed kernel send buffer (the kernel doubles it) instead of one grown to 4 MiB:
            // a page that stops reading then fills it within a few hundred events, after which
            // what is sent to it waits in canvasd's own queue (bounded, `maxQueuedBytes`) at no
            // system call each, instead of megabytes per page written into the kernel one call
            // per event, which slowed every other page's events (canvasbench web: 200 stuck
            // subscribers took a reading one's event from 0.2 to 2.9 ms).
            .childChannelOption(.socketOption(.so_sndbuf), value: WebEndpoint.sendBuffer)
        let channel = try bootstrap.bind(host: host, port: port).wait()
        listener = channel
        return "\(settings.tls == nil ? "ws" : "wss")://\(host.contains(":") ? "[\(host)]" : host):\(channel.localAddress?.port ?? port)"
    }

    func start() {
        _ = listener?.setOption(.autoRead, value: true)
    }

    /// Closes the listener and every connection (`1001`, going away).
    func stop() {
        try? listener?.close().wait()
        try? loop.submit { [self] in
            for connection in connections.values { close(connection, code: ZWSReader.CloseCode.goingAway, reason: "server stopping", cut: nil) }
        }.wait()
    }

    // MARK: Connections

    /// A connection accepted: through a trusted proxy its source is known once the PROXY header
    /// has come; otherwise it is admitted now.
    private func accepted(_ channel: any Channel) throws {
        let peer = channel.remoteAddress?.ipAddress ?? "?"
        if settings.proxies.contains(peer) {
            try channel.pipeline.syncOperations.addHandler(ProxyHeaderHandler(endpoint: self, proxy: peer,
                                                                              timeout: settings.limits.upgradeTimeout))
        } else {
            try admit(channel, source: peer)
        }
    }

    /// Counts the connection under the rules and sets up its HTTP upgrade; closes it (or others
    /// to make room for it) as they say.
    func admit(_ channel: any Channel, source: String) throws {
        let id = nextID
        nextID += 1
        let now = ContinuousClock.now
        let action = rules.accepted(id, from: source, at: now)
        perform(action)
        if action.close.contains(where: { $0.id == id }) {
            channel.close(promise: nil)
            return
        }
        let connection = WebConnection(id: id, channel: channel, source: source, accepted: now)
        connections[id] = connection
        channel.closeFuture.whenComplete { [self] _ in
            loop.assertInEventLoop()
            rules.closed(id)
            forget(id)
        }
        let upgrader = NIOWebSocketServerUpgrader(
            maxFrameSize: settings.maxFrameBytes, automaticErrorHandling: true,
            shouldUpgrade: { channel, head in
                let offered = head.headers[canonicalForm: "Sec-WebSocket-Protocol"].map(String.init)
                guard offered.contains(ZWS.subprotocol) else { return channel.eventLoop.makeSucceededFuture(nil) }
                return channel.eventLoop.makeSucceededFuture(HTTPHeaders([("Sec-WebSocket-Protocol", ZWS.subprotocol)]))
            },
            upgradePipelineHandler: { [self] channel, _ in
                channel.eventLoop.makeCompletedFuture(withResultOf: { try self.upgraded(id, channel) })
            })
        if let tls = settings.tls {
            // After the PROXY header, if any: a proxy passing TLS through sends it in the clear.
            try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: tls.context))
        }
        var limits = NIOHTTPDecoderLimitConfiguration()
        limits.maxHeaderListSize = 16 * 1024
        limits.maxHeaderFieldSize = 8 * 1024
        // The upgrade handler forwards any request it does not upgrade: `PlainHTTPHandler`
        // answers those (a health check, a refusal that says why).
        try channel.pipeline.syncOperations.configureHTTPServerPipeline(
            withServerUpgrade: (upgraders: [upgrader], completionHandler: { _ in }), withErrorHandling: true,
            withEncoderConfiguration: .init(), withDecoderLimitConfiguration: limits)
        try channel.pipeline.syncOperations.addHandler(PlainHTTPHandler(health: health), name: PlainHTTPHandler.name)
    }

    private func upgraded(_ id: UInt64, _ channel: any Channel) throws {
        guard let connection = connections[id], !connection.closing else {
            channel.close(promise: nil)
            return
        }
        rules.upgraded(id)
        // The WebSocket handlers come after it: plain HTTP is over.
        _ = channel.pipeline.syncOperations.removeHandler(name: PlainHTTPHandler.name)
        // Messages go out framed already (`ZWS.framed`), one write each, below NIO's frame encoder.
        let encoder = try channel.pipeline.syncOperations.handler(type: WebSocketFrameEncoder.self)
        let raw = FramedWrites()
        try channel.pipeline.syncOperations.addHandler(raw, position: .before(encoder))
        // Until it authenticates, a connection's messages are held to one frame's bound.
        let reader = ZWSReader(maxFrames: settings.maxFrames, maxBytes: settings.maxFrameBytes, subscriptions: kind == .events)
        let handler = ZWSHandler(endpoint: self, id: id, reader: reader, framed: try channel.pipeline.syncOperations.context(handler: raw))
        try channel.pipeline.syncOperations.addHandler(handler)
        connection.socket = handler
    }

    private func forget(_ id: UInt64) {
        guard let connection = connections.removeValue(forKey: id) else { return }
        for topic in connection.subscriptions { unindex(topic, id) }
    }

    /// Closes `connection`: a WebSocket one with a close frame that gives `code` and `reason`,
    /// one still in its upgrade at once. `cut`: the rule that closed it, counted.
    func close(_ connection: WebConnection, code: UInt16, reason: String, cut: ConnectionRules.Cut?, abruptly: Bool = false) {
        guard !connection.closing else { return }
        rules.closed(connection.id, cut: cut)
        end(connection, code: code, reason: reason, abruptly: abruptly)
    }

    /// Ends a connection the rules no longer count.
    private func end(_ connection: WebConnection, code: UInt16, reason: String, abruptly: Bool = false) {
        connection.closing = true
        if let socket = connection.socket {
            socket.close(code: code, reason: reason, abruptly: abruptly)
        } else {
            connection.channel.close(promise: nil)
        }
    }

    private func perform(_ action: ConnectionRules.Action) {
        for (id, cut) in action.close {
            guard let connection = connections[id] else { continue }
            let reason: String
            let code: UInt16
            switch cut {
            case .refused, .madeRoom: (code, reason) = (ZWSReader.CloseCode.tryAgainLater, "too many connections")
            case .upgradeTimedOut: (code, reason) = (ZWSReader.CloseCode.policyViolation, "upgrade not finished in time")
            case .notAuthenticated: (code, reason) = (ZWSReader.CloseCode.policyViolation, "no valid token in time")
            case .revoked: (code, reason) = (ZWSReader.CloseCode.policyViolation, "token revoked")
            case .unknownToken: (code, reason) = (ZWSReader.CloseCode.policyViolation, "unknown token")
            case .slowReader: (code, reason) = (ZWSReader.CloseCode.policyViolation, "not reading")
            case .badMessage: (code, reason) = (ZWSReader.CloseCode.protocolError, "not ZWS 2.0")
            }
            // Already taken out of the rules (the action says so): not counted twice.
            end(connection, code: code, reason: reason)
        }
    }

    /// Closes what has run out of time.
    func sweep() {
        perform(rules.sweep(at: .now))
    }

    private func authenticate(_ connection: WebConnection, with credential: WebCredential?) {
        if connection.authenticatedAt == nil {
            connection.authenticatedAt = .now
            connection.socket?.authenticated(maxBytes: settings.maxMessageBytes)
        }
        if let credential { connection.credentials.insert(credential.digest) }
        rules.authenticated(connection.id)
    }

    // MARK: Messages in

    /// A whole ZMTP message from `id`. Past `maxInFlight` unanswered, it waits here: the
    /// connection is no longer read, but what was read already is still being decoded.
    func received(_ id: UInt64, frames: [[UInt8]], dropped: Int) {
        guard let connection = connections[id], !connection.closing else { return }
        guard connection.inFlight < settings.maxInFlight, connection.waiting.isEmpty else {
            connection.waiting.append((frames, dropped))
            return
        }
        forward(connection, frames: frames, dropped: dropped)
    }

    private func forward(_ connection: WebConnection, frames: [[UInt8]], dropped: Int) {
        let id = connection.id
        switch kind {
        case .requests:
            // Without tokens any message counts; with them, the loop says whose token it held.
            if credential == nil { authenticate(connection, with: nil) }
            hold(connection)
            inbox.push(.request(connection: id, frames: frames, dropped: dropped))
        case .events:
            subscription(connection, frames[0])
        }
    }

    /// A subscriber's message: `01` and the topic subscribes, `00` and the topic ends one; with
    /// tokens the topic is preceded by the token and a newline. Anything else is ignored, as an
    /// XPUB does.
    private func subscription(_ connection: WebConnection, _ frame: [UInt8]) {
        guard let kind = frame.first, kind <= 1 else { return }
        var topic = Array(frame.dropFirst())
        var owner: String?
        if let credential {
            guard let newline = topic.firstIndex(of: UInt8(ascii: "\n")),
                  let shown = credential(String(decoding: topic[..<newline], as: UTF8.self)) else {
                // A subscriber has no reply to learn from: its connection ends, saying why. A
                // token revoked while its subscription was on the way ends here too.
                logger.info("web subscription without a known token: closed", metadata: ["source": "\(connection.source)"])
                close(connection, code: ZWSReader.CloseCode.policyViolation, reason: "unknown token", cut: .unknownToken)
                return
            }
            // A valid token proves who the peer is, whether or not the topic is then allowed.
            authenticate(connection, with: shown)
            owner = shown.owner
            topic = Array(topic[(newline + 1)...])
        } else {
            authenticate(connection, with: nil)
        }
        guard kind == 1 else {
            connection.pending[topic] = nil
            if connection.subscriptions.remove(topic) != nil { unindex(topic, connection.id) }
            return
        }
        let serial = nextSerial
        nextSerial += 1
        connection.pending[topic] = serial
        hold(connection)
        inbox.push(.subscription(connection: connection.id, topic: topic, owner: owner, serial: serial))
    }

    /// One more message the loop must answer; past the bound the connection is not read.
    private func hold(_ connection: WebConnection) {
        connection.inFlight += 1
        if connection.inFlight >= settings.maxInFlight { _ = connection.channel.setOption(.autoRead, value: false) }
    }

    private func release(_ connection: WebConnection) {
        let wasFull = connection.inFlight >= settings.maxInFlight
        connection.inFlight = max(0, connection.inFlight - 1)
        while connection.inFlight < settings.maxInFlight, !connection.closing, !connection.waiting.isEmpty {
            let (frames, dropped) = connection.waiting.removeFirst()
            forward(connection, frames: frames, dropped: dropped)
        }
        if wasFull, connection.inFlight < settings.maxInFlight, connection.waiting.isEmpty {
            _ = connection.channel.setOption(.autoRead, value: true)
            connection.channel.read()
        }
    }

    // MARK: The loop's answers

    func authenticated(_ id: UInt64, as credential: WebCredential?) {
        guard let connection = connections[id], !connection.closing else { return }
        authenticate(connection, with: credential)
    }

    func reply(_ id: UInt64, _ bytes: [UInt8]) {
        guard let connection = connections[id] else { return }
        release(connection)
        guard !connection.closing else { return }
        send(connection.channel.allocator.buffer(bytes: ZWS.framed([[0] + bytes])), to: connection)
    }

    func settle(_ id: UInt64, topic: [UInt8], serial: UInt64, allowed: Bool) {
        guard let connection = connections[id] else { return }
        release(connection)
        guard connection.pending[topic] == serial else { return }
        connection.pending[topic] = nil
        guard allowed, !connection.closing, connection.subscriptions.insert(topic).inserted else { return }
        topics[topic, default: []].insert(id)
        topicLengths[topic.count, default: 0] += 1
    }

    private func unindex(_ topic: [UInt8], _ id: UInt64) {
        guard topics[topic]?.remove(id) != nil else { return }
        if topics[topic]?.isEmpty == true { topics[topic] = nil }
        let left = topicLengths[topic.count, default: 1] - 1
        topicLengths[topic.count] = left > 0 ? left : nil
    }

    // MARK: Messages out

    /// Sends an event to every connection subscribed to a prefix of its first frame, each once.
    func publish(_ event: [[UInt8]]) {
        guard let topic = event.first, !topics.isEmpty else { return }
        var subscribers: Set<UInt64> = []
        for length in topicLengths.keys where length <= topic.count {
            if let holders = topics[Array(topic.prefix(length))] { subscribers.formUnion(holders) }
        }
        guard !subscribers.isEmpty else { return }
        // Framed once; each connection's write shares the bytes.
        let bytes = ByteBufferAllocator().buffer(bytes: ZWS.framed(ZWS.payloads(event)))
        for id in subscribers {
            guard let connection = connections[id], !connection.closing else { continue }
            send(bytes, to: connection)
        }
    }

    /// Writes one message's WebSocket frames, unless the peer has left more than
    /// `maxQueuedBytes` unread: then it alone is closed.
    private func send(_ framed: ByteBuffer, to connection: WebConnection) {
        guard let socket = connection.socket else { return }
        let size = framed.readableBytes
        let queued = (try? connection.channel.syncOptions?.getOption(.bufferedWritableBytes)) ?? 0
        // A message to a connection with nothing queued always goes, however large.
        if queued > 0, queued + size > settings.maxQueuedBytes {
            logger.warning("web peer not reading: closed", metadata: [
                "endpoint": "\(kind.rawValue)", "source": "\(connection.source)", "queuedBytes": "\(queued)"])
            close(connection, code: ZWSReader.CloseCode.policyViolation, reason: "not reading", cut: .slowReader, abruptly: true)
            return
        }
        socket.send(framed)
    }

    /// Closes every connection that has shown one of `digests`.
    func revoke(_ digests: Set<[UInt8]>) -> Int {
        let revoked = connections.values.filter { !$0.closing && !$0.credentials.isDisjoint(with: digests) }
        for connection in revoked { close(connection, code: ZWSReader.CloseCode.policyViolation, reason: "token revoked", cut: .revoked) }
        return revoked.count
    }

    /// A control answer (a pong) for `id`, framed, held to the same queue bound as any message.
    func answer(_ id: UInt64, _ framed: ByteBuffer) {
        guard let connection = connections[id], !connection.closing else { return }
        send(framed, to: connection)
    }

    /// A connection that sent what ZWS 2.0 does not take.
    func refuse(_ id: UInt64, code: UInt16, reason: String) {
        guard let connection = connections[id] else { return }
        logger.info("web peer closed", metadata: ["endpoint": "\(kind.rawValue)", "source": "\(connection.source)", "reason": "\(reason)"])
        close(connection, code: code, reason: reason, cut: .badMessage)
    }
}
