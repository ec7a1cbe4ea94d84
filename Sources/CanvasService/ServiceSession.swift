import CanvasCore
import CanvasProtocol

/// One session as the service holds it: the pure canvas session plus what the wire needs.
struct ServiceSession {
    let id: String
    /// The authenticated client (its CurveZMQ public key) that opened it; nil without
    /// authentication, where every local client may use every session.
    let owner: String?
    /// The connection (routing id) that opened it, which counts toward the per-client limit
    /// when clients are not authenticated.
    var connection: [UInt8]? = nil
    var canvas: CanvasSession
    let transitions: TransitionMode
    /// The canvas size for images, when the client gave one.
    var size: (width: Int, height: Int)?
    /// Whether `canvas.result` events carry the PNG too (results the pencil causes have no
    /// request to ask for one).
    let resultImages: Bool
    var lastActive: ContinuousClock.Instant
    /// The last event's sequence number; the first event is 1.
    var seq: UInt64 = 0
    var replies: ReplyCache
    /// Where a submit puts the drawing, when `canvas.open` named a document.
    var target: DocumentTarget?
    /// A stroke whose first parts came (`continued`), waiting for its last.
    var strokeParts: StrokeParts?
    /// With a shared session store: the version of this session's last snapshot there, and
    /// when it was written or its lease renewed.
    var storedVersion: UInt64 = 0
    var storedAt: ContinuousClock.Instant? = nil

    mutating func nextSeq() -> UInt64 {
        seq += 1
        return seq
    }
}

/// A document page that a session's drawing is for.
struct DocumentTarget: Sendable {
    let name: String
    let page: Int

    /// Names compare by their bytes, as the file system does: "é" written precomposed or as
    /// e and an accent are two files, though Swift's == calls the strings equal.
    func isPage(_ page: Int, of name: String) -> Bool {
        self.page == page && self.name.utf8.elementsEqual(name.utf8)
    }
}

/// The last few replies of a session by request id, oldest forgotten first, each with the
/// request it answered, so a reused id on a different request is told apart from a retry.
struct ReplyCache {
    /// What a retry must repeat: `{"method":…,"params":…}` as `JSONCodec.serialize` writes it
    /// (keys sorted, numbers in one form), written directly instead of building that object.
    static func fingerprint(_ request: Request) -> [UInt8] {
        var out = JSONText(capacity: 64)
        out.raw(#"{"method":"#); out.string(request.method)
        out.raw(#","params":"#); out.value(.object(request.params))
        out.raw("}")
        return out.bytes
    }


    /// A remembered reply, or nil for one too large to keep.
    private var replies: [RequestID: (request: [UInt8], reply: [UInt8]?)] = [:]
    /// The ids remembered, oldest first, as a ring: the live ones are
    /// `order[(first + i) % order.count]` for `i < replies.count`. A request with a new id
    /// forgets the oldest, and this way nothing moves (an array's `removeFirst` shifted all
    /// the other ids, every request).
    private var order: [RequestID] = []
    private var first = 0
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

    func lookup(_ id: RequestID, request: [UInt8]) -> Lookup {
        guard let entry = replies[id] else { return .miss }
        guard entry.request == request else { return .reused }
        return entry.reply.map { .retry(reply: $0) } ?? .notKept
    }

    mutating func store(_ reply: [UInt8], for id: RequestID, request: [UInt8]) {
        remember(reply.count <= maxReplyBytes ? reply : nil, for: id, request: request)
    }

    /// What is remembered, oldest first (nil: answered, the reply too large to keep).
    var entries: [(id: RequestID, request: [UInt8], reply: [UInt8]?)] {
        (0..<replies.count).compactMap { index in
            let id = order[(first + index) % order.count]
            return replies[id].map { (id, $0.request, $0.reply) }
        }
    }

    /// Remembers an entry as `entries` gave it, for a session restored from a snapshot.
    mutating func remember(_ kept: [UInt8]?, for id: RequestID, request: [UInt8]) {
        guard capacity > 0, replies[id] == nil else { return }
        if replies.count == capacity { forgetOldest() }
        // The place after the newest: past the end while the ring is still filling (the ids
        // live in one run until it is full), around to the front once it is.
        let next = first + replies.count
        if next < order.count {
            order[next] = id
        } else if order.count < capacity {
            order.append(id)
        } else {
            order[next - order.count] = id
        }
        replies[id] = (request, kept)
        bytes += request.count + (kept?.count ?? 0)
        while bytes > maxBytes && replies.count > 1 { forgetOldest() }
    }

    private mutating func forgetOldest() {
        let oldest = order[first]
        first = (first + 1) % order.count
        if let entry = replies.removeValue(forKey: oldest) { bytes -= entry.request.count + (entry.reply?.count ?? 0) }
    }
}
