/// One change a client can make to an open drawing.
public enum DrawingEdit: Hashable, Sendable {
    case addStroke(Stroke)
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

    public var description: String {
        switch self {
        case .noSuchText(let index, let count): return "there is no text \(index); the drawing has \(count)"
        case .invalid(let error): return error.description
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
    /// history as it was.
    @discardableResult
    public mutating func apply(_ edit: DrawingEdit) throws(DrawingEditError) -> Bool {
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
        case .addStroke(let stroke):
            var next = drawing
            next.strokes.append(stroke)
            record(next)
        case .addText(let text):
            var next = drawing
            next.texts.append(text)
            record(next)
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
            record(next)
        case .clear:
            guard drawing.hasContent else { return false }
            record(.empty)
        }
        return true
    }

    private mutating func record(_ next: Drawing) {
        undoStack.append(drawing)
        if undoStack.count > historyLimit { undoStack.removeFirst(undoStack.count - historyLimit) }
        redoStack.removeAll()
        drawing = next
    }
}
