public import CanvasCore

/// A small, flat restatement of the brief's rules for one session, written for reading,
/// not for speed. The real `CanvasSession` must agree with it after every command.
///
/// It shares only the value types and the eraser's geometry (`Drawing.erasing`, which has
/// its own tests) with the real machines; the states, history and pencil rules are its own.
public struct ReferenceCanvas: Sendable {
    public private(set) var phase: CanvasPhase = .closed
    public private(set) var drawing = Drawing.empty
    public private(set) var tool: CanvasTool = .pen
    public private(set) var previousTool: CanvasTool = .eraser
    /// Each step as the drawing on its other side and whether it only added strokes (which a
    /// joined stroke continues): the model remembers what each step was, where the real
    /// history works it out from its drawings.
    private var undoHistory: [Step] = []
    private var redoHistory: [Step] = []
    private var pencil: PencilConfiguration
    private var initialized: Bool
    private var ticket: UInt64 = 0
    private let transitions: TransitionMode
    private let historyLimit: Int

    public init(pencil: PencilConfiguration, transitions: TransitionMode, initialized: Bool,
                historyLimit: Int = EditableDrawing.defaultHistoryLimit) {
        self.pencil = pencil
        self.transitions = transitions
        self.initialized = initialized
        self.historyLimit = historyLimit
    }

    private struct Step: Sendable {
        var drawing: Drawing
        var addedStrokes: Bool
    }

    private var animated: Bool { transitions != .instant }
    private var timed: Bool { if case .timed = transitions { true } else { false } }

    /// What the session should answer to `command`, and how it should look afterwards.
    public mutating func predict(_ command: CanvasCommand) -> Observation {
        var changes: [Observation.StateChange] = []
        var result: CanvasResult?
        var resultCause: Cause?
        var resultDrawing: Drawing?
        var timer = false
        var warned = false
        var reply = Observation.Reply.accepted

        func move(to next: CanvasPhase, _ cause: Cause) {
            changes.append(.init(from: phase, to: next, cause: cause))
            phase = next
            if next == .opening || next == .minimizing {
                ticket += 1
                timer = timed
            }
        }
        func emit(_ action: CanvasResultAction, _ cause: Cause) {
            result = CanvasResult(action: action, hasContent: !drawing.strokes.isEmpty || !drawing.texts.isEmpty)
            resultCause = cause
            resultDrawing = drawing
        }
        func openCanvas(_ cause: Cause) {
            if phase == .closed {
                drawing = .empty
                undoHistory = []
                redoHistory = []
            }
            move(to: animated ? .opening : .open, cause)
        }
        func minimizeCanvas(_ cause: Cause) {
            move(to: animated ? .minimizing : .minimized, cause)
            emit(.minimized, cause)
        }

        switch command {
        case .open:
            if phase == .closed || phase == .minimized { openCanvas(.client) }
            else if phase != .open { reply = .rejected(.transition) }

        case .minimize:
            if phase == .open { minimizeCanvas(.client) }
            else if phase == .closed || phase == .minimized { reply = .rejected(.notOpen) }
            else { reply = .rejected(.transition) }

        case .submit, .cancel:
            if phase == .open || phase == .minimized {
                move(to: .closed, .client)
                emit(command == .submit ? .submitted : .cancelled, .client)
                drawing = .empty
            } else if phase == .closed {
                reply = .rejected(.noDrawing)
            } else {
                reply = .rejected(.transition)
            }

        case .finishTransition:
            if phase == .opening { move(to: .open, .client) }
            else if phase == .minimizing { move(to: .minimized, .client) }
            else { reply = .rejected(.noTransition) }

        case .timerFired(let number):
            if number == ticket && phase == .opening { move(to: .open, .timer) }
            else if number == ticket && phase == .minimizing { move(to: .minimized, .timer) }
            else { reply = .rejected(.staleTransition) }

        case .initialize:
            initialized = true

        case .configurePencil(let configuration):
            pencil = configuration

        case .doubleTap:
            let outcome: DoubleTapOutcome
            if !pencil.supported {
                outcome = .ignored(.unsupported)
            } else if !initialized {
                outcome = .ignored(.notInitialized)
                warned = true
            } else if phase == .opening || phase == .minimizing {
                outcome = .ignored(.transition)
            } else if phase == .open && pencil.policy == .respectPreference {
                switch pencil.preferredTapAction {
                case .ignore:
                    outcome = .ignored(.preference)
                case .switchEraser:
                    if tool == .eraser { (tool, previousTool) = (previousTool, tool) }
                    else { (tool, previousTool) = (.eraser, tool) }
                    outcome = .preference(.switchEraser, tools: ToolSelection(current: tool, previous: previousTool))
                case .switchPrevious:
                    (tool, previousTool) = (previousTool, tool)
                    outcome = .preference(.switchPrevious, tools: ToolSelection(current: tool, previous: previousTool))
                case .showColorPalette, .showInkAttributes:
                    outcome = .preference(pencil.preferredTapAction, tools: ToolSelection(current: tool, previous: previousTool))
                }
            } else if phase == .open {
                minimizeCanvas(.pencil)
                outcome = .minimized(result!)
            } else {
                openCanvas(.pencil)
                outcome = .opened
            }
            reply = .doubleTap(outcome)

        case .edit(let edit):
            if phase == .open {
                reply = applyEdit(edit)
            } else if phase == .opening || phase == .minimizing {
                reply = .rejected(.transition)
            } else {
                reply = .rejected(.notOpen)
            }
        }

        var observation = Observation(reply: reply, phase: phase, drawing: phase == .closed ? .empty : drawing,
                                      tools: ToolSelection(current: tool, previous: previousTool))
        observation.stateChanges = changes
        observation.result = result
        observation.resultCause = resultCause
        observation.resultDrawing = resultDrawing
        observation.timerStarted = timer
        observation.warned = warned
        return observation
    }

    private mutating func applyEdit(_ edit: DrawingEdit) -> Observation.Reply {
        var next = drawing
        var addedStrokes = false
        switch edit {
        case .undo:
            guard let last = undoHistory.popLast() else { return .edited(changed: false) }
            redoHistory.append(Step(drawing: drawing, addedStrokes: last.addedStrokes))
            drawing = last.drawing
            return .edited(changed: true)
        case .redo:
            guard let last = redoHistory.popLast() else { return .edited(changed: false) }
            undoHistory.append(Step(drawing: drawing, addedStrokes: last.addedStrokes))
            drawing = last.drawing
            return .edited(changed: true)
        case .addStroke(let stroke, joiningLastStep: true):
            // Into the step on top: only right after a step of strokes, nothing undone since,
            // the same pen, and starting where the last stroke ended.
            if !redoHistory.isEmpty { return .invalidEdit(.cannotJoin(.undone)) }
            guard undoHistory.last?.addedStrokes == true, let last = drawing.strokes.last else {
                return .invalidEdit(.cannotJoin(.notAfterStroke))
            }
            if stroke.tool != last.tool || stroke.width != last.width
                || stroke.color.red != last.color.red || stroke.color.green != last.color.green || stroke.color.blue != last.color.blue {
                return .invalidEdit(.cannotJoin(.style))
            }
            if stroke.points[0] != last.points[last.points.count - 1] { return .invalidEdit(.cannotJoin(.gap)) }
            pickUp(CanvasTool(stroke.tool))
            drawing.strokes.append(stroke)
            return .edited(changed: true)
        case .addStroke(let stroke, joiningLastStep: false):
            pickUp(CanvasTool(stroke.tool))
            next.strokes.append(stroke)
            addedStrokes = true
        case .addText(let text):
            next.texts.append(text)
        case .moveText(let index, let x, let y):
            guard index >= 0 && index < next.texts.count else {
                return .invalidEdit(.noSuchText(index: index, count: next.texts.count))
            }
            let old = next.texts[index]
            do {
                next.texts[index] = try TextAnnotation(text: old.text, x: x, y: y, fontSize: old.fontSize, color: old.color)
            } catch {
                return .invalidEdit(.invalid(error))
            }
            if next == drawing { return .edited(changed: false) }
        case .editText(let index, let change):
            guard index >= 0 && index < next.texts.count else {
                return .invalidEdit(.noSuchText(index: index, count: next.texts.count))
            }
            let old = next.texts[index]
            do {
                next.texts[index] = try TextAnnotation(text: change.text ?? old.text,
                                                       x: (change.x ?? old.x) + (change.dx ?? 0), y: (change.y ?? old.y) + (change.dy ?? 0),
                                                       fontSize: change.fontSize ?? old.fontSize, color: change.color ?? old.color)
            } catch {
                return .invalidEdit(.invalid(error))
            }
            if next == drawing { return .edited(changed: false) }
        case .erase(let request):
            pickUp(.eraser)
            let (erased, touched) = drawing.erasing(request)
            if touched == 0 { return .edited(changed: false) }
            next = erased
        case .clear:
            if drawing.strokes.isEmpty && drawing.texts.isEmpty { return .edited(changed: false) }
            next = .empty
        }
        undoHistory.append(Step(drawing: drawing, addedStrokes: addedStrokes))
        if undoHistory.count > historyLimit { undoHistory.removeFirst() }
        redoHistory = []
        drawing = next
        return .edited(changed: true)
    }

    private mutating func pickUp(_ newTool: CanvasTool) {
        if newTool != tool { (tool, previousTool) = (newTool, tool) }
    }
}
