import Glibc

/// ZeroMQ over WebSocket, ZWS 2.0 (ZeroMQ RFC 45), as canvasd speaks it, with no sockets.
///
/// One ZMTP frame is one binary WebSocket message: a flags byte (`0x01` more frames follow,
/// `0x02` a command) and the frame's body. There is no greeting and no security mechanism:
/// each side's first message is its routing id. A ZMTP message is the frames up to one without
/// `0x01`.
public enum ZWS {
    public static let subprotocol = "ZWS2.0"
    static let more: UInt8 = 0x01
    static let command: UInt8 = 0x02

    /// The WebSocket message payloads that carry `frames` as one ZMTP message.
    public static func payloads(_ frames: [[UInt8]]) -> [[UInt8]] {
        frames.enumerated().map { index, body in [index < frames.count - 1 ? more : 0] + body }
    }

    /// The bytes of unmasked binary WebSocket messages, one per payload, headers included, as a
    /// server sends them: an event is framed once and the same bytes go to every subscriber.
    public static func framed(_ payloads: [[UInt8]]) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(payloads.reduce(0) { $0 + $1.count + 10 })
        for payload in payloads {
            bytes.append(0x82)   // FIN, binary
            if payload.count < 126 {
                bytes.append(UInt8(payload.count))
            } else if payload.count <= 0xFFFF {
                bytes += [126, UInt8(payload.count >> 8), UInt8(payload.count & 0xFF)]
            } else {
                bytes.append(127)
                bytes += (0..<8).reversed().map { UInt8(truncatingIfNeeded: UInt64(payload.count) >> ($0 * 8)) }
            }
            bytes += payload
        }
        return bytes
    }

    /// A PONG command answering a PING's context (ZMTP 3.1 heartbeats, which libzmq's ws://
    /// client sends when its heartbeat interval is set).
    static func pong(context: ArraySlice<UInt8>) -> [UInt8] {
        [command, 4] + Array("PONG".utf8) + context
    }
}

/// One connection's incoming WebSocket messages put together into ZMTP messages.
public struct ZWSReader: Sendable {
    /// What a WebSocket message meant.
    public enum Outcome: Sendable, Equatable {
        /// Nothing to act on yet: the peer's routing id, a frame with more to come, a command
        /// that needs no answer.
        case nothing
        /// A whole message: its frames (at most `maxFrames`) and how many more were left out.
        case message(frames: [[UInt8]], dropped: Int)
        /// A command to answer with this payload (a PING's PONG).
        case answer([UInt8])
        /// Not ZWS 2.0, or past a bound: close the connection with this WebSocket close code.
        case refuse(code: UInt16, reason: String)
    }

    /// Close codes (RFC 6455 §7.4.1).
    public enum CloseCode {
        public static let protocolError: UInt16 = 1002
        public static let unacceptableData: UInt16 = 1003
        public static let policyViolation: UInt16 = 1008
        public static let messageTooLarge: UInt16 = 1009
        public static let goingAway: UInt16 = 1001
        public static let tryAgainLater: UInt16 = 1013
    }

    /// Frames kept of one message; the rest are counted, so the request's size can be judged.
    public let maxFrames: Int
    /// Bytes of one message (every frame's, flags included): past them the connection is closed,
    /// as libzmq did for a message past its maximum size. The endpoint lowers it until the
    /// connection has authenticated.
    public var maxBytes: Int
    /// Whether ZMTP's SUBSCRIBE and CANCEL commands are read as subscriptions (on the events
    /// endpoint; on the request endpoint a command is never a request).
    public let subscriptions: Bool
    private var greeted = false
    private var frames: [[UInt8]] = []
    private var dropped = 0
    private var bytes = 0

    public init(maxFrames: Int, maxBytes: Int, subscriptions: Bool = true) {
        self.maxFrames = maxFrames
        self.maxBytes = maxBytes
        self.subscriptions = subscriptions
    }

    /// Whether the connection has a part of a message: a MORE frame not followed by its last.
    public var partial: Bool { !frames.isEmpty || dropped > 0 }

    /// Reads one whole binary WebSocket message's payload.
    public mutating func read(_ payload: [UInt8]) -> Outcome {
        guard let flags = payload.first else {
            return .refuse(code: CloseCode.protocolError, reason: "an empty message has no ZWS flags byte")
        }
        guard greeted else {
            // The peer's routing id: a ROUTER that makes its own ids ignores it, as a web peer's
            // may be anything (a browser sends 00).
            greeted = true
            return .nothing
        }
        if flags & ZWS.command != 0 {
            // A command is no message. PING has an answer (its context, up to 16 bytes);
            // SUBSCRIBE and CANCEL (ZMTP 3.1's subscriptions, which a libzmq SUB may send
            // instead of a message) are read as the message `01`/`00` and the topic would be.
            let body = Array(payload.dropFirst())
            guard let length = body.first.map(Int.init), length > 0, body.count > length else { return .nothing }
            let name = body[1...length], data = body[(length + 1)...]
            if name.elementsEqual("PING".utf8), data.count >= 2 { return .answer(ZWS.pong(context: data.dropFirst(2).prefix(16))) }
            guard subscriptions else { return .nothing }
            if name.elementsEqual("SUBSCRIBE".utf8) { return .message(frames: [[1] + data], dropped: 0) }
            if name.elementsEqual("CANCEL".utf8) { return .message(frames: [[0] + data], dropped: 0) }
            return .nothing
        }
        bytes += payload.count
        guard bytes <= maxBytes else {
            return .refuse(code: CloseCode.messageTooLarge, reason: "a message of more than \(maxBytes) bytes")
        }
        if frames.count < maxFrames { frames.append(Array(payload.dropFirst())) } else { dropped += 1 }
        guard flags & ZWS.more == 0 else { return .nothing }
        defer {
            frames = []
            dropped = 0
            bytes = 0
        }
        return .message(frames: frames, dropped: dropped)
    }
}

/// The PROXY protocol's version 2 header (HAProxy's `send-proxy-v2`), which a trusted proxy sends
/// first on each connection so that canvasd knows the client's own address.
public enum ProxyHeader {
    public enum Parsed: Sendable, Equatable {
        /// Not all of it has come yet.
        case incomplete
        /// The proxy's own connection (a health check): the proxy's address stands.
        case local(length: Int)
        /// A client's connection from `source` (its IP address, as text).
        case proxied(source: String, length: Int)
        case invalid(String)
    }

    static let signature: [UInt8] = [0x0D, 0x0A, 0x0D, 0x0A, 0x00, 0x0D, 0x0A, 0x51, 0x55, 0x49, 0x54, 0x0A]
    /// Longest header taken: addresses and HAProxy's usual TLVs fit well within it.
    public static let maxLength = 16 + 1024

    /// Reads the header at the start of `bytes` (the connection's first bytes).
    public static func parse(_ bytes: [UInt8]) -> Parsed {
        let prefix = min(bytes.count, signature.count)
        guard Array(bytes[..<prefix]) == Array(signature[..<prefix]) else { return .invalid("no PROXY protocol v2 signature") }
        guard bytes.count >= 16 else { return .incomplete }
        let versionCommand = bytes[12], family = bytes[13]
        guard versionCommand >> 4 == 2 else { return .invalid("PROXY protocol version \(versionCommand >> 4), not 2") }
        let length = 16 + (Int(bytes[14]) << 8 | Int(bytes[15]))
        guard length <= maxLength else { return .invalid("a PROXY header of \(length) bytes") }
        guard bytes.count >= length else { return .incomplete }
        switch versionCommand & 0x0F {
        case 0: return .local(length: length)
        case 1: break
        default: return .invalid("PROXY command \(versionCommand & 0x0F)")
        }
        let body = bytes[16..<length]
        switch family {
        case 0x11, 0x12:   // IPv4, over TCP or UDP
            guard body.count >= 12 else { return .invalid("an IPv4 PROXY header too short") }
            return .proxied(source: text(AF_INET, Array(body.prefix(4))), length: length)
        case 0x21, 0x22:   // IPv6
            guard body.count >= 36 else { return .invalid("an IPv6 PROXY header too short") }
            return .proxied(source: text(AF_INET6, Array(body.prefix(16))), length: length)
        default:
            // UNSPEC or a Unix socket: no IP address to count by; the proxy's stands.
            return .local(length: length)
        }
    }

    /// An address as the kernel writes it (and as a direct connection's is given), so that one
    /// client counts as one source whichever way it came.
    private static func text(_ family: Int32, _ address: [UInt8]) -> String {
        var buffer = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
        guard inet_ntop(family, address, &buffer, socklen_t(buffer.count)) != nil else { return "?" }
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
