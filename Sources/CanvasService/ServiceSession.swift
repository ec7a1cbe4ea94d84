import CanvasCore
import CanvasProtocol

/// One session as the service holds it: the pure canvas session plus what the wire needs.
struct ServiceSession {
    let id: String
    /// The authenticated client (its CurveZMQ public key) that opened it; nil without
    /// authentication, where every local client may use every session.
    let owner: String?
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

    mutating func nextSeq() -> UInt64 {
        seq += 1
        return seq
    }
}

/// A document page that a session's drawing is for.
struct DocumentTarget: Sendable {
    let name: String
    let page: Int
}

/// The last few replies of a session by request id, oldest forgotten first, each with the
/// request it answered, so a reused id on a different request is told apart from a retry.
struct ReplyCache {
    private var replies: [RequestID: (request: [UInt8], reply: [UInt8])] = [:]
    private var order: [RequestID] = []
    let capacity: Int

    init(capacity: Int) { self.capacity = capacity }

    enum Lookup {
        case miss
        case retry(reply: [UInt8])
        case reused
    }

    func lookup(_ id: RequestID, request: [UInt8]) -> Lookup {
        guard let entry = replies[id] else { return .miss }
        return entry.request == request ? .retry(reply: entry.reply) : .reused
    }

    mutating func store(_ reply: [UInt8], for id: RequestID, request: [UInt8]) {
        guard capacity > 0, replies.updateValue((request, reply), forKey: id) == nil else { return }
        order.append(id)
        if order.count > capacity { replies[order.removeFirst()] = nil }
    }
}
