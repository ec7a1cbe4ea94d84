#if DEBUG
import Synchronization

/// How many commands sessions' canvases ran, counted in a test build only: a command run on a
/// copy of the canvas, to learn what it would do, leaves nothing else to see, and a request
/// must run its canvas once. Per task, so that tests running side by side do not count each
/// other's commands.
public final class CanvasCommandCount: Sendable {
    @TaskLocal public static var current: CanvasCommandCount?

    private let counted = Atomic<Int>(0)

    public init() {}

    public var value: Int { counted.load(ordering: .relaxed) }

    static func count() { current?.counted.add(1, ordering: .relaxed) }
}
#endif
