internal import CZeroMQ

/// A libzmq context. libzmq contexts are thread-safe, so this may be shared between threads;
/// the sockets made from it may not.
public final class ZMQContext: @unchecked Sendable {
    let handle: UnsafeMutableRawPointer

    public init() throws(ZMQError) {
        guard let handle = zmq_ctx_new() else { throw ZMQError("zmq_ctx_new") }
        self.handle = handle
    }

    /// Makes a socket of this context. Its linger is 0: closing never waits for unsent messages,
    /// so the context's termination cannot hang on a vanished peer.
    public func socket(_ type: ZMQSocketType) throws(ZMQError) -> ZMQSocket {
        try ZMQSocket(context: self, type: type)
    }

    /// Whether this libzmq has a capability ("ipc", "curve", "WS", …).
    public static func has(_ capability: String) -> Bool {
        zmq_has(capability) != 0
    }

    public static var version: String {
        var major: Int32 = 0, minor: Int32 = 0, patch: Int32 = 0
        zmq_version(&major, &minor, &patch)
        return "\(major).\(minor).\(patch)"
    }

    deinit {
        // Every socket holds a reference to its context, so all are closed by now and
        // termination does not block.
        while zmq_ctx_term(handle) != 0 && zmq_errno() == EINTR {}
    }
}

public enum ZMQSocketType: Sendable {
    case req, rep, dealer, router, pub, sub, xpub, xsub, pair

    var rawValue: Int32 {
        switch self {
        case .req: return ZMQ_REQ
        case .rep: return ZMQ_REP
        case .dealer: return ZMQ_DEALER
        case .router: return ZMQ_ROUTER
        case .pub: return ZMQ_PUB
        case .sub: return ZMQ_SUB
        case .xpub: return ZMQ_XPUB
        case .xsub: return ZMQ_XSUB
        case .pair: return ZMQ_PAIR
        }
    }
}
