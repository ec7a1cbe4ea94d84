public import CanvasCore

/// Everything a client or the pencil can do to a session, as one value: the alphabet of
/// the model-based tests and of the wire fuzzer.
public enum CanvasCommand: Hashable, Sendable, CustomStringConvertible {
    case open
    case minimize
    case submit
    case cancel
    case doubleTap
    /// A client's `canvas.finishTransition`.
    case finishTransition
    /// A transition timer firing, for the transition with this number (possibly long gone).
    case timerFired(ticket: UInt64)
    case initialize
    case configurePencil(PencilConfiguration)
    case edit(DrawingEdit)

    /// The command's kind without its values, for coverage reports.
    public var kind: String {
        switch self {
        case .timerFired: return "timerFired"
        case .configurePencil: return "configurePencil"
        case .edit(let edit):
            switch edit {
            case .addStroke: return "addStroke"
            case .addText: return "addText"
            case .moveText: return "moveText"
            case .editText: return "editText"
            case .erase: return "erase"
            case .clear, .undo, .redo: return description
            }
        default: return description
        }
    }

    public var description: String {
        switch self {
        case .open: return "open"
        case .minimize: return "minimize"
        case .submit: return "submit"
        case .cancel: return "cancel"
        case .doubleTap: return "doubleTap"
        case .finishTransition: return "finishTransition"
        case .timerFired(let ticket): return "timerFired(\(ticket))"
        case .initialize: return "initialize"
        case .configurePencil(let c):
            return "configurePencil(supported: \(c.supported), \(c.preferredTapAction), \(c.policy))"
        case .edit(let edit):
            switch edit {
            case .addStroke(let s, let joining): return "addStroke(\(s.tool), \(s.points.count) points\(joining ? ", joined" : ""))"
            case .addText(let t): return "addText(\(t.text.debugDescription))"
            case .moveText(let i, let x, let y): return "moveText(\(i), \(x), \(y))"
            case .editText(let i, let change): return "editText(\(i), \(change))"
            case .erase(let e): return "erase(\(e.mode), at: \(e.x), \(e.y), r: \(e.radius))"
            case .clear: return "clear"
            case .undo: return "undo"
            case .redo: return "redo"
            }
        }
    }
}

/// How a session answered one command, and what it looked like afterwards: the part of its
/// behaviour a client can observe. The model predicts one; the real session produces one.
public struct Observation: Hashable, Sendable, CustomStringConvertible {
    public enum Reply: Hashable, Sendable {
        case accepted
        case edited(changed: Bool)
        case doubleTap(DoubleTapOutcome)
        case rejected(CanvasRejection)
        case invalidEdit(DrawingEditError)
    }

    public var reply: Reply
    /// Phase changes announced, in order.
    public var stateChanges: [StateChange]
    /// The CanvasResult emitted, if any, and who caused it.
    public var result: CanvasResult?
    public var resultCause: Cause?
    /// The drawing handed over with the result (what submit flattens).
    public var resultDrawing: Drawing?
    public var timerStarted: Bool
    public var warned: Bool
    public var phase: CanvasPhase
    public var drawing: Drawing
    public var tools: ToolSelection

    public struct StateChange: Hashable, Sendable {
        public var from: CanvasPhase
        public var to: CanvasPhase
        public var cause: Cause
        public init(from: CanvasPhase, to: CanvasPhase, cause: Cause) {
            self.from = from
            self.to = to
            self.cause = cause
        }
    }

    public init(reply: Reply, phase: CanvasPhase, drawing: Drawing, tools: ToolSelection) {
        self.reply = reply
        self.stateChanges = []
        self.timerStarted = false
        self.warned = false
        self.phase = phase
        self.drawing = drawing
        self.tools = tools
    }

    public var description: String {
        var parts = ["reply: \(reply)", "phase: \(phase.rawValue)",
                     "strokes: \(drawing.strokes.count)", "texts: \(drawing.texts.count)",
                     "tools: \(tools.current.rawValue)/\(tools.previous.rawValue)"]
        if let result { parts.append("result: \(result.action.rawValue) hasContent=\(result.hasContent)") }
        if !stateChanges.isEmpty { parts.append("changes: " + stateChanges.map { "\($0.from.rawValue)->\($0.to.rawValue)" }.joined(separator: ",")) }
        if timerStarted { parts.append("timer") }
        if warned { parts.append("warned") }
        return parts.joined(separator: "; ")
    }
}

extension CanvasSession {
    /// Runs one command on the real session and reports what a client would observe.
    public mutating func perform(_ command: CanvasCommand) -> Observation {
        switch command {
        case .doubleTap:
            let report = doubleTap()
            return observe(.doubleTap(report.outcome), report.actions)
        case .edit(let edit):
            do {
                let report = try self.edit(edit)
                return observe(.edited(changed: report.changed), report.actions)
            } catch {
                switch error {
                case .rejected(let rejection): return observe(.rejected(rejection), [])
                case .invalid(let invalid): return observe(.invalidEdit(invalid), [])
                }
            }
        case .initialize:
            initialize()
            return observe(.accepted, [])
        case .configurePencil(let configuration):
            configurePencil(configuration)
            return observe(.accepted, [])
        case .open: return run { session throws(CanvasRejection) in try session.open() }
        case .minimize: return run { session throws(CanvasRejection) in try session.minimize() }
        case .submit: return run { session throws(CanvasRejection) in try session.submit() }
        case .cancel: return run { session throws(CanvasRejection) in try session.cancel() }
        case .finishTransition: return run { session throws(CanvasRejection) in try session.finishTransition() }
        case .timerFired(let number):
            return run { session throws(CanvasRejection) in try session.finishTransition(TransitionTicket(number: number)) }
        }
    }

    private mutating func run(_ body: (inout CanvasSession) throws(CanvasRejection) -> [CanvasAction]) -> Observation {
        do {
            // Mutate first: `observe(…, try body(&self))` would read self before the change.
            let actions = try body(&self)
            return observe(.accepted, actions)
        } catch {
            return observe(.rejected(error), [])
        }
    }

    private func observe(_ reply: Observation.Reply, _ actions: [CanvasAction]) -> Observation {
        var observation = Observation(reply: reply, phase: phase, drawing: drawing, tools: pencil.tools)
        for action in actions {
            switch action {
            case .stateChanged(let from, let to, let cause):
                observation.stateChanges.append(.init(from: from, to: to, cause: cause))
            case .emitResult(let result, let drawing, let cause):
                observation.result = result
                observation.resultCause = cause
                observation.resultDrawing = drawing
            case .startTransitionTimer: observation.timerStarted = true
            case .logWarning: observation.warned = true
            case .toolChanged, .save: break
            }
        }
        return observation
    }
}
