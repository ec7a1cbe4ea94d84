import CanvasCore
import CanvasProtocol
import DocumentStore
import Foundation
import InkRendering

/// A session as a shared session store keeps it: everything a client was told, so that another
/// instance that takes the session over answers the next requests exactly as this one would
/// have. That is the canvas (state, drawing with its undo and redo history, pencil set-up and
/// tools, transition under way), the event sequence number, the owner, the document target,
/// the size and image settings, a stroke whose first parts came (`continued`, each part
/// acknowledged) waiting for its last, and the reply cache, so that a retry of an answered request is
/// answered from it again instead of running twice. Not kept: the connection that opened it and
/// the idle clock, which belong to the instance.
///
/// Written as `CBS2`, the length of the JSON part (4 bytes, big-endian), the JSON part (this
/// struct, the drawings' history naming its strokes by their place in the stroke table), the
/// length of the stroke table and the table, every stroke of the history as one drawing in the
/// compact ink encoding (`InkSource`: a few bytes a point where base64 of the doubles took 32,
/// and read back far faster than JSON), then the reply cache as binary entries.
/// `CBS1`, written before, is the same without the table, the strokes inside the JSON; it is
/// still read. `protocol/session-store.md` gives the whole layout.
struct SessionSnapshot: Codable {
    /// Bumped when the encoding changes incompatibly; a snapshot of another format is refused.
    static let currentFormat = 1
    static let magic = Array("CBS2".utf8)
    static let magicWithoutTable = Array("CBS1".utf8)
    /// The largest snapshot written or read: a session within every drawing limit, its history
    /// and its reply cache fit several times over.
    static let maxBytes = 64 << 20
    /// The largest event sequence number a snapshot may carry: JSON's exact integers, far
    /// beyond any session's events, and far from the overflow of the counter.
    static let maxSeq: UInt64 = 1 << 53

    struct Size: Codable { var width: Int, height: Int }
    struct Target: Codable {
        var name: String, page: Int
        /// Absent in snapshots written before a page's ink could be reopened, and for a
        /// drawing not reopened.
        var reopened: ReopenedInk?
        /// `InkForm`'s raw value; absent (paper) in snapshots from before annotations.
        var inkForm: String?
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
    /// Absent in snapshots written before strokes in parts were kept, which decode as none.
    var strokeParts: StrokeParts?

    init(_ session: ServiceSession) {
        format = Self.currentFormat
        id = session.id
        owner = session.owner
        canvas = session.canvas
        transitions = session.transitions
        size = session.size.map { Size(width: $0.width, height: $0.height) }
        resultImages = session.resultImages
        seq = session.seq
        target = session.target.map { Target(name: $0.name, page: $0.page, reopened: $0.reopened, inkForm: $0.form == .paper ? nil : $0.form.rawValue) }
        strokeParts = session.strokeParts
    }

    static func encode(_ session: ServiceSession) throws -> [UInt8] {
        // Written in one pass (JSONDecoder reads it back): Foundation's encoder took most of a
        // shared session's write.
        let table = StrokeTable()
        let json = try StreamingJSONEncoder.encode(SessionSnapshot(session), userInfo: [StrokeTable.key: table])
        let ink = InkSource.encode(Drawing(strokes: table.strokes))
        var out = magic
        out.reserveCapacity(json.count + ink.count + 4096)
        append(UInt32(json.count), to: &out)
        out.append(contentsOf: json)
        append(ink, to: &out)
        for entry in session.replies.entries {
            switch entry.id {
            case .integer(let number):
                out.append(0)
                append(UInt64(bitPattern: number), to: &out)
            case .string(let text):
                out.append(1)
                append(Array(text.utf8), to: &out)
            }
            append(entry.request, to: &out)
            if let reply = entry.reply {
                out.append(1)
                append(reply, to: &out)
            } else {
                out.append(0)
            }
        }
        return out
    }

    private static func append<T: FixedWidthInteger>(_ value: T, to out: inout [UInt8]) {
        withUnsafeBytes(of: value.bigEndian) { out.append(contentsOf: $0) }
    }

    private static func append(_ bytes: [UInt8], to out: inout [UInt8]) {
        append(UInt32(bytes.count), to: &out)
        out.append(contentsOf: bytes)
    }

    /// Reads the binary part, every length checked against what is left.
    private struct Reader {
        let bytes: [UInt8]
        var offset: Int

        var atEnd: Bool { offset == bytes.count }

        mutating func take(_ count: Int) throws(DecodeError) -> ArraySlice<UInt8> {
            guard count >= 0, bytes.count - offset >= count else { throw .unreadable("the snapshot ends early") }
            defer { offset += count }
            return bytes[offset..<offset + count]
        }

        mutating func integer<T: FixedWidthInteger>(_: T.Type) throws(DecodeError) -> T {
            try take(MemoryLayout<T>.size).reduce(T.zero) { $0 << 8 | T($1) }
        }

        mutating func block() throws(DecodeError) -> [UInt8] {
            Array(try take(Int(try integer(UInt32.self))))
        }
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

    /// `session` held to what a snapshot of it would be (`check`): a session made by replaying
    /// a log's operations, which anyone who can write to the store can write.
    static func checkLimits(_ session: ServiceSession, _ limits: Limits) throws(DecodeError) {
        try SessionSnapshot(session).check(limits)
    }

    /// Checks what a request would have checked: anyone who can write to the store can write
    /// a snapshot, and this instance will do arithmetic and allocate by what it says.
    private func check(_ limits: Limits) throws(DecodeError) {
        guard seq <= Self.maxSeq else { throw .unreadable("seq \(seq) is past \(Self.maxSeq)") }
        if let size {
            let side = 1...limits.maxImageSide
            guard side.contains(size.width), side.contains(size.height) else {
                throw .unreadable("size \(size.width) × \(size.height) is outside 1...\(limits.maxImageSide)")
            }
        }
        if let target {
            guard target.page >= 0, !target.name.isEmpty, !target.name.contains("/"), target.name.utf8.count <= 255 else {
                throw .unreadable("the document target \(target.name.debugDescription) page \(target.page) is not one a request could name")
            }
            if let form = target.inkForm, InkForm(rawValue: form) == nil {
                throw .unreadable("the document target's ink form \(form.debugDescription) is none this build knows")
            }
            if let reopened = target.reopened {
                let digest = { (text: String) in text.utf8.count == 64 && text.utf8.allSatisfy { (48...57).contains($0) || (97...102).contains($0) } }
                guard reopened.edits.count <= limits.maxPointsPerPage, reopened.edits.allSatisfy(digest), digest(reopened.drawing) else {
                    throw .unreadable("the reopened ink of \(target.name.debugDescription) page \(target.page) is not named by SHA-256 digests")
                }
            }
        }
        let drawing = canvas.drawing
        guard drawing.strokes.count <= limits.maxStrokesPerDrawing, drawing.texts.count <= limits.maxTextsPerDrawing,
              drawing.pointCount <= limits.maxPointsPerDrawing,
              drawing.strokes.allSatisfy({ $0.points.count <= limits.maxPointsPerStroke }),
              drawing.texts.allSatisfy({ $0.text.unicodeScalars.count <= limits.maxTextLength }) else {
            throw .unreadable("the drawing is past the drawing limits")
        }
    }

    /// The session a snapshot holds, as this instance will run it from `now`.
    static func decode(_ bytes: [UInt8], session id: String, connection: [UInt8]?, now: ContinuousClock.Instant,
                       limits: Limits) throws(DecodeError) -> ServiceSession {
        guard bytes.count <= maxBytes else { throw .unreadable("the snapshot is \(bytes.count) bytes; at most \(maxBytes) are read") }
        let tabled = bytes.starts(with: magic)
        guard tabled || bytes.starts(with: magicWithoutTable) else { throw .unreadable("not a session snapshot") }
        var reader = Reader(bytes: bytes, offset: magic.count)
        let json = try reader.block()
        let decoder = JSONDecoder()
        if tabled {
            let ink = try reader.block()
            do {
                // No more points than the JSON form of a snapshot this size could hold (32 bytes a
                // point): a few bytes a point here, so without a bound a snapshot within
                // `maxBytes` could ask for gigabytes of strokes.
                decoder.userInfo[StrokeTable.key] = StrokeTable(strokes: try InkSource.decode(ink, maxPoints: maxBytes / 32).strokes)
            } catch {
                throw .unreadable("the stroke table: \(error)")
            }
        }
        let snapshot: SessionSnapshot
        do {
            snapshot = try decoder.decode(SessionSnapshot.self, from: Data(json))
        } catch {
            throw .unreadable("\(error)")
        }
        guard snapshot.format == currentFormat else { throw .format(snapshot.format) }
        guard snapshot.id == id else { throw .otherSession(snapshot.id) }
        try snapshot.check(limits)
        var replies = ReplyCache(limits: limits)
        while !reader.atEnd {
            let requestID: RequestID
            switch try reader.integer(UInt8.self) {
            case 0: requestID = .integer(Int64(bitPattern: try reader.integer(UInt64.self)))
            case 1: requestID = .string(String(decoding: try reader.block(), as: UTF8.self))
            default: throw .unreadable("a reply cache entry of unknown kind")
            }
            let request = try reader.block()
            let reply: [UInt8]?
            switch try reader.integer(UInt8.self) {
            case 0: reply = nil
            case 1: reply = try reader.block()
            default: throw .unreadable("a reply cache entry of unknown kind")
            }
            replies.remember(reply, for: requestID, request: ReplyCache.storedDigest(request))
        }
        var session = ServiceSession(
            id: snapshot.id, owner: snapshot.owner, connection: connection, canvas: snapshot.canvas,
            transitions: snapshot.transitions, size: snapshot.size.map { ($0.width, $0.height) },
            resultImages: snapshot.resultImages, lastActive: now, seq: snapshot.seq, replies: replies,
            target: snapshot.target.map { DocumentTarget(name: $0.name, page: $0.page, form: $0.inkForm.flatMap(InkForm.init) ?? .paper, reopened: $0.reopened) })
        session.strokeParts = snapshot.strokeParts
        return session
    }
}
