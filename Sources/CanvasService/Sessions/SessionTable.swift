import CanvasCore

/// The open sessions: who owns each, where each is (`SessionSlot`), new ids, and which event
/// topics a client may receive.
struct SessionTable {
    /// A class, not a struct: asking who owns a session (every request does) then reads one
    /// field through a reference, where reading a struct out of the dictionary copied the
    /// whole entry, retaining and releasing every buffer of the session inside its slot.
    /// (The methods that change a slot stay `mutating`: the table is one value, used as one.)
    private final class Entry {
        /// The authenticated client that opened it (nil without authentication).
        let owner: String?
        /// The connection that opened it, which counts toward the per-client limit when
        /// clients are not authenticated.
        let connection: [UInt8]?
        var slot: SessionSlot
        /// A place kept while a session is taken over: its owner is only who asked for it,
        /// until the store says whose it is.
        let provisional: Bool

        init(owner: String?, connection: [UInt8]?, slot: SessionSlot, provisional: Bool = false) {
            self.owner = owner
            self.connection = connection
            self.slot = slot
            self.provisional = provisional
        }
    }

    private var entries: [String: Entry] = [:]

    var count: Int { entries.count }

    func contains(_ id: String) -> Bool { entries[id] != nil }

    /// Whether a session of that id is here, not just being taken over.
    func holds(_ id: String) -> Bool { entries[id].map { !$0.provisional } ?? false }

    /// An id no open session has: 15 hex digits, 60 random bits.
    ///
    /// 15, not 16: a String of up to 15 UTF-8 bytes is stored inline, so the id every request
    /// carries is parsed without an allocation, and comparing it with a key of this table
    /// reads no separate (and, between requests, uncached) heap object.
    func newID() -> String {
        var id: String
        repeat {
            let digits = String(UInt64.random(in: 0..<(1 << 60)), radix: 16)
            id = String(repeating: "0", count: Self.idDigits - digits.count) + digits
        } while entries[id] != nil
        return id
    }

    static let idDigits = 15

    /// A session that is held from the start: one whose creation its persistence has yet to confirm.
    mutating func insertHeld(_ session: ServiceSession) {
        entries[session.id] = Entry(owner: session.owner, connection: session.connection, slot: .held(queue: []))
    }

    /// A session being taken over from the store for `owner`: held, so that what comes for it
    /// meanwhile waits, though there is no session yet. `adopt` or `remove` ends it.
    mutating func insertTakingOver(_ id: String, owner: String?, connection: [UInt8]?) {
        entries[id] = Entry(owner: owner, connection: connection, slot: .held(queue: []), provisional: true)
    }

    /// The session taken over, in the place `insertTakingOver` kept, still held, with what queued.
    mutating func adopt(_ session: ServiceSession) {
        let queue = entries[session.id]?.slot.queue ?? []
        entries[session.id] = Entry(owner: session.owner, connection: session.connection, slot: .held(queue: queue))
    }

    /// Sessions one owner holds over all its connections: a web token's owner, a key, or (nil)
    /// the local owner, every unauthenticated client together.
    func held(byOwner owner: String?) -> Int {
        entries.values.count { $0.owner == owner }
    }

    /// Sessions one client holds: by key when clients are authenticated, by connection when not.
    func held(by client: String?, connection: [UInt8]?, authenticated: Bool) -> Int {
        if authenticated { return entries.values.count { $0.owner == client } }
        guard let connection else { return 0 }
        return entries.values.count { $0.connection == connection }
    }

    /// Whether session `id` exists and belongs to `client`. Callers answer "no such session"
    /// and "not yours" alike, so that session ids cannot be probed.
    func isOwned(_ id: String, by client: String?) -> Bool {
        guard let entry = entries[id] else { return false }
        return entry.owner == client
    }

    /// A request or due timer for an existing session: the session to run it on now, or nil
    /// when it was queued behind a job (or there is no such session). (A session returned, not
    /// a wrapper matched by the caller: a copy held by a wrapper would make the request copy
    /// the session's buffers.)
    mutating func arrive(_ id: String, _ work: @autoclosure () -> QueuedWork) -> ServiceSession? {
        guard let entry = entries[id] else { return nil }
        return arrive(entry, id, work)
    }

    /// A client's request for a session: as `arrive`, but nil too when the session is not the
    /// client's, and then nothing is queued. One lookup of the id for both the owner and the slot.
    mutating func arrive(_ id: String, from client: String?, _ work: @autoclosure () -> QueuedWork) -> ServiceSession? {
        guard let entry = entries[id], entry.owner == client else { return nil }
        return arrive(entry, id, work)
    }

    private mutating func arrive(_ entry: Entry, _ id: String, _ work: () -> QueuedWork) -> ServiceSession? {
        guard let session = entry.slot.arrive(work()) else { return nil }
        return session
    }

    /// Holds a ready session for something of its own; nil when it is held already (or gone).
    mutating func hold(_ id: String) -> ServiceSession? { entries[id]?.slot.hold() }

    /// The holder of a session is done with it. Returns what queued meanwhile, to replay.
    mutating func release(_ session: consuming ServiceSession) -> [QueuedWork] {
        // The id read first, so that the session itself is moved into the slot, not copied.
        let id = session.id
        return entries[id]?.slot.release(session) ?? []
    }

    /// When session `id` is held, puts `work` at the end of what waits for it, in order, and
    /// returns true; false when it is ready or gone (the work is then the caller's to run).
    mutating func requeue(_ id: String, _ work: ArraySlice<QueuedWork>) -> Bool {
        entries[id]?.slot.requeue(work) ?? false
    }

    /// What queued for a session that is going (dropped or closed) while held.
    func queued(_ id: String) -> [QueuedWork] {
        entries[id]?.slot.queue ?? []
    }

    /// Parks what holds session `id` (and the session) in its slot while a job or the session
    /// store works for it.
    mutating func park(_ id: String, _ session: consuming ServiceSession?, _ holder: consuming InFlightRequest) {
        entries[id]?.slot.park(session, holder)
    }

    /// What was parked for session `id`, and the session, back to the loop (still held).
    mutating func unpark(_ id: String) -> (session: ServiceSession?, holder: InFlightRequest)? {
        entries[id]?.slot.unpark()
    }

    mutating func remove(_ id: String) {
        entries[id] = nil
    }

    /// Sessions nobody has touched since `cutoff`; one held is not idle.
    func idle(before cutoff: ContinuousClock.Instant) -> [ServiceSession] {
        entries.values.compactMap { entry in entry.slot.idle.flatMap { $0.lastActive < cutoff ? $0 : nil } }
    }

    /// Whether `client` may receive events under `topic` (a subscription prefix): only topics
    /// inside one of its own sessions (`<session>.` and longer), or the shared `documents.`
    /// topic. A shorter prefix would match other clients' sessions.
    func maySubscribe(_ client: String?, to topic: [UInt8]) -> Bool {
        if topic.starts(with: "documents.".utf8) { return true }
        guard let dot = topic.firstIndex(of: UInt8(ascii: ".")) else { return false }
        // Not a session being taken over: anyone may ask for any id, and be its provisional owner.
        guard let entry = entries[String(decoding: topic[..<dot], as: UTF8.self)], !entry.provisional else { return false }
        return entry.owner == client
    }
}
