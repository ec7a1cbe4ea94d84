import CanvasCore
import CanvasProtocol

/// Something that came for a session while it was held, kept to run in order.
enum QueuedWork {
    /// A request, decoded and counted once when it came.
    case request(InFlightRequest)
    /// A timed transition whose time came meanwhile.
    case timer(TransitionTicket)
}

/// Where one session is, as far as the request loop is concerned: `ready`; `held` by the
/// request running on the loop; or `parked` with the request (a client's, or the session's own
/// work) that a job or the session store works for, which the slot owns meanwhile. What comes while it is held
/// or parked is queued in order.
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
    /// The session (none while it is being taken over) and what holds it, waiting for a job
    /// or the session store.
    case parked(ServiceSession?, InFlightRequest, queue: [QueuedWork])

    /// A request or a due timer came for the session. Returns the session to run it on now,
    /// which the caller holds until it calls `release` (or drops the slot: a close, a stale
    /// copy); nil when it was queued, to run once the session is released.
    /// `work` is made only if it queues: most requests find their session ready.
    mutating func arrive(_ work: @autoclosure () -> QueuedWork) -> ServiceSession? {
        // Consumed, so the session and the queue move out of the slot instead of being copied
        // (a retain of every buffer) and the slot's own copy then released.
        switch consume self {
        case .ready(let session):
            self = .held(queue: [])
            return session
        case .held(var queue):
            queue.append(work())
            self = .held(queue: queue)
            return nil
        case .parked(let session, let holder, var queue):
            queue.append(work())
            self = .parked(session, holder, queue: queue)
            return nil
        }
    }

    /// The holder waits for a job or the store: the slot keeps it, and the session, until `unpark`.
    mutating func park(_ session: consuming ServiceSession?, _ holder: consuming InFlightRequest) {
        switch consume self {
        case .held(let queue):
            self = .parked(session, holder, queue: queue)
        case let other:
            // Only what holds a session parks it; anything else keeps the slot as it was.
            self = other
        }
    }

    /// What a job or the store worked for, and its session, back in the hands of the loop
    /// (the slot held again); nil when nothing is parked.
    mutating func unpark() -> (session: ServiceSession?, holder: InFlightRequest)? {
        switch consume self {
        case .parked(let session, let holder, let queue):
            self = .held(queue: queue)
            return (session, holder)
        case let other:
            self = other
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
        case .parked(let session, let holder, var queue):
            queue.append(contentsOf: work)
            self = .parked(session, holder, queue: queue)
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
        let queue: [QueuedWork]
        switch self {
        case .held(let queued), .parked(_, _, let queued): queue = queued
        case .ready: queue = []
        }
        self = .ready(session)
        return queue
    }

    /// What queued behind the holder.
    var queue: [QueuedWork] {
        switch self {
        case .held(let queue), .parked(_, _, let queue): return queue
        case .ready: return []
        }
    }

    /// The session, when nothing holds it.
    var idle: ServiceSession? {
        if case .ready(let session) = self { return session }
        return nil
    }
}
