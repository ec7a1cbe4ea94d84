import CanvasCore

/// Something that came for a session while a job off the loop held it, kept to run in order.
enum QueuedWork {
    /// A request: its frames, the routing envelope for its reply, and who sent it.
    case request(frames: [[UInt8]], envelope: [[UInt8]], client: String?)
    /// A timed transition whose time came meanwhile.
    case timer(TransitionTicket)
}

/// Where one session is, as far as the request loop is concerned.
///
/// A session is `ready`, `running` one request in the loop, or `waiting` for a job off the loop
/// (a save, a page lookup, a large encoding) that holds it, with what came meanwhile queued in
/// order. A session has one owner at a time, so its buffers (the drawing, the reply cache)
/// change in place instead of being copied per request. Each event returns what the dispatcher
/// must do; the machine itself does nothing.
enum SessionSlot {
    case ready(ServiceSession)
    case running
    case waiting(queue: [QueuedWork])

    /// A request or a due timer came for the session. Returns the session to run it on now,
    /// which the caller holds until it calls `finish` or `startJob`, or drops the slot (a
    /// close); nil when it was queued, to run when the job holding the session ends.
    mutating func arrive(_ work: QueuedWork) -> ServiceSession? {
        // Consumed, so the session and the queue move out of the slot instead of being copied
        // (a retain of every buffer) and the slot's own copy then released.
        switch consume self {
        case .ready(let session):
            self = .running
            return session
        case .waiting(var queue):
            queue.append(work)
            self = .waiting(queue: queue)
            return nil
        case .running:
            self = .running
            // The loop runs one request at a time and hands the session back before the next.
            preconditionFailure("a request arrived for a session that is already running one")
        }
    }

    /// The request that was running is answered; the session is ready for the next.
    mutating func finish(_ session: consuming ServiceSession) {
        guard case .running = self else { preconditionFailure("finish without a running request") }
        self = .ready(session)
    }

    /// The running request went off the loop, taking the session with it.
    mutating func startJob() {
        guard case .running = self else { preconditionFailure("a job started without a running request") }
        self = .waiting(queue: [])
    }

    /// The job is done and gives the session back. Returns what queued meanwhile, to be
    /// replayed through `arrive` in order: if one of those starts a job again, the rest queue
    /// behind it once more.
    mutating func endJob(_ session: consuming ServiceSession) -> [QueuedWork] {
        guard case .waiting(let queue) = self else { preconditionFailure("a job ended for a session it did not hold") }
        self = .ready(session)
        return queue
    }

    /// The session, when nothing holds it.
    var idle: ServiceSession? {
        if case .ready(let session) = self { return session }
        return nil
    }
}
