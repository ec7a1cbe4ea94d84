import CanvasCore
import CanvasProtocol
import DocumentStore
import SessionStore

/// One session as the service holds it: the pure canvas session plus what the wire needs.
///
/// A value, kept behind one reference (copied on write, like an Array): a session moves
/// between its slot in the table, the request running on it and the jobs that hold it, and
/// every move of the fields themselves copied most of a kilobyte, several times a request,
/// through memory an idle server finds uncached.
///
/// Sendable as its fields are (which the compiler checks on `Fields`): the storage is shared
/// only between copies, is never written while shared, and is shared by the atomic reference
/// count that decides that, as an Array's is.
struct ServiceSession: @unchecked Sendable {
    private struct Fields: Sendable {
        let id: String
        let owner: String?
        var connection: [UInt8]?
        var canvas: CanvasSession
        let transitions: TransitionMode
        var size: (width: Int, height: Int)?
        let resultImages: Bool
        var lastActive: ContinuousClock.Instant
        var seq: UInt64
        var replies: ReplyCache
        var target: DocumentTarget?
        var strokeParts: StrokeParts?
        var storedVersion: UInt64
        var storedAt: ContinuousClock.Instant?
        var stored: StoredSnapshot?
        /// `canvas.state`'s result as last written, until what it shows changes.
        var stateText: [UInt8]?
        /// Whether a warning this session's client provoked was logged already.
        var warned = false
        /// With a shared session store, the operations since `storedVersion` (nil: a change
        /// since was not one of them).
        var journal: [SessionOperation]? = []
        /// About what the journal holds, in bytes (`record`).
        var journalBytes = 0
    }

    private final class Storage {
        var fields: Fields
        init(_ fields: Fields) { self.fields = fields }
    }

    private var storage: Storage

    init(id: String, owner: String?, connection: [UInt8]? = nil, canvas: CanvasSession, transitions: TransitionMode,
         size: (width: Int, height: Int)?, resultImages: Bool, lastActive: ContinuousClock.Instant, seq: UInt64 = 0,
         replies: ReplyCache, target: DocumentTarget? = nil, strokeParts: StrokeParts? = nil) {
        storage = Storage(Fields(id: id, owner: owner, connection: connection, canvas: canvas, transitions: transitions,
                                 size: size, resultImages: resultImages, lastActive: lastActive, seq: seq, replies: replies,
                                 target: target, strokeParts: strokeParts, storedVersion: 0, storedAt: nil, stored: nil, stateText: nil))
    }

    /// The fields, to change: this session's own copy first if another value shares them.
    private var unique: Fields {
        _read { yield storage.fields }
        _modify {
            if !isKnownUniquelyReferenced(&storage) { storage = Storage(storage.fields) }
            yield &storage.fields
        }
    }

    var id: String { storage.fields.id }
    /// The authenticated client (its CurveZMQ public key) that opened it; nil without
    /// authentication, where every local client may use every session.
    var owner: String? { storage.fields.owner }
    /// The connection (routing id) that opened it, which counts toward the per-client limit
    /// when clients are not authenticated.
    var connection: [UInt8]? {
        _read { yield storage.fields.connection }
        _modify { yield &unique.connection }
    }
    // The fields `canvas.state` shows (with `transitions`, which never changes) forget its
    // text when they are changed, wherever from.
    //
    // Changed here, the canvas is changed by something the journal cannot say: the next write
    // goes whole. What a request does to it goes through the journaled methods below.
    var canvas: CanvasSession {
        _read { yield storage.fields.canvas }
        _modify {
            #if DEBUG
            CanvasChangeCount.count()
            #endif
            unique.stateText = nil
            unique.journal = nil
            yield &unique.canvas
        }
    }
    var transitions: TransitionMode { storage.fields.transitions }
    /// The canvas size for images, when the client gave one.
    var size: (width: Int, height: Int)? {
        _read { yield storage.fields.size }
        _modify {
            unique.stateText = nil
            unique.journal = nil
            yield &unique.size
        }
    }
    /// Whether `canvas.result` events carry the PNG too (results the pencil causes have no
    /// request to ask for one).
    var resultImages: Bool { storage.fields.resultImages }
    /// Whether a warning this session's client provoked was logged already: the next ones go
    /// to the debug log (the client is told each time, in its reply and events).
    var warned: Bool {
        _read { yield storage.fields.warned }
        _modify { yield &unique.warned }
    }
    var lastActive: ContinuousClock.Instant {
        _read { yield storage.fields.lastActive }
        _modify { yield &unique.lastActive }
    }
    /// The last event's sequence number; the first event is 1.
    var seq: UInt64 {
        _read { yield storage.fields.seq }
        _modify {
            unique.stateText = nil
            yield &unique.seq
        }
    }
    /// What a request remembers goes through `remember`.
    var replies: ReplyCache {
        _read { yield storage.fields.replies }
        _modify {
            unique.journal = nil
            yield &unique.replies
        }
    }
    /// Where a submit puts the drawing, when `canvas.open` named a document. Set rarely (an
    /// open for a document), and then written whole; let go by `leaveTarget`.
    var target: DocumentTarget? {
        _read { yield storage.fields.target }
        _modify {
            unique.journal = nil
            yield &unique.target
        }
    }
    /// A stroke whose first parts came (`continued`), waiting for its last.
    var strokeParts: StrokeParts? {
        get { storage.fields.strokeParts }
        set {
            // Every method that acts lets the parts go, and most find none.
            if newValue == nil && storage.fields.strokeParts == nil { return }
            unique.strokeParts = newValue
            record(.strokeParts(newValue))
        }
    }
    /// With a shared session store: the version of this session's last snapshot there, and
    /// when it was written or its lease renewed.
    var storedVersion: UInt64 {
        _read { yield storage.fields.storedVersion }
        _modify { yield &unique.storedVersion }
    }
    var storedAt: ContinuousClock.Instant? {
        _read { yield storage.fields.storedAt }
        _modify { yield &unique.storedAt }
    }
    /// With a shared session store: the snapshot as the store has it (at `storedVersion`, when
    /// its version says so), which the next change is written against as a delta.
    var stored: StoredSnapshot? {
        _read { yield storage.fields.stored }
        _modify { yield &unique.stored }
    }

    /// `canvas.state`'s result: written once, then the same bytes until the session changes
    /// what it shows. It is what clients poll, so most requests find it written.
    mutating func stateText() -> [UInt8] {
        if let text = storage.fields.stateText { return text }
        var out = JSONText(capacity: 320)
        WireShapes.writeState(self, into: &out)
        unique.stateText = out.bytes
        return out.bytes
    }

    mutating func nextSeq() -> UInt64 {
        seq += 1
        return seq
    }

    // MARK: Changes the journal keeps

    /// The operations since the version last written to a shared store, when every change
    /// since was one (`SessionOperation`): what the next write appends to the session's log.
    /// nil: something else changed it, and it is written whole. Kept only for a session the
    /// store has (`stored`): a local session is never written.
    var journal: [SessionOperation]? { storage.fields.journal }

    /// The session is as written (or as taken over): the journal starts again.
    mutating func startJournal() {
        if storage.fields.journal?.isEmpty != true { unique.journal = [] }
        if storage.fields.journalBytes != 0 { unique.journalBytes = 0 }
    }

    /// A journal past this many operations or bytes is given up, and the next write goes
    /// whole: reads between two changes add their replies to it (a retry of a read is answered
    /// from the reply cache, wherever it goes), and a client that only polls must not grow it
    /// without end. The reply cache itself keeps far less.
    static let maxJournalOperations = 4096
    static let maxJournalBytes = 4 << 20

    private mutating func record(_ operation: SessionOperation) {
        guard storage.fields.stored != nil, storage.fields.journal != nil else { return }
        let size = operation.approximateBytes
        guard let size, storage.fields.journal!.count < Self.maxJournalOperations,
              storage.fields.journalBytes + size <= Self.maxJournalBytes else {
            unique.journal = nil
            return
        }
        unique.journal?.append(operation)
        unique.journalBytes += size
    }

    /// Runs `change` on the canvas without the accessor's giving up on the journal.
    private mutating func changeCanvas<Result, Failure: Error>(_ change: (inout CanvasSession) throws(Failure) -> Result) throws(Failure) -> Result {
        #if DEBUG
        CanvasChangeCount.count()
        #endif
        unique.stateText = nil
        return try change(&unique.canvas)
    }

    /// A drawing edit (`CanvasSession.edit`); one refused changes nothing.
    mutating func edit(_ edit: DrawingEdit, within bounds: DrawingBounds = .unbounded) throws(CanvasEditError) -> EditReport {
        let report = try changeCanvas { (canvas: inout CanvasSession) throws(CanvasEditError) in try canvas.edit(edit, within: bounds) }
        record(.edit(edit))
        return report
    }

    /// A canvas command; one refused changes nothing.
    mutating func run(_ step: CanvasStep) throws(CanvasRejection) -> [CanvasAction] {
        let actions = try changeCanvas { (canvas: inout CanvasSession) throws(CanvasRejection) in try step.run(on: &canvas) }
        record(.canvas(step))
        return actions
    }

    mutating func doubleTap() -> DoubleTapReport {
        let report = changeCanvas { (canvas: inout CanvasSession) in canvas.doubleTap() }
        record(.doubleTap)
        return report
    }

    mutating func initializePencil() {
        changeCanvas { (canvas: inout CanvasSession) in canvas.initialize() }
        record(.initialize)
    }

    mutating func configurePencil(_ configuration: PencilConfiguration) {
        changeCanvas { (canvas: inout CanvasSession) in canvas.configurePencil(configuration) }
        record(.configurePencil(configuration))
    }

    /// Remembers a request's reply (nil: answered, too large to keep) in the reply cache.
    mutating func remember(_ reply: [UInt8]?, for id: RequestID, digest: [UInt8]) {
        let kept = reply.flatMap { $0.count <= storage.fields.replies.maxReplyBytes ? $0 : nil }
        unique.replies.remember(kept, for: id, request: digest)
        guard storage.fields.stored != nil, let journal = storage.fields.journal else { return }
        // An edit's reply is made again by the replay from the edit just before it.
        var form = SessionOperation.KeptReply.none
        if let kept {
            if case .edit? = journal.last {
                form = OperationLog.keptForm(kept, id: id, after: canvas)
            } else {
                form = .bytes(kept)
            }
        }
        record(.reply(id: id, digest: digest, kept: form))
    }

    /// Lets the document target go (an end other than a minimize).
    mutating func leaveTarget() {
        guard storage.fields.target != nil else { return }
        unique.target = nil
        record(.leaveTarget)
    }
}

/// A document page that a session's drawing is for.
struct DocumentTarget: Sendable {
    let name: String
    let page: Int
    /// How the save puts the ink on the page.
    let form: InkForm
    /// Set when the drawing is the page's ink, reopened: its save replaces that ink.
    var reopened: ReopenedInk?

    init(name: String, page: Int, form: InkForm = .paper, reopened: ReopenedInk? = nil) {
        self.name = name
        self.page = page
        self.form = form
        self.reopened = reopened
    }

    /// Whether saving `drawing` here makes a revision: anything drawn does, nothing drawn does
    /// not, unless it takes reopened ink off; a reopened drawing saved as it was loaded does not,
    /// unless it was loaded from other programs' ink, which the save makes canvas ink.
    func makesRevision(_ drawing: Drawing) -> Bool {
        guard let reopened else { return drawing.hasContent }
        if reopened.otherInk == true { return true }
        return (drawing.hasContent || !reopened.edits.isEmpty) && PageInk.digest(drawing) != reopened.drawing
    }

    /// Names compare by their bytes, as the file system does: "é" written precomposed or as
    /// e and an accent are two files, though Swift's == calls the strings equal.
    func isPage(_ page: Int, of name: String) -> Bool {
        self.page == page && self.name.utf8.elementsEqual(name.utf8)
    }
}

/// What a drawing reopened from its page's ink was loaded from.
struct ReopenedInk: Sendable, Equatable, Codable {
    /// The digests of the edits whose ink it holds (`PageInk.Edit.digest`): what its save
    /// takes off the page.
    let edits: [String]
    /// The digest of the drawing as loaded (`PageInk.digest`): a save of the same drawing
    /// makes no new revision.
    let drawing: String
    /// True when other programs' /Ink is among the edits (a save makes it canvas ink, changed
    /// or not); absent in snapshots written before it could be.
    var otherInk: Bool? = nil
}

/// The last few replies of a session by request id, oldest forgotten first, each with the
/// request it answered, so a reused id on a different request is told apart from a retry.
struct ReplyCache {
    /// What a retry must repeat: `{"method":…,"params":…}` as `JSONCodec.serialize` writes it
    /// (keys sorted, numbers in one form), written directly instead of building that object.
    /// `method`: the one `request` names, when known.
    static func fingerprint(_ request: Request, method: Method? = nil) -> [UInt8] {
        // Without params, as most reads come (`canvas.state`, which clients poll), each
        // method's is the same bytes: written once, and shared by every entry that keeps them.
        if let method, request.hasNoParams { return withoutParams[method.index] }
        return fingerprint(method: request.method, params: request.params)
    }

    private static func fingerprint(method: String, params: [String: JSONValue]) -> [UInt8] {
        var out = JSONText(capacity: 64)
        out.raw(#"{"method":"#); out.string(method)
        out.raw(#","params":"#); out.value(.object(params))
        out.raw("}")
        return out.bytes
    }

    /// Each method's fingerprint without params, by `Method.index`.
    private static let withoutParams: [[UInt8]] = {
        var table = [[UInt8]](repeating: [], count: Method.allCases.count)
        for method in Method.allCases { table[method.index] = fingerprint(method: method.rawValue, params: [:]) }
        return table
    }()


    /// What an entry keeps of its request: its method's and params' `JSONDigest`, 16 bytes
    /// however large the request (a stroke's points are most of a session's requests, and the
    /// cache once kept each as its JSON, which was most of a stored session's bytes), made
    /// without writing the request out. 128 bits: telling a retry from an id reused on another
    /// request needs no more, and only the session's own client chooses what it tells apart.
    /// `method`: the one `request` names, when known (as `fingerprint`'s).
    static func digest(_ request: Request, method: Method? = nil) -> [UInt8] {
        // Without params, as most reads come, each method's is made once.
        if let method, request.hasNoParams { return withoutParamsDigests[method.index] }
        return request.digest.bytes
    }

    private static let withoutParamsDigests: [[UInt8]] = Method.allCases.map { JSONDigest.request(method: $0.rawValue, params: [:]).bytes }

    /// The digest of a fingerprint (`fingerprint`'s JSON), read back.
    static func digest(fingerprint: [UInt8]) -> [UInt8] {
        guard case .object(let request)? = try? JSONCodec.parse(fingerprint), case .string(let method)? = request["method"],
              case .object(let params)? = request["params"] else {
            // Kept as it is, JSON text that no request's digest equals: a retry of it is told
            // the id was used on another request.
            return fingerprint
        }
        return JSONDigest.request(method: method, params: params).bytes
    }

    /// An entry's request as a session stored before the digests has it (its fingerprint
    /// itself, JSON that starts `{"method":`), made the digest; one stored since, as it is.
    static func storedDigest(_ request: [UInt8]) -> [UInt8] {
        request.starts(with: legacyPrefix) ? digest(fingerprint: request) : request
    }

    private static let legacyPrefix = Array(#"{"method":"#.utf8)

    private struct Entry {
        var id: RequestID
        /// Its request's `digest`.
        var request: [UInt8]
        /// nil: answered, the reply too large to keep.
        var reply: [UInt8]?
    }

    /// The entries remembered, oldest first, as a ring: the live ones are
    /// `ring[(first + i) % ring.count]` for `i < count`. A request with a new id forgets the
    /// oldest, and this way nothing moves.
    private var ring: [Entry] = []
    /// A short hash of the id at each place of the ring, 0 where nothing lives. An id is found
    /// by scanning these, at most `capacity` words, instead of through a dictionary: a
    /// dictionary cost a lookup, an insert and a removal per request, and the removal hashes
    /// the ids after the one removed again (`canvasbench latency`'s profile shows it), where
    /// the scan hashes only the id asked for.
    private var tags: [UInt32] = []
    private var first = 0
    private var count = 0
    private var bytes = 0
    let capacity: Int
    let maxReplyBytes: Int
    let maxBytes: Int

    init(capacity: Int, maxReplyBytes: Int = .max, maxBytes: Int = .max) {
        self.capacity = capacity
        self.maxReplyBytes = maxReplyBytes
        self.maxBytes = maxBytes
    }

    /// An empty cache with the service's limits, for a new session or one taken over.
    init(limits: Limits) {
        self.init(capacity: limits.replyCacheSize, maxReplyBytes: limits.maxCachedReplyBytes,
                  maxBytes: limits.maxCachedBytesPerSession)
    }

    enum Lookup {
        case miss
        case retry(reply: [UInt8])
        /// Answered before, but the reply was too large to keep.
        case notKept
        case reused
    }

    /// `request` is asked for only when the id is found: most ids are new.
    func lookup(_ id: RequestID, request: @autoclosure () -> [UInt8]) -> Lookup {
        guard let place = place(of: id) else { return .miss }
        let entry = ring[place]
        guard entry.request == request() else { return .reused }
        return entry.reply.map { .retry(reply: $0) } ?? .notKept
    }

    mutating func store(_ reply: [UInt8], for id: RequestID, request: [UInt8]) {
        remember(reply.count <= maxReplyBytes ? reply : nil, for: id, request: request)
    }

    /// What is remembered, oldest first (nil: answered, the reply too large to keep).
    var entries: [(id: RequestID, request: [UInt8], reply: [UInt8]?)] {
        (0..<count).map { index in
            let entry = ring[(first + index) % ring.count]
            return (entry.id, entry.request, entry.reply)
        }
    }

    /// Remembers an entry as `entries` gave it, for a session restored from a snapshot.
    mutating func remember(_ kept: [UInt8]?, for id: RequestID, request: [UInt8]) {
        guard capacity > 0, place(of: id) == nil else { return }
        if count == capacity { forgetOldest() }
        // The place after the newest: past the end while the ring is still filling (the
        // entries live in one run until it is full), around to the front once it is.
        let entry = Entry(id: id, request: request, reply: kept)
        let next = first + count
        let place: Int
        if next < ring.count {
            place = next
            ring[place] = entry
        } else if ring.count < capacity {
            place = ring.count
            ring.append(entry)
            tags.append(0)
        } else {
            place = next - ring.count
            ring[place] = entry
        }
        tags[place] = Self.tag(id)
        count += 1
        bytes += request.count + (kept?.count ?? 0)
        while bytes > maxBytes && count > 1 { forgetOldest() }
    }

    private mutating func forgetOldest() {
        let oldest = first
        first = (first + 1) % ring.count
        count -= 1
        bytes -= ring[oldest].request.count + (ring[oldest].reply?.count ?? 0)
        // Its bytes let go now, as the dictionary's removal did, not when the place is reused.
        ring[oldest].request = []
        ring[oldest].reply = nil
        tags[oldest] = 0
    }

    /// Where in the ring `id` lives, if it does.
    private func place(of id: RequestID) -> Int? {
        let tag = Self.tag(id)
        for place in tags.indices where tags[place] == tag && ring[place].id == id { return place }
        return nil
    }

    /// A non-zero 32-bit hash of an id: a multiplicative hash of an integer, FNV-1a of a
    /// string's UTF-8 bytes. Equal tags are told apart by comparing the ids, so a client that
    /// picks colliding ids only makes its own session's scans compare more ids, at most
    /// `capacity` of them.
    private static func tag(_ id: RequestID) -> UInt32 {
        switch id {
        case .integer(let value):
            return UInt32(truncatingIfNeeded: (UInt64(bitPattern: value) &* 0x9E37_79B9_7F4A_7C15) >> 32) | 1
        case .string(let text):
            var hash: UInt32 = 2_166_136_261
            for byte in text.utf8 { hash = (hash ^ UInt32(byte)) &* 16_777_619 }
            return hash | 1
        }
    }
}
