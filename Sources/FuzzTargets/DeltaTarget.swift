import SessionStore

/// Session snapshot deltas (`SnapshotDelta`): made from any two byte strings, and read from any
/// bytes, as a take-over reads a log someone else may have written.
///
/// An input is two bytes giving the length of `old` (big-endian, up to what follows), `old`,
/// then the rest, which is both `new` and, cut before each `CBD1`, a log of deltas.
///
/// Besides crashes, it traps when a delta made from `old` to `new` does not make `new`, when a
/// log applied entry by entry and as a whole make different bytes, or when a log is taken whose
/// result is larger than allowed or than its last entry says.
public enum DeltaTarget {
    static let maxCount = 1 << 20

    public static func run(_ input: [UInt8]) {
        guard input.count >= 2 else { return }
        let split = min(input.count - 2, Int(input[0]) << 8 | Int(input[1]))
        let old = Array(input[2..<2 + split]), rest = Array(input[(2 + split)...])

        let delta = SnapshotDelta.make(from: old, to: rest, version: 2)
        guard (try? SnapshotDelta.apply(delta, to: old, maxCount: maxCount)) == rest else {
            fatalError("a delta made from \(old.count) bytes to \(rest.count) did not make them")
        }

        var log: [[UInt8]] = []
        var start = 0, index = 0
        let magic = Array("CBD1".utf8)
        while index + magic.count <= rest.count {
            if index > start, rest[index..<index + magic.count].elementsEqual(magic) {
                log.append(Array(rest[start..<index]))
                start = index
            }
            index += 1
        }
        if start < rest.count { log.append(Array(rest[start...])) }
        var oneByOne: [UInt8]? = old
        for entry in log {
            oneByOne = oneByOne.flatMap { try? SnapshotDelta.apply(entry, to: $0, maxCount: maxCount) }
        }
        let whole = try? SnapshotDelta.apply(log: log, to: old, maxCount: maxCount)
        // The log applied at once checks only the last entry's checksum: it may take what entry
        // by entry refuses, never the other way round, and never make other bytes.
        if let oneByOne, whole != oneByOne { fatalError("a log applied at once made other bytes than entry by entry") }
        if let whole, let last = log.last {
            guard whole.count <= maxCount, (try? SnapshotDelta.header(last))?.newCount == whole.count else {
                fatalError("a log was taken that made \(whole.count) bytes")
            }
        }
    }
}
