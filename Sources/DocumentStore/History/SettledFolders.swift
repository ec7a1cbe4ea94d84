import Foundation
import SystemPackage

/// History folders this process left settled, each as its folder and its log were when the
/// lock was let go.
///
/// Settling looks through the whole folder (a listing and a `stat` of every file) for what a
/// killed save or another program left there. On a local disk that is a few microseconds; on a
/// network file system every look is a round trip to the servers, and it was most of what a
/// save cost there (`make bench-glusterfs`). A save that finds the folder and the log exactly
/// as this process's last save left them (same entries: the folder's modification and change
/// times move with every name made, removed or renamed in it; same log: another writer's
/// records, a killed save's intent or a log replaced by hand all change its snapshot) has
/// nothing to find there, and skips the look.
///
/// What the skip does not see is a line file written in place by another program, which
/// changes neither; that file is never built on unseen: a save continues a line only when the
/// line's own snapshot is the one the log sealed (`lineEnds`), and kept bytes are served only
/// once they are seen to hash to their record (`holds`, `openKept`). Nor does it see a name made
/// in the folder within the file system's timestamp tick after the last save let the lock go,
/// which leaves the folder's times as they were: without a record in the log, that is only a
/// writer killed just after it made a temporary file, a leftover the next look removes.
final class SettledFolders: @unchecked Sendable {
    private struct Left: Equatable {
        let folder: FileSnapshot
        let log: FileSnapshot
    }

    private let lock = NSLock()
    private var left: [String: Left] = [:]
    private var order: [String] = []
    /// Folders remembered at most, the oldest forgotten first (a forgotten one is looked through).
    static let capacity = 4096

    private var skipped = 0
    /// How many looks through a folder were left out (for the tests).
    var looksSkipped: Int { lock.withLock { skipped } }

    /// Whether `writer`'s folder and log are as this process last left them. The log is taken
    /// as the writer opened it (nothing of its own is written yet), the folder as it is now.
    func unchanged(_ writer: HistoryWriter) -> Bool {
        guard let folder = try? writer.history.directory.descriptor.stat() else { return false }
        let now = Left(folder: FileSnapshot(folder), log: writer.openedAs)
        return lock.withLock {
            guard left[writer.history.directory.path] == now else { return false }
            skipped += 1
            return true
        }
    }

    /// Notes `writer`'s folder and log as they are now, settled and tidied; a writer whose
    /// tidying failed (files it could not remove) is forgotten, so that the next one looks.
    func remember(_ writer: HistoryWriter) {
        let key = writer.history.directory.path
        guard !writer.untidy, let now = Self.snapshot(writer) else {
            forget(key)
            return
        }
        lock.withLock {
            if left.updateValue(now, forKey: key) == nil {
                order.append(key)
                if order.count > Self.capacity { left[order.removeFirst()] = nil }
            }
        }
    }

    func forget(_ key: String) {
        lock.withLock { _ = left.removeValue(forKey: key) }
    }

    private static func snapshot(_ writer: HistoryWriter) -> Left? {
        guard let folder = try? writer.history.directory.descriptor.stat(), let log = writer.logSnapshot() else { return nil }
        return Left(folder: FileSnapshot(folder), log: log)
    }
}
