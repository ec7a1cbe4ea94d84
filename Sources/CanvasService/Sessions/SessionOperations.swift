import CanvasCore
import CanvasProtocol
import Foundation
import InkRendering
import SessionStore

/// A change to a shared session as the operations that made it: what its holder appends to the
/// session's log in the store (`OperationEntry`) instead of encoding the session whole. Each
/// operation is one the service did to the session (`ServiceSession`'s journaled methods), and
/// another instance replays it through the same methods on the session before it, so the session
/// it makes is the one acknowledged. `protocol/session-store.md` gives the bytes.
enum SessionOperation: Sendable {
    /// A drawing edit the canvas took (edits it refused change nothing and are not kept).
    case edit(DrawingEdit)
    /// A canvas command that ran.
    case canvas(CanvasStep)
    case doubleTap
    case initialize
    case configurePencil(PencilConfiguration)
    /// A reply remembered in the reply cache: its request's digest and the reply, or nil when
    /// it was too large to keep, or `.edit` when it is the reply `CanvasMethods` writes for the
    /// edit just before it (most of them: made again by the replay rather than stored).
    case reply(id: RequestID, digest: [UInt8], kept: KeptReply)
    /// The stroke parts waiting, now.
    case strokeParts(StrokeParts?)
    /// The document target let go (an end other than a minimize).
    case leaveTarget

    /// About what it costs written, in bytes; nil when it cannot be written (the session is
    /// then written whole).
    var approximateBytes: Int? {
        switch self {
        case .edit(.addStroke(let stroke, _)): return 32 + 8 * stroke.points.count
        case .edit(.addText(let text)): return 64 + text.text.utf8.count
        case .edit(.editText(_, let change)): return 64 + (change.text?.utf8.count ?? 0)
        case .edit: return 32
        case .canvas, .doubleTap, .initialize, .leaveTarget: return 8
        case .configurePencil(let configuration): return (try? StreamingJSONEncoder.encode(configuration)).map { 8 + $0.count }
        case .reply(_, _, .bytes(let reply)): return 48 + reply.count
        case .reply: return 48
        case .strokeParts(nil): return 8
        case .strokeParts(let parts?): return parts.points.isEmpty ? nil : 32 + 8 * parts.points.count
        }
    }

    enum KeptReply: Sendable, Equatable {
        case none
        case bytes([UInt8])
        case edit(changed: Bool)
    }
}

/// The canvas commands a session's log keeps: each `CanvasSession` command with what it was
/// given. An open that loads a page's ink is not one of them (it is written whole).
enum CanvasStep: Sendable, Equatable {
    case open
    case minimize
    case submit(savingFirst: Bool)
    case saved(Bool)
    case cancel
    case finishTransition(TransitionTicket?)

    func run(on canvas: inout CanvasSession) throws(CanvasRejection) -> [CanvasAction] {
        switch self {
        case .open: return try canvas.open()
        case .minimize: return try canvas.minimize()
        case .submit(let savingFirst): return try canvas.submit(savingFirst: savingFirst)
        case .saved(let made): return try canvas.saved(made)
        case .cancel: return try canvas.cancel()
        case .finishTransition(let ticket): return try canvas.finishTransition(ticket)
        }
    }
}

/// A log entry's operations, and what the session looked like after them, as bytes: the head
/// (`OperationEntry.head`), then LEB128 numbers: the event sequence number after, the count of
/// operations, each operation (a tag and its fields), then the check: strokes, texts and points
/// of the drawing, whether it can undo and redo, and the phase; last, 8 bytes of FNV-1a (64
/// bits, little-endian) of every byte before, so an entry damaged anywhere is refused whole
/// rather than replayed into another session.
enum OperationLog {
    /// What replaying an entry found wrong.
    struct Refusal: Error, CustomStringConvertible {
        let reason: String
        init(_ reason: String) { self.reason = reason }
        var description: String { "an operation entry refused: \(reason)" }
    }

    static func encode(_ operations: [SessionOperation], version: UInt64, after session: ServiceSession) -> [UInt8] {
        var out = Writer(bytes: OperationEntry.head(version: version))
        out.number(session.seq)
        out.number(UInt64(operations.count))
        for operation in operations { out.operation(operation) }
        out.check(session)
        let sum = InkSource.checksum(out.bytes[...])
        withUnsafeBytes(of: sum.littleEndian) { out.bytes.append(contentsOf: $0) }
        return out.bytes
    }

    /// Replays `entry` on `session` (the session at the version before it), through the same
    /// methods that made it live, and checks that what it made looks like what was written.
    /// `bounds`: what the drawing is held to, as it was when the edits were made live (so a log
    /// written by hand cannot grow a drawing past them on the way).
    static func replay(_ entry: [UInt8], on session: inout ServiceSession, within bounds: DrawingBounds) throws(Refusal) {
        let body: Int
        do {
            body = try OperationEntry.version(of: entry).body
        } catch {
            throw Refusal(error.reason)
        }
        guard entry.count >= body + 8 else { throw Refusal("it ends early") }
        let written = entry[(entry.count - 8)...].reversed().reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        guard written == InkSource.checksum(entry[..<(entry.count - 8)]) else { throw Refusal("its checksum does not match its bytes") }
        var input = Reader(bytes: Array(entry[..<(entry.count - 8)]), offset: body)
        let seq = try input.number()
        guard seq <= SessionSnapshot.maxSeq else { throw Refusal("seq \(seq)") }
        let count = try input.number()
        // Each operation takes at least a byte.
        guard count <= UInt64(entry.count) else { throw Refusal("\(count) operations in \(entry.count) bytes") }
        // A reply in its edit form is made from the edit just before it, in this entry.
        var edited = false
        for _ in 0..<count {
            switch try input.operation() {
            case .edit(let edit):
                do {
                    _ = try session.edit(edit, within: bounds)
                    edited = true
                } catch {
                    throw Refusal("the edit was refused on replay: \(error)")
                }
            case .canvas(let step):
                do {
                    _ = try session.run(step)
                } catch {
                    throw Refusal("\(step) was refused on replay: \(error)")
                }
            case .doubleTap:
                _ = session.doubleTap()
            case .initialize:
                session.initializePencil()
            case .configurePencil(let configuration):
                session.configurePencil(configuration)
            case .reply(let id, let digest, let kept):
                let reply: [UInt8]?
                switch kept {
                case .none: reply = nil
                case .bytes(let bytes): reply = bytes
                case .edit(let changed):
                    guard edited else { throw Refusal("an edit's reply with no edit before it") }
                    reply = ReplyEncoder.success(id: id, result: CanvasMethods.editResult(changed: changed, session.canvas))
                }
                session.remember(reply, for: id, digest: digest)
            case .strokeParts(let parts):
                session.strokeParts = parts
            case .leaveTarget:
                session.leaveTarget()
            }
        }
        session.seq = seq
        let made = Writer.checkBytes(session)
        guard input.bytes.count - input.offset == made.count, input.bytes[input.offset...].elementsEqual(made) else {
            throw Refusal("the session replayed is not the one written (strokes, texts, points, history or phase differ)")
        }
    }

    /// The `.edit` form of a reply, when `reply` is exactly what replaying would write for it.
    static func keptForm(_ reply: [UInt8], id: RequestID, after canvas: CanvasSession) -> SessionOperation.KeptReply {
        for changed in [true, false] where ReplyEncoder.success(id: id, result: CanvasMethods.editResult(changed: changed, canvas)) == reply {
            return .edit(changed: changed)
        }
        return .bytes(reply)
    }

    // MARK: Bytes

    private enum Tag: UInt8 {
        case addStroke = 1, addText, moveText, editText, erase, clear, undo, redo
        case open = 16, minimize, submit, saved, cancel, finishTransition, doubleTap, initialize, configurePencil
        case reply = 32, strokeParts, leaveTarget
    }

    private struct Writer {
        var bytes: [UInt8]

        mutating func number(_ value: UInt64) { LEB128.append(value, to: &bytes) }

        mutating func double(_ value: Double) {
            withUnsafeBytes(of: value.bitPattern.littleEndian) { bytes.append(contentsOf: $0) }
        }

        mutating func block(_ block: [UInt8]) {
            number(UInt64(block.count))
            bytes.append(contentsOf: block)
        }

        mutating func string(_ text: String) { block(Array(text.utf8)) }

        mutating func tag(_ tag: Tag) { bytes.append(tag.rawValue) }

        /// A stroke or text as the compact ink encoding has it (`InkSource`): every number bit for bit.
        mutating func ink(_ drawing: Drawing) { block(InkSource.encode(drawing)) }

        mutating func operation(_ operation: SessionOperation) {
            switch operation {
            case .edit(let edit):
                switch edit {
                case .addStroke(let stroke, let joining):
                    tag(.addStroke)
                    bytes.append(joining ? 1 : 0)
                    ink(Drawing(strokes: [stroke]))
                case .addText(let text):
                    tag(.addText)
                    ink(Drawing(texts: [text]))
                case .moveText(let index, let x, let y):
                    tag(.moveText)
                    number(UInt64(index))
                    double(x)
                    double(y)
                case .editText(let index, let change):
                    tag(.editText)
                    number(UInt64(index))
                    let fields: [Double?] = [change.x, change.y, change.dx, change.dy, change.fontSize]
                    var present: UInt8 = 0
                    for (bit, field) in fields.enumerated() where field != nil { present |= 1 << bit }
                    if change.color != nil { present |= 1 << 5 }
                    if change.text != nil { present |= 1 << 6 }
                    bytes.append(present)
                    for field in fields { if let field { double(field) } }
                    if let color = change.color { string(color.rawValue) }
                    if let text = change.text { string(text) }
                case .erase(let request):
                    tag(.erase)
                    double(request.x)
                    double(request.y)
                    double(request.radius)
                    switch request.mode {
                    case .stroke: bytes.append(0)
                    case .partial: bytes.append(1)
                    }
                case .clear: tag(.clear)
                case .undo: tag(.undo)
                case .redo: tag(.redo)
                }
            case .canvas(let step):
                switch step {
                case .open: tag(.open)
                case .minimize: tag(.minimize)
                case .submit(let savingFirst):
                    tag(.submit)
                    bytes.append(savingFirst ? 1 : 0)
                case .saved(let made):
                    tag(.saved)
                    bytes.append(made ? 1 : 0)
                case .cancel: tag(.cancel)
                case .finishTransition(let ticket):
                    tag(.finishTransition)
                    if let ticket {
                        bytes.append(1)
                        number(ticket.number)
                    } else {
                        bytes.append(0)
                    }
                }
            case .doubleTap: tag(.doubleTap)
            case .initialize: tag(.initialize)
            case .configurePencil(let configuration):
                tag(.configurePencil)
                // Rare and small: its own Codable form, so a field added there is kept here.
                block((try? StreamingJSONEncoder.encode(configuration)) ?? [])
            case .reply(let id, let digest, let kept):
                tag(.reply)
                switch id {
                case .integer(let value):
                    bytes.append(0)
                    number(UInt64(bitPattern: value))
                case .string(let text):
                    bytes.append(1)
                    string(text)
                }
                block(digest)
                switch kept {
                case .none: bytes.append(0)
                case .bytes(let reply):
                    bytes.append(1)
                    block(reply)
                case .edit(let changed): bytes.append(changed ? 3 : 2)
                }
            case .strokeParts(let parts):
                tag(.strokeParts)
                guard let parts else {
                    bytes.append(0)
                    return
                }
                bytes.append(parts.joined ? 2 : 1)
                // Waiting parts always hold a point: the first part brought at least one.
                if let stroke = try? Stroke(tool: parts.tool, color: parts.color, width: parts.width, points: parts.points) {
                    ink(Drawing(strokes: [stroke]))
                } else {
                    block([])
                }
            case .leaveTarget: tag(.leaveTarget)
            }
        }

        mutating func check(_ session: ServiceSession) { bytes.append(contentsOf: Self.checkBytes(session)) }

        static func checkBytes(_ session: ServiceSession) -> [UInt8] {
            var out = Writer(bytes: [])
            let drawing = session.canvas.drawing
            out.number(UInt64(drawing.strokes.count))
            out.number(UInt64(drawing.texts.count))
            out.number(UInt64(drawing.pointCount))
            let history = session.canvas.canvas.editableDrawing
            out.bytes.append((history?.canUndo ?? false ? 1 : 0) | (history?.canRedo ?? false ? 2 : 0))
            out.string(session.canvas.phase.rawValue)
            return out.bytes
        }
    }

    private struct Reader {
        let bytes: [UInt8]
        var offset: Int

        mutating func byte() throws(Refusal) -> UInt8 {
            guard offset < bytes.count else { throw Refusal("it ends early") }
            defer { offset += 1 }
            return bytes[offset]
        }

        mutating func number() throws(Refusal) -> UInt64 {
            guard let value = LEB128.read(bytes, at: &offset) else { throw Refusal("a number cut short or past 64 bits") }
            return value
        }

        mutating func count() throws(Refusal) -> Int {
            let value = try number()
            guard value <= UInt64(bytes.count) else { throw Refusal("a length of \(value) in \(bytes.count) bytes") }
            return Int(value)
        }

        mutating func double() throws(Refusal) -> Double {
            guard bytes.count - offset >= 8 else { throw Refusal("it ends early") }
            var bits: UInt64 = 0
            for index in (0..<8).reversed() { bits = bits << 8 | UInt64(bytes[offset + index]) }
            offset += 8
            return Double(bitPattern: bits)
        }

        mutating func block() throws(Refusal) -> [UInt8] {
            let count = try count()
            guard bytes.count - offset >= count else { throw Refusal("it ends early") }
            defer { offset += count }
            return Array(bytes[offset..<offset + count])
        }

        mutating func string() throws(Refusal) -> String { String(decoding: try block(), as: UTF8.self) }

        mutating func ink() throws(Refusal) -> Drawing {
            do {
                // The entry's checksum, checked before it is read, covers these bytes.
                return try InkSource.decode(try block(), checkingSum: false)
            } catch let refusal as Refusal {
                throw refusal
            } catch {
                throw Refusal("its ink: \(error)")
            }
        }

        mutating func flag() throws(Refusal) -> Bool {
            switch try byte() {
            case 0: return false
            case 1: return true
            case let other: throw Refusal("a flag of \(other)")
            }
        }

        mutating func operation() throws(Refusal) -> SessionOperation {
            let raw = try byte()
            guard let tag = Tag(rawValue: raw) else { throw Refusal("operation \(raw)") }
            switch tag {
            case .addStroke:
                let joining = try flag()
                let drawing = try ink()
                guard drawing.strokes.count == 1, drawing.texts.isEmpty else { throw Refusal("a stroke's ink holds \(drawing.strokes.count) strokes") }
                return .edit(.addStroke(drawing.strokes[0], joiningLastStep: joining))
            case .addText:
                let drawing = try ink()
                guard drawing.texts.count == 1, drawing.strokes.isEmpty else { throw Refusal("a text's ink holds \(drawing.texts.count) texts") }
                return .edit(.addText(drawing.texts[0]))
            case .moveText:
                let index = try count()
                return .edit(.moveText(index: index, x: try double(), y: try double()))
            case .editText:
                let index = try count()
                let present = try byte()
                guard present < 1 << 7 else { throw Refusal("text change fields \(present)") }
                var fields: [Double?] = []
                for bit in 0..<5 { fields.append(present & 1 << bit != 0 ? try double() : nil) }
                var color: InkColor?
                if present & 1 << 5 != 0 {
                    do {
                        color = try InkColor(try string())
                    } catch let refusal as Refusal {
                        throw refusal
                    } catch {
                        throw Refusal("a text's colour: \(error)")
                    }
                }
                let text = present & 1 << 6 != 0 ? try string() : nil
                return .edit(.editText(index: index, TextChange(x: fields[0], y: fields[1], dx: fields[2], dy: fields[3], fontSize: fields[4],
                                                                color: color, text: text)))
            case .erase:
                let x = try double(), y = try double(), radius = try double()
                let mode: EraseMode = try flag() ? .partial : .stroke
                do {
                    return .edit(.erase(try EraseRequest(x: x, y: y, radius: radius, mode: mode)))
                } catch {
                    throw Refusal("an erase: \(error)")
                }
            case .clear: return .edit(.clear)
            case .undo: return .edit(.undo)
            case .redo: return .edit(.redo)
            case .open: return .canvas(.open)
            case .minimize: return .canvas(.minimize)
            case .submit: return .canvas(.submit(savingFirst: try flag()))
            case .saved: return .canvas(.saved(try flag()))
            case .cancel: return .canvas(.cancel)
            case .finishTransition:
                return .canvas(.finishTransition(try flag() ? TransitionTicket(number: try number()) : nil))
            case .doubleTap: return .doubleTap
            case .initialize: return .initialize
            case .configurePencil:
                do {
                    return .configurePencil(try JSONDecoder().decode(PencilConfiguration.self, from: Data(try block())))
                } catch let refusal as Refusal {
                    throw refusal
                } catch {
                    throw Refusal("a pencil configuration: \(error)")
                }
            case .reply:
                let id: RequestID = try flag() ? .string(try string()) : .integer(Int64(bitPattern: try number()))
                let digest = try block()
                let kept: SessionOperation.KeptReply
                switch try byte() {
                case 0: kept = .none
                case 1: kept = .bytes(try block())
                case 2: kept = .edit(changed: false)
                case 3: kept = .edit(changed: true)
                case let other: throw Refusal("a reply kept as \(other)")
                }
                return .reply(id: id, digest: digest, kept: kept)
            case .strokeParts:
                let kind = try byte()
                guard kind != 0 else { return .strokeParts(nil) }
                guard kind <= 2 else { throw Refusal("stroke parts of kind \(kind)") }
                let drawing = try ink()
                guard drawing.strokes.count == 1, let stroke = drawing.strokes.first else { throw Refusal("stroke parts hold \(drawing.strokes.count) strokes") }
                return .strokeParts(StrokeParts(tool: stroke.tool, color: stroke.color, width: stroke.width, joined: kind == 2, points: stroke.points))
            case .leaveTarget: return .leaveTarget
            }
        }
    }
}
