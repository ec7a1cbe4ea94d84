/// A session's log entry written as the operations that made the change, not as bytes of the
/// snapshot (`SnapshotDelta`): what the service appends for a stroke, an undo, a transition.
///
/// The store reads only its head, `CBO1` then the version it makes as a LEB128 number, to
/// check that the log leads from its base to the session's version; the rest is the service's
/// (`protocol/session-store.md` says what it holds). A log is a run of byte deltas, then a run
/// of operation entries: a byte delta is made against the whole snapshot before it, which
/// nobody has after an operation entry without encoding the session, so none follows one.
public enum OperationEntry {
    public static let magic = Array("CBO1".utf8)

    /// Whether `entry` is an operation entry (else a byte delta, or nothing known).
    public static func isEntry(_ entry: [UInt8]) -> Bool { entry.starts(with: magic) }

    /// The head of an entry making `version`: what the service writes its operations after.
    public static func head(version: UInt64) -> [UInt8] {
        var out = magic
        LEB128.append(version, to: &out)
        return out
    }

    /// The version an entry makes, and where its operations start.
    public static func version(of entry: [UInt8]) throws(SnapshotDelta.Refusal) -> (version: UInt64, body: Int) {
        guard isEntry(entry) else { throw SnapshotDelta.Refusal("not an operation entry") }
        var offset = magic.count
        guard let version = LEB128.read(entry, at: &offset) else { throw SnapshotDelta.Refusal("an operation entry's version is cut short or past 64 bits") }
        return (version, offset)
    }
}
