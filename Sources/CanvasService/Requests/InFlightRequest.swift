import CanvasProtocol

/// One request, from the moment it is decoded to its reply: what it is, where its reply goes,
/// and, for a session's request, where it is in its life (`RequestFlow`) and what it carries
/// there. Made once, in `Dispatcher.receive`; queued behind its session as it is; held by its
/// session's slot while a job or the session store works for it. Everything that is the
/// request's (its fingerprint, whether it is being answered a second time, the events it made)
/// lives here, never on the turn that happens to run it.
struct InFlightRequest {
    let request: Request
    /// The method it names; nil when this server has none of that name (a session's request
    /// still queues in order, then is refused).
    let method: Method?
    /// Its frames: its size was counted from them, and a take-over hands them on.
    let frames: [[UInt8]]
    /// The routing envelope its reply carries back.
    let envelope: [[UInt8]]
    /// Who sent it: the authenticated identity, nil without one.
    var client: String?
    var state = RequestState.ready
    /// Whether it is being answered again because its copy of the session turned out stale:
    /// once, not over and over.
    var retaking = false
    /// The events it made, held until its session's persistence has the change that made them.
    var events: [[[UInt8]]] = []
    /// For a document write: whether it makes a revision (and so a `document.saved`), and the
    /// revision already current, which a restore of it leaves as it is.
    var written: (publishes: Bool, unchangedAt: Int?)?
    /// The session's own work, which no client sent and nobody is answered for; nil for a
    /// client's request.
    let own: OwnWork?
    private var knownFingerprint: [UInt8]?
    private var knownDigest: [UInt8]?

    init(_ request: Request, _ method: Method?, frames: [[UInt8]], envelope: [[UInt8]], client: String?) {
        self.request = request
        self.method = method
        self.frames = frames
        self.envelope = envelope
        self.client = client
        own = nil
    }

    /// The session's own `work`, run as `method` would run it: a timer's finish as
    /// `canvas.finishTransition`, an expiry as `session.close`.
    init(own work: OwnWork, session: String, as method: Method) {
        request = Request(id: .string("own"), method: method.rawValue, session: session)
        self.method = method
        frames = []
        envelope = []
        client = nil
        own = work
    }

    var id: RequestID { request.id }
    /// The connection it came on (its routing id), for the per-client session limit.
    var connection: [UInt8]? { envelope.first }

    /// What tells a retry of it from another request under the same id: written once, when
    /// first needed (most reads never need it).
    mutating func fingerprint() -> [UInt8] {
        if let knownFingerprint { return knownFingerprint }
        let made = ReplyCache.fingerprint(request, method: method)
        knownFingerprint = made
        return made
    }

    /// What the session's reply cache keeps of it (`ReplyCache.digest`): written once.
    mutating func digest() -> [UInt8] {
        if let knownDigest { return knownDigest }
        let made = ReplyCache.digest(request, method: method)
        knownDigest = made
        return made
    }

    /// The request as the session store records it once answered (its fingerprint written
    /// here once, whoever asks first).
    mutating func answered() -> SharedSessions.Answered {
        SharedSessions.Answered(id: id, digest: digest(), request: request)
    }
}
