/// A session as its holder knows the store has it: at `version`, a whole snapshot of
/// `wholeCount` bytes and a log of `logEntries` entries and `logBytes` bytes after it
/// (`SessionSnapshotStore`), and, when the holder has them, the bytes of the whole snapshot at
/// `version` itself, which a byte delta (`SnapshotDelta`) is made against.
///
/// Most changes are written as their operations (`OperationEntry`), which need no snapshot at
/// all: after one, `bytes` is nil and the holder keeps nothing of the session's size beside the
/// session. A change the operations cannot say is written whole, or as a byte delta when
/// `bytes` are known. The log is folded into a new whole snapshot off the request's path once
/// `foldDue` says so, by the holder's store lane after the reply.
public struct StoredSnapshot: Sendable, Equatable {
    /// The version the store has.
    public private(set) var version: UInt64
    /// The whole snapshot at `version`; nil when the last change was written as operations.
    public private(set) var bytes: [UInt8]?
    /// The whole snapshot in the store, and the log written after it.
    public private(set) var wholeCount: Int
    public private(set) var logEntries: Int
    public private(set) var logBytes: Int

    /// Once the log has this many entries, a change that needs `bytes` (a byte delta) is
    /// written whole instead: a take-over applies every delta.
    public static let maxLogEntries = 256
    /// Operation entries are folded by their bytes (`foldDue`); past this many a fold is due
    /// anyway, and past twice this a take-over refuses the log (`Snapshot.assembled`): replaying
    /// an entry costs microseconds, so this bounds only what a log written by hand can ask for.
    public static let maxOperationEntries = 4096
    /// Below this many bytes of log a fold is not worth its whole snapshot.
    public static let foldFloor = 64 << 10

    /// Written whole, or just taken over with a log of `logEntries` entries of `logBytes` bytes
    /// after a whole snapshot of `wholeCount` bytes.
    public init(version: UInt64, bytes: [UInt8]?, wholeCount: Int? = nil, logEntries: Int = 0, logBytes: Int = 0) {
        self.version = version
        self.bytes = bytes
        self.wholeCount = wholeCount ?? bytes?.count ?? 0
        self.logEntries = logEntries
        self.logBytes = logBytes
    }

    /// How the change to `next` (the session one version on, encoded whole) goes to the store:
    /// as a byte delta, unless the holder has no bytes to make it against, or the log is long
    /// enough, or the delta large enough, that a whole snapshot is better. The log then holds
    /// at most half a snapshot's bytes of deltas.
    public func change(to next: [UInt8]) -> SessionSnapshotStore.Change {
        guard let bytes, logEntries < Self.maxLogEntries else { return .whole(next) }
        let delta = SnapshotDelta.make(from: bytes, to: next, version: version + 1)
        guard delta.count <= next.count / 2, logBytes + delta.count <= max(wholeCount, next.count) / 2 else { return .whole(next) }
        return .delta(delta)
    }

    /// After the store took `change` as version `version`, making the session `next`.
    public func after(_ change: SessionSnapshotStore.Change, next: [UInt8], version: UInt64) -> StoredSnapshot {
        switch change {
        case .whole:
            return StoredSnapshot(version: version, bytes: next)
        case .delta(let delta):
            return StoredSnapshot(version: version, bytes: next, wholeCount: wholeCount, logEntries: logEntries + 1,
                                  logBytes: logBytes + delta.count)
        case .operations(let entry):
            return afterOperations(count: entry.count, version: version, logEntries: logEntries + 1, wholeCount: wholeCount)
        }
    }

    /// After the store took an operation entry of `count` bytes as `version`, its log then
    /// `logEntries` long and its whole snapshot `wholeCount` bytes, as the store said: the log
    /// shorter than this holder counted when a fold landed meanwhile, and then the entry is all
    /// the log's bytes.
    public func afterOperations(count: Int, version: UInt64, logEntries stored: Int, wholeCount: Int) -> StoredSnapshot {
        let folded = stored <= logEntries
        return StoredSnapshot(version: version, bytes: nil, wholeCount: wholeCount, logEntries: stored,
                              logBytes: folded ? count : logBytes + count)
    }

    /// Whether the log should be folded into a whole snapshot now: its bytes passed one and a
    /// half times the whole snapshot's (so each change pays two thirds of its own size again in
    /// folds, and a take-over reads at most two and a half snapshots' worth), or its entries
    /// passed `maxOperationEntries`.
    public var foldDue: Bool {
        logEntries >= Self.maxOperationEntries || (logEntries > 0 && 2 * logBytes >= 3 * max(wholeCount, Self.foldFloor))
    }
}
