import CanvasCore
import CanvasProtocol
import Foundation

/// A session as a shared session store keeps it: everything a client was told, so that another
/// instance that takes the session over answers the next requests exactly as this one would
/// have. That is the canvas (state, drawing with its undo and redo history, pencil set-up and
/// tools, transition under way), the event sequence number, the owner, the document target,
/// the size and image settings, and the reply cache, so that a retry of an answered request is
/// answered from it again instead of running twice. Not kept: the connection that opened it and
/// the idle clock, which belong to the instance.
struct SessionSnapshot: Codable {
    /// Bumped when the encoding changes incompatibly; a snapshot of another format is refused.
    static let currentFormat = 1

    struct Size: Codable { var width: Int, height: Int }
    struct Target: Codable { var name: String, page: Int }
    struct Reply: Codable {
        var id: String?
        var number: Int64?
        var request: Data
        var reply: Data?
    }

    var format: Int
    var id: String
    var owner: String?
    var canvas: CanvasSession
    var transitions: TransitionMode
    var size: Size?
    var resultImages: Bool
    var seq: UInt64
    var target: Target?
    var replies: [Reply]

    init(_ session: ServiceSession) {
        format = Self.currentFormat
        id = session.id
        owner = session.owner
        canvas = session.canvas
        transitions = session.transitions
        size = session.size.map { Size(width: $0.width, height: $0.height) }
        resultImages = session.resultImages
        seq = session.seq
        target = session.target.map { Target(name: $0.name, page: $0.page) }
        replies = session.replies.entries.map { entry in
            switch entry.id {
            case .string(let text): return Reply(id: text, request: Data(entry.request), reply: entry.reply.map { Data($0) })
            case .integer(let number): return Reply(number: number, request: Data(entry.request), reply: entry.reply.map { Data($0) })
            }
        }
    }

    static func encode(_ session: ServiceSession) throws -> [UInt8] {
        Array(try JSONEncoder().encode(SessionSnapshot(session)))
    }

    enum DecodeError: Error, CustomStringConvertible {
        case format(Int)
        case otherSession(String)
        case unreadable(String)
        var description: String {
            switch self {
            case .format(let format): return "snapshot format \(format); this canvasd reads \(SessionSnapshot.currentFormat)"
            case .otherSession(let id): return "the snapshot is of session \(id)"
            case .unreadable(let reason): return reason
            }
        }
    }

    /// The session a snapshot holds, as this instance will run it from `now`.
    static func decode(_ bytes: [UInt8], session id: String, connection: [UInt8]?, now: ContinuousClock.Instant,
                       limits: Limits) throws(DecodeError) -> ServiceSession {
        let snapshot: SessionSnapshot
        do {
            snapshot = try JSONDecoder().decode(SessionSnapshot.self, from: Data(bytes))
        } catch {
            throw .unreadable("\(error)")
        }
        guard snapshot.format == currentFormat else { throw .format(snapshot.format) }
        guard snapshot.id == id else { throw .otherSession(snapshot.id) }
        var replies = ReplyCache(capacity: limits.replyCacheSize, maxReplyBytes: limits.maxCachedReplyBytes,
                                 maxBytes: limits.maxCachedBytesPerSession)
        for entry in snapshot.replies {
            let requestID: RequestID
            if let text = entry.id { requestID = .string(text) } else if let number = entry.number { requestID = .integer(number) } else {
                throw .unreadable("a reply cache entry has no id")
            }
            replies.remember(entry.reply.map { Array($0) }, for: requestID, request: Array(entry.request))
        }
        return ServiceSession(
            id: snapshot.id, owner: snapshot.owner, connection: connection, canvas: snapshot.canvas,
            transitions: snapshot.transitions, size: snapshot.size.map { ($0.width, $0.height) },
            resultImages: snapshot.resultImages, lastActive: now, seq: snapshot.seq, replies: replies,
            target: snapshot.target.map { DocumentTarget(name: $0.name, page: $0.page) })
    }
}
