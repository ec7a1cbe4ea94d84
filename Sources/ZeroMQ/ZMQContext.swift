internal import CZeroMQ

/// A libzmq context. libzmq contexts are thread-safe, so this may be shared between threads;
/// the sockets made from it may not.
public final class ZMQContext: @unchecked Sendable {
    let handle: UnsafeMutableRawPointer

    public init() throws(ZMQError) {
        guard let handle = zmq_ctx_new() else { throw ZMQError("zmq_ctx_new") }
        self.handle = handle
    }

    /// How libzmq's background threads (the I/O thread that reads and writes every connection
    /// of this context's sockets, and the reaper) are scheduled.
    public enum BackgroundScheduling: Sendable {
        /// The system's default policy.
        case standard
        /// Linux's SCHED_BATCH: a fair share of the processor like any thread, but a thread
        /// woken does not preempt the one running. On a machine with fewer cores than busy
        /// threads, the I/O thread woken by a send otherwise takes the sender's core at once,
        /// writes that one message and sleeps, and the next send wakes it again; held off, it
        /// writes what was sent meanwhile in one go. Elsewhere than Linux, the default.
        case batch
    }

    /// Sets how the background threads are scheduled. libzmq applies it to each as it starts,
    /// and starts them with the first socket: call this before making any.
    public func setBackgroundScheduling(_ scheduling: BackgroundScheduling) throws(ZMQError) {
        #if os(Linux)
        // SCHED_BATCH, which Glibc's sched.h declares only for _GNU_SOURCE; any thread may
        // choose it for itself, so libzmq's switch (which aborts on failure) cannot fail.
        let policy: Int32 = scheduling == .batch ? 3 : ZMQ_THREAD_SCHED_POLICY_DFLT
        guard zmq_ctx_set(handle, ZMQ_THREAD_SCHED_POLICY, policy) == 0 else {
            throw ZMQError("set the background threads' scheduling policy")
        }
        #endif
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
