/// When a render gives up: a result image has a time budget (spec 3.1). The work checks it as
/// it goes (before each stroke and text, along a long stroke's envelope and outline, while the
/// PNG is written), so that a render past it stops instead of burning a core on an image
/// nobody will be sent. `.none` never passes: flattening into a PDF has no such budget.
public struct RenderDeadline: Sendable {
    let instant: ContinuousClock.Instant?

    public static let none = RenderDeadline(nil)

    public init(_ instant: ContinuousClock.Instant?) {
        self.instant = instant
    }

    public var passed: Bool {
        guard let instant else { return false }
        return ContinuousClock.now >= instant
    }

    /// Throws when the deadline has passed; `operation` says what was being done.
    public func check(_ operation: @autoclosure () -> String) throws(RenderError) {
        if passed { throw RenderError(pastDeadline: operation()) }
    }

    /// `check` every `period`th step of a loop: reading the clock costs about as much as one
    /// step of the cheaper loops it guards.
    @inline(__always)
    func check(step: Int, every period: Int = 64, _ operation: @autoclosure () -> String) throws(RenderError) {
        guard instant != nil, step % period == 0 else { return }
        try check(operation())
    }
}
