import CanvasCore

/// A timed transition of one session, due at `deadline`.
struct TransitionTimer {
    let deadline: ContinuousClock.Instant
    let session: String
    let ticket: TransitionTicket
}

/// The sessions' pending timed transitions, on whatever clock the caller passes.
struct TransitionTimers {
    private var timers: [TransitionTimer] = []

    var nextDeadline: ContinuousClock.Instant? { timers.map(\.deadline).min() }

    mutating func add(_ new: [TransitionTimer]) {
        // Asked after every request, nearly always with none: `+=` would still make the empty
        // array's storage its own, an allocation per request.
        if !new.isEmpty { timers += new }
    }

    /// Takes out the timers due at `now`, earliest first.
    mutating func due(at now: ContinuousClock.Instant) -> [TransitionTimer] {
        let due = timers.filter { $0.deadline <= now }.sorted { $0.deadline < $1.deadline }
        timers.removeAll { $0.deadline <= now }
        return due
    }

    mutating func cancel(session: String) { timers.removeAll { $0.session == session } }
}
