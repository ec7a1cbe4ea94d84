import CanvasCore
import CanvasProtocol

/// Something that came for a session while it was held, kept to run in order.
enum QueuedWork {
    /// A request, decoded and counted once when it came (its method looked up, nil when this
    /// server has none of the name), with its frames, the routing envelope for its reply, and
    /// who sent it.
    case request(Request, Method?, frames: [[UInt8]], envelope: [[UInt8]], client: String?)
    /// A timed transition whose time came meanwhile.
    case timer(TransitionTicket)
}

/// Where one session is, as far as the request loop is concerned: `ready`, or `held` by the
/// request under way, with what came meanwhile queued in order.
///
/// A request holds its session from the moment it starts running until its reply is settled:
/// while it runs on the loop, while a job off the loop (a save, a page lookup, a large
/// encoding) works for it, and while the session store writes, confirms or takes over the
/// session for it (`StoreStep`). One holder at a time lets the session's buffers (the drawing,
/// the reply cache) change in place instead of being copied per request, and keeps a session's
/// replies in the order its requests came. A session being taken over from the store is
/// `held` before there is a session at all. Each event returns what the dispatcher must do;
/// the machine itself does nothing.
enum SessionSlot {
    case ready(ServiceSession)
    case held(queue: [QueuedWork])

    /// A request or a due timer came for the session. Returns the session to run it on now,
    /// which the caller holds until it calls `release` (or drops the slot: a close, a stale
    /// copy); nil when it was queued, to run once the session is released.
    mutating func arrive(_ work: QueuedWork) -> ServiceSession? {
        // Consumed, so the session and the queue move out of the slot instead of being copied
        // (a retain of every buffer) and the slot's own copy then released.
        switch consume self {
        case .ready(let session):
            self = .held(queue: [])
            return session
        case .held(var queue):
            queue.append(work)
            self = .held(queue: queue)
            return nil
        }
    }

    /// Work replayed after a release that found the session held again (by the replayed work
    /// before it) waits at the end of the queue, in order. False when the session is ready.
    mutating func requeue(_ work: ArraySlice<QueuedWork>) -> Bool {
        switch consume self {
        case .held(var queue):
            queue.append(contentsOf: work)
            self = .held(queue: queue)
            return true
        case .ready(let session):
            self = .ready(session)
            return false
        }
    }

    /// Holds a ready session for something of its own (its expiry): nil when it is held already.
    mutating func hold() -> ServiceSession? {
        guard case .ready(let session) = self else { return nil }
        self = .held(queue: [])
        return session
    }

    /// The holder is done: the session is ready for the next. Returns what queued meanwhile, to
    /// be replayed in order: if one of those holds the session past its turn again, the rest go
    /// back behind it as they are (`requeue`).
    mutating func release(_ session: consuming ServiceSession) -> [QueuedWork] {
        guard case .held(let queue) = self else { preconditionFailure("a session released that nothing held") }
        self = .ready(session)
        return queue
    }

    /// The session, when nothing holds it.
    var idle: ServiceSession? {
        if case .ready(let session) = self { return session }
        return nil
    }
}
