/// One change a client can make to an open drawing.
public enum DrawingEdit: Hashable, Sendable {
    /// With `joiningLastStep`, the stroke goes into the last undo step instead of one of its
    /// own, so the strokes one gesture was sent as are undone and redone together; refused
    /// unless it continues the last stroke (`StrokeJoinRefusal`).
    case addStroke(Stroke, joiningLastStep: Bool = false)
    case addText(TextAnnotation)
    /// Moves text number `index` (in `Drawing.texts`) so its corner is at (x, y).
    case moveText(index: Int, x: Double, y: Double)
    /// Moves, nudges, resizes, recolours or rewrites text number `index`.
    case editText(index: Int, TextChange)
    case erase(EraseRequest)
    case clear
    case undo
    case redo
}

/// An edit that names something the drawing does not have.
public enum DrawingEditError: Error, Hashable, Sendable, CustomStringConvertible {
    case noSuchText(index: Int, count: Int)
    case invalid(DrawingValidationError)
    /// The drawing the edit would make has `size` strokes, points or texts (`field`), more
    /// than `limit` (`DrawingBounds`).
    case overLimit(field: String, size: Int, limit: Int)
    case cannotJoin(StrokeJoinRefusal)

    public var description: String {
        switch self {
        case .cannotJoin(let refusal): return "\(refusal); nothing was changed"
        case .noSuchText(let index, let count): return "there is no text \(index); the drawing has \(count)"
        case .invalid(let error): return error.description
        case .overLimit(let field, let size, let limit):
            return "the edit would leave the drawing with \(size) \(field), over the limit of \(limit); nothing was changed"
        }
    }
}

/// A drawing with its undo and redo history.
///
/// History is kept as whole snapshots: `Drawing` is a value whose arrays share storage, so a
/// snapshot costs one array of references, and undo can never disagree with what was drawn.
public struct EditableDrawing: Hashable, Sendable {
    public private(set) var drawing: Drawing
    private var undoStack: [Drawing] = []
    private var redoStack: [Drawing] = []
    /// How many steps undo can go back; the oldest is forgotten beyond it.
    public let historyLimit: Int

    public static let defaultHistoryLimit = 256

    public init(_ drawing: Drawing = .empty, historyLimit: Int = EditableDrawing.defaultHistoryLimit) {
        precondition(historyLimit >= 0, "history limit cannot be negative")
        self.drawing = drawing
        self.historyLimit = historyLimit
    }

    public var canUndo: Bool { !undoStack.isEmpty }
    public var canRedo: Bool { !redoStack.isEmpty }

    /// Applies an edit. Returns whether the drawing changed; an edit that changes nothing
    /// (undo with no history, erase over empty paper, clear on a blank page) leaves the
    /// history as it was. An edit whose drawing would pass `bounds` is refused and changes
    /// nothing (undo and redo only go back to drawings that were once accepted).
    @discardableResult
    public mutating func apply(_ edit: DrawingEdit, within bounds: DrawingBounds = .unbounded) throws(DrawingEditError) -> Bool {
        switch edit {
        case .undo:
            guard let previous = undoStack.popLast() else { return false }
            redoStack.append(drawing)
            drawing = previous
            return true
        case .redo:
            guard let next = redoStack.popLast() else { return false }
            undoStack.append(drawing)
            drawing = next
            return true
        case .addStroke(let stroke, let joining):
            var next = drawing
            next.strokes.append(stroke)
            guard joining else {
                try record(next, within: bounds)
                return true
            }
            if let refusal = joinRefusal(stroke) { throw .cannotJoin(refusal) }
            if let refusal = bounds.refusal(next, after: drawing) { throw refusal }
            // The step's drawing from before stays on top of the undo stack, so undo goes back
            // past the whole gesture; redo is empty already (`joinRefusal`).
            drawing = next
        case .addText(let text):
            var next = drawing
            next.texts.append(text)
            try record(next, within: bounds)
        case .moveText(let index, let x, let y):
            guard drawing.texts.indices.contains(index) else {
                throw .noSuchText(index: index, count: drawing.texts.count)
            }
            var next = drawing
            do {
                next.texts[index] = try drawing.texts[index].placed(x: x, y: y)
            } catch {
                throw .invalid(error)
            }
            guard next != drawing else { return false }
            record(next)
        case .editText(let index, let change):
            guard drawing.texts.indices.contains(index) else {
                throw .noSuchText(index: index, count: drawing.texts.count)
            }
            var next = drawing
            do {
                next.texts[index] = try drawing.texts[index].changed(change)
            } catch {
                throw .invalid(error)
            }
            guard next != drawing else { return false }
            record(next)
        case .erase(let request):
            let (next, touched) = drawing.erasing(request)
            guard touched > 0 else { return false }
            try record(next, within: bounds)
        case .clear:
            guard drawing.hasContent else { return false }
            record(.empty)
        }
        return true
    }

    /// Why `stroke` cannot join the last undo step, or nil when it can. Worked out from the
    /// history itself: the last step added strokes when the drawing is the one before it with
    /// strokes appended and nothing else changed (no other edit leaves that: an erase removes
    /// or shortens, a text edit changes texts, a clear empties), so a restored session, whose
    /// history is its drawings, joins as the one it was stored from did.
    public func joinRefusal(_ stroke: Stroke) -> StrokeJoinRefusal? {
        guard redoStack.isEmpty else { return .undone }
        guard let before = undoStack.last, let last = drawing.strokes.last,
              drawing.strokes.count > before.strokes.count, drawing.texts == before.texts,
              drawing.strokes[..<before.strokes.count].elementsEqual(before.strokes) else { return .notAfterStroke }
        guard stroke.sameStyle(as: last) else { return .style }
        guard stroke.points.first == last.points.last else { return .gap }
        return nil
    }

    private mutating func record(_ next: Drawing, within bounds: DrawingBounds) throws(DrawingEditError) {
        if let refusal = bounds.refusal(next, after: drawing) { throw refusal }
        record(next)
    }

    private mutating func record(_ next: Drawing) {
        undoStack.append(drawing)
        if undoStack.count > historyLimit { undoStack.removeFirst(undoStack.count - historyLimit) }
        redoStack.removeAll()
        drawing = next
    }
}

/// Where an encoder puts the strokes of the drawings it encodes, and a decoder finds them, when
/// the strokes are kept outside the JSON in a compact form of their own (a shared session's
/// snapshot keeps them as one encoded drawing beside its JSON: as JSON, base64 of every point's
/// doubles, they were most of its bytes and most of the time taken to read it back). Given in
/// `userInfo` under `key`; without it, strokes are written into the JSON as before.
public final class StrokeTable: @unchecked Sendable {
    // @unchecked: filled by one encoder, or read by one decoder, on one thread.
    public private(set) var strokes: [Stroke]

    public static let key = CodingUserInfoKey(rawValue: "canvas.strokeTable")!

    public init(strokes: [Stroke] = []) { self.strokes = strokes }

    func add(_ more: [Stroke]) -> Int {
        defer { strokes += more }
        return strokes.count
    }
}

/// The drawing and its whole history, with each stroke and text written once: the versions in
/// the history share most of their strokes, so writing each version in full would grow with
/// the square of the edits. A version is its strokes and texts as indexes into the two tables,
/// each list written as a change from the version before it in the chain undo (oldest first),
/// current, redo (next first): how many of the previous list it keeps, then what follows. An
/// edit appends, or changes near the end, so each version costs a few numbers.
extension EditableDrawing: Codable {
    private enum CodingKeys: String, CodingKey { case strokes, strokeTable, strokeCount, texts, drawing, undo, redo, historyLimit }

    /// Indexes of one version's strokes (`s`) and texts (`t`).
    private struct Version {
        var s: [Int]
        var t: [Int]
    }

    /// A list as the previous one's first `keep` elements, then `add`.
    private struct Delta: Codable {
        var keep: Int
        var add: [Int]

        func apply(to previous: [Int]) -> [Int]? {
            guard keep >= 0, keep <= previous.count else { return nil }
            return Array(previous[..<keep]) + add
        }
    }

    private struct VersionDelta: Codable {
        var s: Delta
        var t: Delta
    }

    public func encode(to encoder: any Encoder) throws {
        // Each version against the one before it in the chain: the common prefix is found with
        // `==`, which for strokes that share storage (as versions do) is an identity check, so
        // no stroke is hashed or compared point by point; what follows is added to the tables.
        var strokes: [Stroke] = [], texts: [TextAnnotation] = []
        var previous = Version(s: [], t: []), previousDrawing = Drawing.empty
        func delta<Element: Equatable>(_ list: [Element], after old: [Element], oldIndexes: [Int],
                                       table: inout [Element]) -> (Delta, [Int]) {
            var keep = 0
            while keep < list.count && keep < old.count && list[keep] == old[keep] { keep += 1 }
            var add: [Int] = []
            add.reserveCapacity(list.count - keep)
            for element in list[keep...] {
                table.append(element)
                add.append(table.count - 1)
            }
            return (Delta(keep: keep, add: add), Array(oldIndexes[..<keep]) + add)
        }
        func delta(_ drawing: Drawing) -> VersionDelta {
            let (s, strokeIndexes) = delta(drawing.strokes, after: previousDrawing.strokes, oldIndexes: previous.s, table: &strokes)
            let (t, textIndexes) = delta(drawing.texts, after: previousDrawing.texts, oldIndexes: previous.t, table: &texts)
            previous = Version(s: strokeIndexes, t: textIndexes)
            previousDrawing = drawing
            return VersionDelta(s: s, t: t)
        }
        let undo = undoStack.map(delta), current = delta(drawing), redo = redoStack.reversed().map(delta)
        var container = encoder.container(keyedBy: CodingKeys.self)
        if let table = encoder.userInfo[StrokeTable.key] as? StrokeTable {
            try container.encode(table.add(strokes), forKey: .strokeTable)
            try container.encode(strokes.count, forKey: .strokeCount)
        } else {
            try container.encode(strokes.map(StrokeArchive.init), forKey: .strokes)
        }
        try container.encode(texts, forKey: .texts)
        try container.encode(undo, forKey: .undo)
        try container.encode(current, forKey: .drawing)
        try container.encode(redo, forKey: .redo)
        try container.encode(historyLimit, forKey: .historyLimit)
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        let strokes: [Stroke]
        if container.contains(.strokeTable) {
            let start = try container.decode(Int.self, forKey: .strokeTable), count = try container.decode(Int.self, forKey: .strokeCount)
            guard let table = decoder.userInfo[StrokeTable.key] as? StrokeTable else {
                throw DecodingError.dataCorruptedError(forKey: .strokeTable, in: container, debugDescription: "strokes kept in a table, and no table given")
            }
            guard start >= 0, count >= 0, start <= table.strokes.count, count <= table.strokes.count - start else {
                throw DecodingError.dataCorruptedError(forKey: .strokeTable, in: container,
                                                       debugDescription: "strokes \(start) + \(count) of a table of \(table.strokes.count)")
            }
            strokes = Array(table.strokes[start..<start + count])
        } else {
            do {
                strokes = try container.decode([StrokeArchive].self, forKey: .strokes).map { try $0.stroke() }
            } catch let error as DrawingValidationError {
                throw DecodingError.dataCorruptedError(forKey: .strokes, in: container, debugDescription: error.description)
            }
        }
        let texts = try container.decode([TextAnnotation].self, forKey: .texts)
        var previous = Version(s: [], t: [])
        func drawing(_ delta: VersionDelta) throws -> Drawing {
            guard let s = delta.s.apply(to: previous.s), let t = delta.t.apply(to: previous.t),
                  s.allSatisfy(strokes.indices.contains), t.allSatisfy(texts.indices.contains) else {
                throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath,
                                                        debugDescription: "a version names a stroke or text that is not in the tables"))
            }
            previous = Version(s: s, t: t)
            return Drawing(strokes: s.map { strokes[$0] }, texts: t.map { texts[$0] })
        }
        let limit = try container.decode(Int.self, forKey: .historyLimit)
        // A stored session is read back from wherever it was kept: a history longer than any
        // this code keeps is refused, not allocated.
        guard (0...Self.defaultHistoryLimit).contains(limit) else {
            throw DecodingError.dataCorruptedError(forKey: .historyLimit, in: container, debugDescription: "history limit \(limit) outside 0...\(Self.defaultHistoryLimit)")
        }
        let undoDeltas = try container.decode([VersionDelta].self, forKey: .undo)
        let redoDeltas = try container.decode([VersionDelta].self, forKey: .redo)
        guard undoDeltas.count <= limit, redoDeltas.count <= limit else {
            throw DecodingError.dataCorruptedError(forKey: .undo, in: container, debugDescription: "more history than its limit of \(limit)")
        }
        let undo = try undoDeltas.map(drawing)
        let current = try drawing(container.decode(VersionDelta.self, forKey: .drawing))
        let redo = try redoDeltas.map(drawing)
        self.init(current, historyLimit: limit)
        undoStack = undo
        redoStack = redo.reversed()
    }
}
