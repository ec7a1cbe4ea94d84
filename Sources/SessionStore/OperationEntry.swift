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
        var value = version
        while value >= 0x80 {
            out.append(UInt8(truncatingIfNeeded: value) | 0x80)
            value >>= 7
        }
        out.append(UInt8(value))
        return out
    }

    /// The version an entry makes, and where its operations start.
    public static func version(of entry: [UInt8]) throws(SnapshotDelta.Refusal) -> (version: UInt64, body: Int) {
        guard isEntry(entry) else { throw SnapshotDelta.Refusal("not an operation entry") }
        var value: UInt64 = 0, offset = magic.count
        for shift in Swift.stride(from: 0, to: 64, by: 7) {
            guard offset < entry.count else { throw SnapshotDelta.Refusal("an operation entry ends in its version") }
            let byte = entry[offset]
            offset += 1
            if shift == 63 && byte > 1 { break }
            value |= UInt64(byte & 0x7F) << UInt64(shift)
            if byte & 0x80 == 0 { return (value, offset) }
        }
        throw SnapshotDelta.Refusal("an operation entry's version is past 64 bits")
    }
}
