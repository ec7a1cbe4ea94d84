import CanvasProtocol

/// What one turn of the dispatcher (a request, finished jobs, due timers, expiry) knows and
/// produces: its time and its output. Passed along rather than kept in the dispatcher, so
/// nothing of one call can leak into the next; what belongs to a request is on the request
/// (`InFlightRequest`), never here.
struct Call {
    let now: ContinuousClock.Instant
    var output = Dispatcher.Output()
    /// Timed transitions started during the call.
    var timers: [TransitionTimer] = []
    /// Saves to announce on the server-wide `documents.` topic, which has its own sequence.
    var saves: [(summary: [String: JSONValue], savedAt: Int64?, cause: String, session: String?)] = []

    /// Where a reply may go out before the call ends (see `Dispatcher.handle`); nil: replies
    /// wait in `output`.
    private let send: ((Dispatcher.Output.Reply) -> Void)?

    init(now: ContinuousClock.Instant, sendingAtOnce send: ((Dispatcher.Output.Reply) -> Void)? = nil) {
        self.now = now
        self.send = send
    }

    /// The events made since `mark`, taken out of the output: they go once the store has the
    /// change that made them.
    mutating func takeEvents(from mark: Int) -> [[[UInt8]]] {
        guard mark < output.events.count else { return [] }
        defer { output.events.removeSubrange(mark...) }
        return Array(output.events[mark...])
    }

    mutating func reply(_ bytes: [UInt8], to envelope: [[UInt8]]) {
        output.replies.append(Dispatcher.Output.Reply(envelope: envelope, bytes: bytes))
    }

    /// Sends a reply now, if the server takes replies so and nothing of this call is waiting
    /// to go out first (events go before the reply of the request that caused them, replies
    /// in order). Returns whether it did; if not, the caller replies the usual way.
    func sendAtOnce(_ bytes: [UInt8], to envelope: [[UInt8]]) -> Bool {
        guard let send, output.events.isEmpty, output.replies.isEmpty else { return false }
        send(Dispatcher.Output.Reply(envelope: envelope, bytes: bytes))
        return true
    }
}
