#if DEBUG
import Synchronization

/// How often sessions' canvases were changed, counted in a test build only: a command run on a
/// copy of the canvas, to learn what it would do, leaves nothing else to see, and a request
/// must change its canvas once. Counted where the service reaches a session's canvas to change
/// it (`ServiceSession.canvas`), so the canvas machine itself knows nothing of it. Per task, so
/// that tests running side by side do not count each other's changes.
final class CanvasChangeCount: Sendable {
    @TaskLocal static var current: CanvasChangeCount?

    private let counted = Atomic<Int>(0)

    var value: Int { counted.load(ordering: .relaxed) }

    static func count() { current?.counted.add(1, ordering: .relaxed) }
}
#endif
