/// The canvas: closed, opening, open, minimizing or minimized, and the drawing it carries;
/// and, while a submit puts its drawing into a document, saving (shown as the phase it was
/// submitted from: nothing sees the canvas until the save's outcome is in).
///
/// Each command switches over the whole state and returns the actions it calls for, or
/// throws a `CanvasRejection` and changes nothing.
///
/// Codable so a session can move between service instances: what it encodes restores the
/// machine exactly, the transition under way and the tickets issued included.
public struct CanvasStateMachine: Hashable, Sendable, Codable {
    private enum State: Hashable, Sendable, Codable {
        case closed
        case opening(EditableDrawing, TransitionTicket)
        case open(EditableDrawing)
        case minimizing(EditableDrawing, TransitionTicket)
        case minimized(EditableDrawing)
        /// A submit waiting for its drawing's save, from `open` or `minimized`.
        case saving(EditableDrawing, from: CanvasPhase)
    }

    private var state: State = .closed
    private var ticketsIssued: UInt64 = 0
    public let transitions: TransitionMode
    public let historyLimit: Int

    public init(transitions: TransitionMode = .instant, historyLimit: Int = EditableDrawing.defaultHistoryLimit) {
        self.transitions = transitions
        self.historyLimit = historyLimit
    }

    public var phase: CanvasPhase {
        switch state {
        case .closed: return .closed
        case .opening: return .opening
        case .open: return .open
        case .minimizing: return .minimizing
        case .minimized: return .minimized
        case .saving(_, let from): return from
        }
    }

    /// Whether a submit is waiting for its save (`saved`).
    public var isSaving: Bool {
        if case .saving = state { return true }
        return false
    }

    /// The drawing with its history; nil while closed.
    public var editableDrawing: EditableDrawing? {
        switch state {
        case .closed: return nil
        case .opening(let drawing, _), .open(let drawing), .minimizing(let drawing, _), .minimized(let drawing), .saving(let drawing, _):
            return drawing
        }
    }

    /// What is drawn; empty while closed.
    public var drawing: Drawing { editableDrawing?.drawing ?? .empty }

    /// The transition under way, if any.
    public var pendingTransition: TransitionTicket? {
        switch state {
        case .opening(_, let ticket), .minimizing(_, let ticket): return ticket
        case .closed, .open, .minimized, .saving: return nil
        }
    }

    // MARK: Commands

    /// Shows the canvas: a new drawing from closed (`drawing`: empty, or a page's ink reopened,
    /// its undo history starting there), the kept one from minimized.
    /// Opening an open canvas changes nothing.
    public mutating func open(cause: Cause, drawing: Drawing = .empty) throws(CanvasRejection) -> [CanvasAction] {
        switch state {
        case .closed:
            return show(EditableDrawing(drawing, historyLimit: historyLimit), from: .closed, cause: cause)
        case .minimized(let drawing):
            return show(drawing, from: .minimized, cause: cause)
        case .open:
            return []
        case .opening, .minimizing, .saving:
            throw .transition
        }
    }

    /// Hides the canvas and keeps the drawing for the next open.
    public mutating func minimize(cause: Cause) throws(CanvasRejection) -> [CanvasAction] {
        switch state {
        case .open(let drawing):
            var actions: [CanvasAction] = [
                .emitResult(CanvasResult(action: .minimized, hasContent: drawing.drawing.hasContent),
                            drawing: drawing.drawing, cause: cause),
            ]
            if let ticket = startTransition() {
                state = .minimizing(drawing, ticket)
                actions.insert(.stateChanged(from: .open, to: .minimizing, cause: cause), at: 0)
                actions += timerAction(ticket)
            } else {
                state = .minimized(drawing)
                actions.insert(.stateChanged(from: .open, to: .minimized, cause: cause), at: 0)
            }
            return actions
        case .closed, .minimized:
            throw .notOpen
        case .opening, .minimizing, .saving:
            throw .transition
        }
    }

    /// Ends the drawing and hands it over (open or minimized). `savingFirst`: the drawing goes
    /// into a document first; the canvas waits in `saving`, asking for the save (`.save`), and
    /// `saved` then ends it, or puts it back as it was when the save failed. The one place
    /// where a submit saves first.
    public mutating func submit(cause: Cause, savingFirst: Bool = false) throws(CanvasRejection) -> [CanvasAction] {
        guard savingFirst else { return try end(with: .submitted, cause: cause) }
        switch state {
        case .open(let drawing), .minimized(let drawing):
            state = .saving(drawing, from: phase)
            return [.save(drawing.drawing)]
        case .closed:
            throw .noDrawing
        case .opening, .minimizing, .saving:
            throw .transition
        }
    }

    /// How the save a submit asked for went: made, the submit ends the drawing as one without
    /// a save would have; failed, the canvas is as it was before the submit, drawing and all,
    /// for another try.
    public mutating func saved(_ made: Bool, cause: Cause) throws(CanvasRejection) -> [CanvasAction] {
        guard case .saving(let drawing, let from) = state else { throw .noTransition }
        state = from == .minimized ? .minimized(drawing) : .open(drawing)
        return made ? try end(with: .submitted, cause: cause) : []
    }

    /// Ends the drawing and throws it away (open or minimized).
    public mutating func cancel(cause: Cause) throws(CanvasRejection) -> [CanvasAction] {
        try end(with: .cancelled, cause: cause)
    }

    /// The double-tap's toggle: closed or minimized opens, open minimizes.
    public mutating func toggle(cause: Cause) throws(CanvasRejection) -> [CanvasAction] {
        switch state {
        case .closed, .minimized: return try open(cause: cause)
        case .open: return try minimize(cause: cause)
        case .opening, .minimizing, .saving: throw .transition
        }
    }

    /// Completes the animation under way. A timer passes its ticket, so that a late timer
    /// cannot finish a later transition; a client's request passes none.
    public mutating func finishTransition(_ ticket: TransitionTicket? = nil, cause: Cause = .client) throws(CanvasRejection) -> [CanvasAction] {
        switch state {
        case .opening(let drawing, let current):
            guard ticket == nil || ticket == current else { throw .staleTransition }
            state = .open(drawing)
            return [.stateChanged(from: .opening, to: .open, cause: cause)]
        case .minimizing(let drawing, let current):
            guard ticket == nil || ticket == current else { throw .staleTransition }
            state = .minimized(drawing)
            return [.stateChanged(from: .minimizing, to: .minimized, cause: cause)]
        case .closed, .open, .minimized, .saving:
            throw ticket == nil ? .noTransition : .staleTransition
        }
    }

    /// Applies a drawing edit; only an open canvas takes them. Returns whether it changed anything.
    public mutating func edit(_ edit: DrawingEdit, within bounds: DrawingBounds = .unbounded) throws(CanvasEditError) -> Bool {
        switch state {
        case .open(var drawing):
            // The state lets go of the drawing while it is edited, so the edit changes its
            // history in place: held twice, the undo stack (up to `historyLimit` drawings) was
            // copied whole by every edit. An edit that throws has changed nothing.
            state = .closed
            defer { state = .open(drawing) }
            do {
                return try drawing.apply(edit, within: bounds)
            } catch {
                throw .invalid(error)
            }
        case .closed, .minimized:
            throw .rejected(.notOpen)
        case .opening, .minimizing, .saving:
            throw .rejected(.transition)
        }
    }

    // MARK: Helpers

    private mutating func show(_ drawing: EditableDrawing, from phase: CanvasPhase, cause: Cause) -> [CanvasAction] {
        if let ticket = startTransition() {
            state = .opening(drawing, ticket)
            return [.stateChanged(from: phase, to: .opening, cause: cause)] + timerAction(ticket)
        }
        state = .open(drawing)
        return [.stateChanged(from: phase, to: .open, cause: cause)]
    }

    private mutating func end(with action: CanvasResultAction, cause: Cause) throws(CanvasRejection) -> [CanvasAction] {
        switch state {
        case .open(let drawing), .minimized(let drawing):
            let from = phase
            state = .closed
            return [
                .stateChanged(from: from, to: .closed, cause: cause),
                .emitResult(CanvasResult(action: action, hasContent: drawing.drawing.hasContent),
                            drawing: drawing.drawing, cause: cause),
            ]
        case .closed:
            throw .noDrawing
        case .opening, .minimizing, .saving:
            throw .transition
        }
    }

    /// A new ticket when this canvas animates; nil when transitions are instant.
    private mutating func startTransition() -> TransitionTicket? {
        guard transitions != .instant else { return nil }
        ticketsIssued += 1
        return TransitionTicket(number: ticketsIssued)
    }

    private func timerAction(_ ticket: TransitionTicket) -> [CanvasAction] {
        guard case .timed(let milliseconds) = transitions else { return [] }
        return [.startTransitionTimer(ticket, milliseconds: milliseconds)]
    }
}

/// Why a drawing edit was not applied.
public enum CanvasEditError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The canvas was not open.
    case rejected(CanvasRejection)
    /// The edit itself does not fit the drawing.
    case invalid(DrawingEditError)

    public var description: String {
        switch self {
        case .rejected(let rejection): return rejection.description
        case .invalid(let error): return error.description
        }
    }
}
