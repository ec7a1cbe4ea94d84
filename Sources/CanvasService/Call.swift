import CanvasProtocol

/// What one turn of the dispatcher (a request, finished jobs, due timers, expiry) knows and
/// produces. Passed along rather than kept in the dispatcher, so nothing of one call can leak
/// into the next.
struct Call {
    /// Who sent the request being answered: the authenticated identity, nil without one.
    var client: String?
    /// The connection it came on (its routing id), for the per-client session limit when
    /// clients are not authenticated.
    var connection: [UInt8]?
    let now: ContinuousClock.Instant
    var output = Dispatcher.Output()
    /// Timed transitions started during the call.
    var timers: [TransitionTimer] = []
    /// Saves to announce on the server-wide `documents.` topic, which has its own sequence.
    var saves: [(summary: [String: JSONValue], cause: String, session: String?)] = []

    init(client: String? = nil, connection: [UInt8]? = nil, now: ContinuousClock.Instant) {
        self.client = client
        self.connection = connection
        self.now = now
    }

    mutating func reply(_ bytes: [UInt8], to envelope: [[UInt8]]) {
        output.replies.append(Dispatcher.Output.Reply(envelope: envelope, bytes: bytes))
    }
}
