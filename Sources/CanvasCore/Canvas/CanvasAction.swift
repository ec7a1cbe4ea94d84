/// An effect the canvas asks its owner to carry out. The machines perform no I/O; the
/// service runs each action (publish an event, start a timer, write a log line).
public enum CanvasAction: Hashable, Sendable {
    /// The phase changed: publish `canvas.stateChanged`.
    case stateChanged(from: CanvasPhase, to: CanvasPhase, cause: Cause)
    /// A drawing left the screen: publish `canvas.result`. The drawing is what was on the
    /// canvas, for the image and for flattening.
    case emitResult(CanvasResult, drawing: Drawing, cause: Cause)
    /// Finish this transition after a delay (timed transitions only).
    case startTransitionTimer(TransitionTicket, milliseconds: Int)
    /// A submit into a document: save this drawing there first, then tell the canvas how it
    /// went (`saved`). The canvas waits in `saving` meanwhile.
    case save(Drawing)
    /// The tool in hand changed.
    case toolChanged(ToolSelection)
    case logWarning(String)
}

extension Array where Element == CanvasAction {
    /// The result among these actions, if one was emitted.
    public var emittedResult: (result: CanvasResult, drawing: Drawing, cause: Cause)? {
        for case .emitResult(let result, let drawing, let cause) in self { return (result, drawing, cause) }
        return nil
    }
}
