/// A session as its holder knows the store has it: the whole snapshot at `version`, and how
/// much of that is a whole snapshot in the store and how much its log of changes since
/// (`SessionSnapshotStore`). The holder keeps it beside the session, so that its next change
/// is written as a delta against these very bytes.
///
/// What a write costs now: the session is still encoded whole, here (CPU, and these bytes kept
/// in memory beside the session); what goes to Redis is the change from the bytes stored
/// before, about one stroke for a stroke added, with a whole snapshot now and then (`change`).
public struct StoredSnapshot: Sendable, Equatable {
    /// The version these bytes are in the store.
    public private(set) var version: UInt64
    public private(set) var bytes: [UInt8]
    /// The whole snapshot in the store, and the log written after it.
    public private(set) var wholeCount: Int
    public private(set) var logEntries: Int
    public private(set) var logBytes: Int

    /// Once the log has this many entries, the next change is written whole: a take-over reads
    /// and applies every entry (together, copying the snapshot once: `SnapshotDelta.apply(log:)`).
    /// Most logs are folded by their bytes first; this bounds one of many small changes.
    public static let maxLogEntries = 256

    /// Written whole, or just taken over with a log of `logEntries` entries of `logBytes` bytes
    /// after a whole snapshot of `wholeCount` bytes.
    public init(version: UInt64, bytes: [UInt8], wholeCount: Int? = nil, logEntries: Int = 0, logBytes: Int = 0) {
        self.version = version
        self.bytes = bytes
        self.wholeCount = wholeCount ?? bytes.count
        self.logEntries = logEntries
        self.logBytes = logBytes
    }

    /// How the change to `next` (the session one version on) goes to the store: as a delta,
    /// unless the log is long enough, or the delta large enough, that a whole snapshot is
    /// better. The log then holds at most half a snapshot's bytes, so the store holds at most
    /// one and a half, and each change costs its delta plus, spread over the log, at most twice
    /// that in the next whole snapshot.
    public func change(to next: [UInt8]) -> SessionSnapshotStore.Change {
        guard logEntries < Self.maxLogEntries else { return .whole(next) }
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
        }
    }
}
