/// One client's canvas and pencil, together: what a session of the service holds.
///
/// It adds to the two machines only what needs both: a double-tap, which the pencil
/// interprets and the canvas carries out, and drawing edits, which also pick up a tool.
public struct CanvasSession: Hashable, Sendable, Codable {
    public private(set) var canvas: CanvasStateMachine
    public private(set) var pencil: PencilInteraction

    public init(
        pencil configuration: PencilConfiguration = PencilConfiguration(),
        transitions: TransitionMode = .instant,
        initialized: Bool = true,
        historyLimit: Int = EditableDrawing.defaultHistoryLimit
    ) {
        canvas = CanvasStateMachine(transitions: transitions, historyLimit: historyLimit)
        pencil = PencilInteraction(configuration: configuration, initialized: initialized)
    }

    public var phase: CanvasPhase { canvas.phase }
    public var drawing: Drawing { canvas.drawing }
    public var hasContent: Bool { canvas.drawing.hasContent }

    // MARK: Set-up

    public mutating func initialize() {
        pencil.initialize()
    }

    public mutating func configurePencil(_ configuration: PencilConfiguration) {
        pencil.configuration = configuration
    }

    // MARK: Client commands

    /// `drawing`: what a canvas opened from closed starts with (a page's ink, reopened).
    public mutating func open(drawing: Drawing = .empty) throws(CanvasRejection) -> [CanvasAction] {
        return try canvas.open(cause: .client, drawing: drawing)
    }
    public mutating func minimize() throws(CanvasRejection) -> [CanvasAction] {
        return try canvas.minimize(cause: .client)
    }
    public mutating func submit(savingFirst: Bool = false) throws(CanvasRejection) -> [CanvasAction] {
        return try canvas.submit(cause: .client, savingFirst: savingFirst)
    }
    /// How a submit's save went (see `CanvasStateMachine.saved`).
    public mutating func saved(_ made: Bool) throws(CanvasRejection) -> [CanvasAction] {
        return try canvas.saved(made, cause: .client)
    }
    public mutating func cancel() throws(CanvasRejection) -> [CanvasAction] {
        return try canvas.cancel(cause: .client)
    }

    /// Ends the animation under way: a client's request passes no ticket, a timer its own.
    public mutating func finishTransition(_ ticket: TransitionTicket? = nil) throws(CanvasRejection) -> [CanvasAction] {
        return try canvas.finishTransition(ticket, cause: ticket == nil ? .client : .timer)
    }

    /// Applies a drawing edit. Drawing or erasing also puts that tool in hand, which is what
    /// `switchPrevious` and `switchEraser` later go back from. An edit refused (`bounds`
    /// included) changes nothing, the tool in hand neither.
    public mutating func edit(_ edit: DrawingEdit, within bounds: DrawingBounds = .unbounded) throws(CanvasEditError) -> EditReport {
        let changed = try canvas.edit(edit, within: bounds)
        var actions: [CanvasAction] = []
        let tool: CanvasTool?
        switch edit {
        case .addStroke(let stroke, _): tool = CanvasTool(stroke.tool)
        case .erase: tool = .eraser
        case .addText, .moveText, .editText, .clear, .undo, .redo: tool = nil
        }
        if let tool, pencil.toolUsed(tool) { actions.append(.toolChanged(pencil.tools)) }
        let history = canvas.editableDrawing
        return EditReport(changed: changed, canUndo: history?.canUndo ?? false, canRedo: history?.canRedo ?? false, actions: actions)
    }

    // MARK: Pencil

    public mutating func doubleTap() -> DoubleTapReport {
        switch pencil.doubleTap(canvasIsOpen: canvas.phase == .open) {
        case .ignore(.notInitialized):
            return DoubleTapReport(
                outcome: .ignored(.notInitialized),
                actions: [.logWarning("pencil double-tap before the canvas plugin was initialized; ignored")]
            )
        case .ignore(let reason):
            return DoubleTapReport(outcome: .ignored(reason), actions: [])
        case .preference(let action):
            let toolActions: [CanvasAction]
            switch action {
            case .switchEraser, .switchPrevious: toolActions = [.toolChanged(pencil.tools)]
            case .showColorPalette, .showInkAttributes, .ignore: toolActions = []
            }
            return DoubleTapReport(outcome: .preference(action, tools: pencil.tools), actions: toolActions)
        case .toggle:
            let wasOpen = canvas.phase == .open
            let actions: [CanvasAction]
            do {
                actions = try canvas.toggle(cause: .pencil)
            } catch {
                // The only refusal a toggle meets is an animation under way.
                return DoubleTapReport(outcome: .ignored(.transition), actions: [])
            }
            if wasOpen, let result = actions.emittedResult?.result {
                return DoubleTapReport(outcome: .minimized(result), actions: actions)
            }
            return DoubleTapReport(outcome: .opened, actions: actions)
        }
    }
}

/// What a drawing edit did.
public struct EditReport: Hashable, Sendable {
    public var changed: Bool
    public var canUndo: Bool
    public var canRedo: Bool
    public var actions: [CanvasAction]

    public init(changed: Bool, canUndo: Bool, canRedo: Bool, actions: [CanvasAction]) {
        self.changed = changed
        self.canUndo = canUndo
        self.canRedo = canRedo
        self.actions = actions
    }
}

/// What a double-tap came to.
public enum DoubleTapOutcome: Hashable, Sendable {
    case opened
    case minimized(CanvasResult)
    case ignored(IgnoreReason)
    /// Under `respectPreference` on an open canvas: the preference was carried out instead.
    case preference(PreferredTapAction, tools: ToolSelection)

    /// The outcome as the wire names it: opened, minimized, ignored, or the preference's name.
    public var name: String {
        switch self {
        case .opened: return "opened"
        case .minimized: return "minimized"
        case .ignored: return "ignored"
        case .preference(let action, _): return action.rawValue
        }
    }
}

public struct DoubleTapReport: Hashable, Sendable {
    public var outcome: DoubleTapOutcome
    public var actions: [CanvasAction]

    public init(outcome: DoubleTapOutcome, actions: [CanvasAction]) {
        self.outcome = outcome
        self.actions = actions
    }
}
