import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Places in a save where a test kills the process, to see what a crash there leaves.
///
/// Compiled into debug builds only: `CANVAS_FAULT_POINT=<name>` in canvasd's environment makes
/// the process kill itself with SIGKILL when it reaches that place (after `CANVAS_FAULT_SKIP`
/// passes, default 0), as a power cut or `kill -9` would stop it. A release build has none of
/// this: `reach` is empty.
enum FaultPoint: String, CaseIterable {
    /// A replacing save: the new file written and flushed; its bytes in the history's line.
    case saveWritten, saveLineKept
    /// The commit record durable; the rename done; the identity after it logged.
    case saveCommitted, saveRenamed
    /// An append in place: the intent durable; the document's tail written and flushed; the
    /// line's tail written; the commit durable.
    case appendIntended, appendWritten, appendLineWritten, appendCommitted
    /// Keeping a changed document: its copy flushed; named and renamed into the history.
    case keepCopied
    /// Pruning: the record durable, before the files go.
    case pruneRecorded

    #if DEBUG
    private static let armed: (FaultPoint, Int)? = {
        let environment = ProcessInfo.processInfo.environment
        guard let name = environment["CANVAS_FAULT_POINT"], let point = FaultPoint(rawValue: name) else { return nil }
        return (point, Int(environment["CANVAS_FAULT_SKIP"] ?? "") ?? 0)
    }()
    private static let passes = Passes()
    #endif

    func reach() {
        #if DEBUG
        guard let (point, skip) = Self.armed, point == self, Self.passes.next() > skip else { return }
        kill(getpid(), SIGKILL)
        #endif
    }
}

#if DEBUG
/// How often the armed point was reached.
private final class Passes: @unchecked Sendable {
    // @unchecked: `count` is only touched under `lock`.
    private let lock = NSLock()
    private var count = 0
    func next() -> Int { lock.withLock { count += 1; return count } }
}
#endif
