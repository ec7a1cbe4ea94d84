internal import CZeroMQ

/// One libzmq socket. A socket belongs to the thread that uses it, so this type is not
/// `Sendable`; it is closed when the last reference goes.
public final class ZMQSocket {
    private let handle: UnsafeMutableRawPointer
    private let context: ZMQContext
    /// libzmq keeps small messages inside the `zmq_msg_t` itself, so the struct needs an
    /// address that does not move while it is in use: one heap slot per socket.
    private let message: UnsafeMutablePointer<zmq_msg_t>
    /// The envelope `receiveRouted` made last, handed out again while it repeats.
    private var lastEnvelope: [[UInt8]] = []

    init(context: ZMQContext, type: ZMQSocketType) throws(ZMQError) {
        guard let handle = zmq_socket(context.handle, type.rawValue) else { throw ZMQError("zmq_socket") }
        self.handle = handle
        self.context = context
        self.message = .allocate(capacity: 1)
        try setOption(ZMQ_LINGER, 0, "linger")
    }

    deinit {
        zmq_close(handle)
        message.deallocate()
    }

    // MARK: Set-up

    public func bind(_ endpoint: String) throws(ZMQError) {
        guard zmq_bind(handle, endpoint) == 0 else { throw ZMQError("bind \(endpoint)") }
    }

    public func unbind(_ endpoint: String) throws(ZMQError) {
        guard zmq_unbind(handle, endpoint) == 0 else { throw ZMQError("unbind \(endpoint)") }
    }

    public func connect(_ endpoint: String) throws(ZMQError) {
        guard zmq_connect(handle, endpoint) == 0 else { throw ZMQError("connect \(endpoint)") }
    }

    /// The endpoint last bound, with the port the system chose for `tcp://127.0.0.1:*`.
    public var lastEndpoint: String {
        var buffer = [CChar](repeating: 0, count: 1024)
        var size = buffer.count
        guard zmq_getsockopt(handle, ZMQ_LAST_ENDPOINT, &buffer, &size) == 0 else { return "" }
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// Receive timeout in milliseconds; -1 waits for ever.
    public func setReceiveTimeout(milliseconds: Int32) throws(ZMQError) {
        try setOption(ZMQ_RCVTIMEO, milliseconds, "receive timeout")
    }

    public func setSendTimeout(milliseconds: Int32) throws(ZMQError) {
        try setOption(ZMQ_SNDTIMEO, milliseconds, "send timeout")
    }

    /// A hard ceiling on one incoming frame; a peer that sends more is disconnected by libzmq.
    public func setMaximumMessageSize(_ bytes: Int64) throws(ZMQError) {
        var value = bytes
        guard zmq_setsockopt(handle, ZMQ_MAXMSGSIZE, &value, MemoryLayout<Int64>.size) == 0 else {
            throw ZMQError("set maximum message size")
        }
    }

    /// How many messages may queue for one peer before further ones are dropped (PUB) or block.
    public func setSendHighWaterMark(_ messages: Int32) throws(ZMQError) {
        try setOption(ZMQ_SNDHWM, messages, "send high-water mark")
    }

    public func setReceiveHighWaterMark(_ messages: Int32) throws(ZMQError) {
        try setOption(ZMQ_RCVHWM, messages, "receive high-water mark")
    }

    /// For ROUTER sockets: a new connection with a known identity takes over the old one.
    public func setRouterHandover(_ on: Bool) throws(ZMQError) {
        try setOption(ZMQ_ROUTER_HANDOVER, on ? 1 : 0, "router handover")
    }

    public func setRoutingID(_ id: [UInt8]) throws(ZMQError) {
        guard zmq_setsockopt(handle, ZMQ_ROUTING_ID, id, id.count) == 0 else { throw ZMQError("set routing id") }
    }

    /// For SUB sockets: receive messages whose first frame starts with `prefix` ("" for all).
    public func subscribe(_ prefix: String) throws(ZMQError) {
        let bytes = Array(prefix.utf8)
        guard zmq_setsockopt(handle, ZMQ_SUBSCRIBE, bytes, bytes.count) == 0 else { throw ZMQError("subscribe") }
    }

    public func unsubscribe(_ prefix: String) throws(ZMQError) {
        try unsubscribe(bytes: Array(prefix.utf8))
    }

    /// Byte-exact forms, for an XPUB that applies its subscribers' topics itself.
    public func subscribe(bytes: [UInt8]) throws(ZMQError) {
        guard zmq_setsockopt(handle, ZMQ_SUBSCRIBE, bytes, bytes.count) == 0 else { throw ZMQError("subscribe") }
    }

    public func unsubscribe(bytes: [UInt8]) throws(ZMQError) {
        guard zmq_setsockopt(handle, ZMQ_UNSUBSCRIBE, bytes, bytes.count) == 0 else { throw ZMQError("unsubscribe") }
    }

    /// For XPUB sockets: subscriptions are handed to the application (as received messages)
    /// and take effect only when it subscribes on the subscriber's behalf, right after reading
    /// them. This is how a publisher decides who may see which topics.
    public func setManualSubscriptions(_ on: Bool) throws(ZMQError) {
        try setOption(ZMQ_XPUB_MANUAL, on ? 1 : 0, "xpub manual")
    }

    // MARK: CurveZMQ

    /// Makes this socket a CurveZMQ server with the given secret key: every peer must complete
    /// the handshake, and a ZAP handler in the same context (see `ZAPHandler`) decides who may.
    public func makeCurveServer(secretKey: CurveKey) throws(ZMQError) {
        try setOption(ZMQ_CURVE_SERVER, 1, "curve server")
        try setKey(ZMQ_CURVE_SECRETKEY, secretKey, "curve secret key")
    }

    /// Makes this socket a CurveZMQ client of the server whose public key is given.
    public func makeCurveClient(serverKey: CurveKey, keyPair: CurveKeyPair) throws(ZMQError) {
        try setKey(ZMQ_CURVE_SERVERKEY, serverKey, "curve server key")
        try setKey(ZMQ_CURVE_PUBLICKEY, keyPair.publicKey, "curve public key")
        try setKey(ZMQ_CURVE_SECRETKEY, keyPair.secretKey, "curve secret key")
    }

    /// The ZAP domain sent with every handshake on this socket.
    public func setZAPDomain(_ domain: String) throws(ZMQError) {
        let bytes = Array(domain.utf8)
        guard zmq_setsockopt(handle, ZMQ_ZAP_DOMAIN, bytes, bytes.count) == 0 else { throw ZMQError("set zap domain") }
    }

    private func setKey(_ option: Int32, _ key: CurveKey, _ name: String) throws(ZMQError) {
        guard zmq_setsockopt(handle, option, key.bytes, key.bytes.count) == 0 else { throw ZMQError("set \(name)") }
    }

    private func setOption(_ option: Int32, _ value: Int32, _ name: String) throws(ZMQError) {
        var value = value
        guard zmq_setsockopt(handle, option, &value, MemoryLayout<Int32>.size) == 0 else {
            throw ZMQError("set \(name)")
        }
    }

    // MARK: Messages

    /// Sends a multipart message. With `wait: false`, a full queue throws `wouldBlock`
    /// instead of blocking.
    public func send(_ frames: [[UInt8]], wait: Bool = true) throws(ZMQError) {
        precondition(!frames.isEmpty, "a message has at least one frame")
        for (index, frame) in frames.enumerated() {
            var flags: Int32 = index < frames.count - 1 ? ZMQ_SNDMORE : 0
            if !wait { flags |= ZMQ_DONTWAIT }
            let sent = frame.withUnsafeBytes { zmq_send(handle, $0.baseAddress, $0.count, flags) }
            guard sent >= 0 else { throw ZMQError("send") }
        }
    }

    /// Sends `envelope`'s frames then `body` as one message, without first copying them into
    /// one array of frames (a reply per request goes this way).
    public func send(envelope: [[UInt8]], body: [UInt8], wait: Bool = true) throws(ZMQError) {
        let last: Int32 = wait ? 0 : ZMQ_DONTWAIT
        for frame in envelope {
            let sent = frame.withUnsafeBytes { zmq_send(handle, $0.baseAddress, $0.count, last | ZMQ_SNDMORE) }
            guard sent >= 0 else { throw ZMQError("send") }
        }
        let sent = body.withUnsafeBytes { zmq_send(handle, $0.baseAddress, $0.count, last) }
        guard sent >= 0 else { throw ZMQError("send") }
    }

    /// Receives one multipart message, waiting at most the receive timeout. Returns nil if
    /// the timeout passed (or, with `wait: false`, if nothing was queued).
    public func receive(wait: Bool = true) throws(ZMQError) -> [[UInt8]]? {
        try receive(wait: wait, readUserID: false, keepingAtMost: .max)?.frames
    }

    /// Like `receive`, with the sender's authenticated identity: the user id its ZAP handler
    /// gave (for CurveZMQ, here, the client's public key), or nil when nobody authenticated it.
    public func receiveWithUserID(wait: Bool = true) throws(ZMQError) -> (frames: [[UInt8]], userID: String?)? {
        try receive(wait: wait, readUserID: true, keepingAtMost: .max).map { ($0.frames, $0.userID) }
    }

    /// A message read whole, of which at most `maxFrames` frames were kept: `dropped` counts
    /// the rest, read and thrown away, so a message of millions of frames costs no memory.
    public func receive(wait: Bool = true, readUserID: Bool, keepingAtMost maxFrames: Int) throws(ZMQError)
        -> (frames: [[UInt8]], userID: String?, dropped: Int)? {
        var frames: [[UInt8]] = []
        var userID: String?
        var dropped = 0
        repeat {
            guard zmq_msg_init(message) == 0 else { throw ZMQError("zmq_msg_init") }
            defer { zmq_msg_close(message) }
            let received = zmq_msg_recv(message, handle, wait || !frames.isEmpty || dropped > 0 ? 0 : ZMQ_DONTWAIT)
            if received < 0 {
                // Nothing queued is the common case of a non-blocking read: answered without
                // building an error (its text comes from strerror, a lookup per empty read).
                let code = zmq_errno()
                if code == EAGAIN && frames.isEmpty { return nil }
                throw ZMQError("receive", errno: code)
            }
            // Frames that came from the peer carry its properties, but a ROUTER's routing-id frame
            // is made locally and carries none, so the first frame that has it is used.
            if readUserID && userID == nil, let property = zmq_msg_gets(message, "User-Id") {
                userID = String(cString: property)
            }
            let size = zmq_msg_size(message)
            // Room for a request's usual envelope and body at once, instead of growing 1, 2, 4
            // (and none taken by a read that finds nothing).
            if frames.isEmpty { frames.reserveCapacity(4) }
            if frames.count >= maxFrames {
                dropped += 1
            } else if size == 0 {
                frames.append([])
            } else {
                let data = zmq_msg_data(message)!
                frames.append(Array(UnsafeRawBufferPointer(start: data, count: size)))
            }
        } while zmq_msg_more(message) != 0
        return (frames, userID, dropped)
    }

    /// A message as a ROUTER socket hands it over, split where a server needs it split.
    public struct RoutedMessage {
        /// The sender's routing id, then the empty delimiter frame when one came next (REQ
        /// clients always send one, DEALER clients may): what a reply goes back behind.
        public var envelope: [[UInt8]]
        /// The frames after the envelope.
        public var body: [[UInt8]]
        /// The user id the sender's ZAP handler gave, when asked for.
        public var userID: String?
        /// Frames read and thrown away past `maxFrames`.
        public var dropped: Int
    }

    /// Receives one message on a ROUTER socket, as `receive(wait:readUserID:keepingAtMost:)`
    /// does (at most `maxFrames` frames kept, envelope included), but made straight into its
    /// envelope and body, and with the envelope of the last message reused when this one has
    /// the same: a burst from one client then allocates only its body.
    public func receiveRouted(wait: Bool = true, readUserID: Bool = false, keepingAtMost maxFrames: Int) throws(ZMQError)
        -> RoutedMessage? {
        var routed = RoutedMessage(envelope: [], body: [], userID: nil, dropped: 0)
        var frames = 0
        // The routing id: the last envelope's (nil), or another; whether the delimiter followed.
        var sender: [UInt8]?
        var delimited = false
        repeat {
            guard zmq_msg_init(message) == 0 else { throw ZMQError("zmq_msg_init") }
            defer { zmq_msg_close(message) }
            let received = zmq_msg_recv(message, handle, wait || frames > 0 ? 0 : ZMQ_DONTWAIT)
            if received < 0 {
                let code = zmq_errno()
                if code == EAGAIN && frames == 0 { return nil }
                throw ZMQError("receive", errno: code)
            }
            if readUserID && routed.userID == nil, let property = zmq_msg_gets(message, "User-Id") {
                routed.userID = String(cString: property)
            }
            let size = zmq_msg_size(message)
            let bytes = size == 0 ? UnsafeRawBufferPointer(start: nil, count: 0)
                : UnsafeRawBufferPointer(start: zmq_msg_data(message)!, count: size)
            if frames >= maxFrames {
                routed.dropped += 1
            } else if frames == 0 {
                if !(lastEnvelope.first?.elementsEqual(bytes) ?? false) { sender = Array(bytes) }
            } else if frames == 1 && size == 0 {
                delimited = true
            } else {
                routed.body.append(size == 0 ? [] : Array(bytes))
            }
            frames += 1
        } while zmq_msg_more(message) != 0
        guard maxFrames > 0 else { return routed }   // not even the routing id kept
        if sender != nil || lastEnvelope.count != (delimited ? 2 : 1) {
            let id = sender ?? lastEnvelope[0]
            lastEnvelope = delimited ? [id, []] : [id]
        }
        routed.envelope = lastEnvelope
        return routed
    }

    /// Waits until one of `sockets` has a message to read, or the timeout passes (-1: no
    /// timeout). Returns, for each socket, whether it is readable.
    public static func poll(_ sockets: [ZMQSocket], timeoutMilliseconds: Int) throws(ZMQError) -> [Bool] {
        var items = sockets.map { zmq_pollitem_t(socket: $0.handle, fd: 0, events: Int16(ZMQ_POLLIN), revents: 0) }
        guard zmq_poll(&items, Int32(items.count), timeoutMilliseconds) >= 0 else { throw ZMQError("poll") }
        return items.map { $0.revents & Int16(ZMQ_POLLIN) != 0 }
    }
}
