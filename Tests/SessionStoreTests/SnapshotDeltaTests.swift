import SessionStore
import Testing
import TestSupport

/// Deltas between snapshots: whatever the edit, the delta applied to the old bytes gives the
/// new ones exactly; a small edit makes a small delta; a delta not made for these old bytes,
/// or written by hand, is refused.
@Suite struct SnapshotDeltaTests {
    /// Bytes like a snapshot's: runs of JSON-ish text and base64, some repeated, some random.
    static func snapshotLike(_ random: inout SplitMix, count: Int) -> [UInt8] {
        let words: [String] = [#"{"s":{"keep":"#, #","add":["#, "]},", ##""tool":"pen","color":"#000000","width":2,"points":""##,
                               "AAAAAAAA8D8AAAAAAADwPw==", "\"}"]
        var out: [UInt8] = []
        while out.count < count {
            switch random.next() % 4 {
            case 0: out += Array(words[Int(random.next() % UInt64(words.count))].utf8)
            case 1: out += Array(String(random.next() % 1000).utf8)
            default: out += (0..<Int(random.next() % 64)).map { _ in UInt8(truncatingIfNeeded: random.next()) }
            }
        }
        return Array(out.prefix(count))
    }

    /// One random edit: an insert, a removal, a replacement, a block moved or repeated, or a
    /// few bytes changed here and there.
    static func edit(_ bytes: [UInt8], _ random: inout SplitMix) -> [UInt8] {
        var out = bytes
        func place() -> Int { out.isEmpty ? 0 : Int(random.next() % UInt64(out.count + 1)) }
        func span(from start: Int) -> Range<Int> { start..<min(out.count, start + Int(random.next() % 3000)) }
        func fresh() -> [UInt8] { (0..<Int(random.next() % 2000)).map { _ in UInt8(truncatingIfNeeded: random.next()) } }
        switch random.next() % 6 {
        case 0: out.insert(contentsOf: fresh(), at: place())
        case 1: out.removeSubrange(span(from: place()))
        case 2: out.replaceSubrange(span(from: place()), with: fresh())
        case 3:
            let moved = span(from: place())
            let block = Array(out[moved])
            out.removeSubrange(moved)
            out.insert(contentsOf: block, at: place())
        case 4: out.insert(contentsOf: Array(out[span(from: place())]), at: place())
        default:
            for _ in 0..<Int(random.next() % 8) where !out.isEmpty {
                out[Int(random.next() % UInt64(out.count))] = UInt8(truncatingIfNeeded: random.next())
            }
        }
        return out
    }

    @Test("random edits of random and snapshot-like bytes: applied, the delta gives the new bytes exactly")
    func randomEdits() throws {
        for seed in UInt64(1)...60 {
            var random = SplitMix(seed: seed)
            var old = seed % 3 == 0
                ? (0..<Int(random.next() % 40_000)).map { _ in UInt8(truncatingIfNeeded: random.next()) }
                : Self.snapshotLike(&random, count: Int(random.next() % 200_000))
            for step in 0..<12 {
                let new = Self.edit(old, &random)
                let delta = SnapshotDelta.make(from: old, to: new, version: UInt64(step + 2))
                let made = try SnapshotDelta.apply(delta, to: old, maxCount: 1 << 20)
                #expect(made == new, "seed \(seed) step \(step)")
                #expect(try SnapshotDelta.header(delta) == .init(version: UInt64(step + 2), oldCount: old.count, newCount: new.count))
                old = new
            }
        }
    }

    @Test("a small change to large bytes makes a delta about its own size")
    func smallChangesStaySmall() throws {
        var random = SplitMix(seed: 7)
        let old = Self.snapshotLike(&random, count: 1_000_000)
        var new = old
        let inserted = (0..<5_000).map { _ in UInt8(truncatingIfNeeded: random.next()) }
        new.insert(contentsOf: inserted, at: 600_000)
        new.replaceSubrange(10..<14, with: [1, 2, 3, 4])          // a length at the start
        new.removeSubrange(900_000..<900_100)                       // the oldest reply forgotten
        new += Array(#"{"id":77,"result":{"strokes":41}}"#.utf8)   // and a new one
        let delta = SnapshotDelta.make(from: old, to: new, version: 9)
        #expect(try SnapshotDelta.apply(delta, to: old, maxCount: 2_000_000) == new)
        #expect(delta.count < inserted.count + 200, "\(delta.count) bytes for a 5 000-byte insert")
        // Nothing changed: a few bytes.
        #expect(SnapshotDelta.make(from: old, to: old, version: 2).count < 40)
    }

    @Test("edges: empty old or new bytes, shorter than a key")
    func edges() throws {
        let cases: [([UInt8], [UInt8])] = [
            ([], []), ([], [1, 2, 3]), ([1, 2, 3], []), (Array(0..<10), Array(0..<11)),
            ([UInt8](repeating: 7, count: 100), [UInt8](repeating: 7, count: 1000)),
        ]
        for (old, new) in cases {
            #expect(try SnapshotDelta.apply(SnapshotDelta.make(from: old, to: new, version: 1), to: old, maxCount: 10_000) == new)
        }
    }

    @Test("a delta applied to other bytes, or past the size allowed, is refused")
    func wrongOldBytes() throws {
        var random = SplitMix(seed: 3)
        let old = Self.snapshotLike(&random, count: 50_000)
        let new = Self.edit(old, &random)
        let delta = SnapshotDelta.make(from: old, to: new, version: 2)
        var other = old
        other[25_000] ^= 0xFF                       // the same length, one byte different
        #expect(throws: SnapshotDelta.Refusal.self) { try SnapshotDelta.apply(delta, to: other, maxCount: 1 << 20) }
        #expect(throws: SnapshotDelta.Refusal.self) { try SnapshotDelta.apply(delta, to: Array(old.dropLast()), maxCount: 1 << 20) }
        #expect(throws: SnapshotDelta.Refusal.self) { try SnapshotDelta.apply(delta, to: old, maxCount: new.count - 1) }
    }

    @Test("a truncated or altered delta is refused, or (an altered version number) still makes the same bytes")
    func malformedDeltas() throws {
        var random = SplitMix(seed: 11)
        let old = Self.snapshotLike(&random, count: 3_000)
        var new = old
        new.insert(contentsOf: Array("a stroke's worth of new bytes".utf8), at: 1_500)
        new.removeSubrange(100..<140)
        let delta = SnapshotDelta.make(from: old, to: new, version: 300)
        for length in 0..<delta.count {
            #expect(throws: SnapshotDelta.Refusal.self) { try SnapshotDelta.apply(Array(delta.prefix(length)), to: old, maxCount: 1 << 20) }
        }
        for index in delta.indices {
            for flip: UInt8 in [0x01, 0x80, 0xFF] {
                var altered = delta
                altered[index] ^= flip
                if let made = try? SnapshotDelta.apply(altered, to: old, maxCount: 1 << 20) {
                    #expect(made == new, "byte \(index) ^ \(flip) made other bytes")
                }
            }
        }
    }

    @Test("hand-written deltas: out of bounds, overlong numbers and lengths, unknown operations, trailing bytes")
    func handWritten() throws {
        let old: [UInt8] = Array("0123456789".utf8)
        func delta(_ newCount: UInt8, _ operations: [UInt8], sum: [UInt8]? = nil) -> [UInt8] {
            Array("CBD1".utf8) + [1, UInt8(old.count), newCount] + (sum ?? [UInt8](repeating: 0, count: 8)) + operations
        }
        let refused: [[UInt8]] = [
            delta(4, [0, 8, 4]),                          // a copy past the end of the old bytes
            delta(4, [0, 0, 5]),                          // a copy past what it says it makes
            delta(4, [1, 5, 1, 2, 3, 4, 5]),              // an insert past what it says it makes
            delta(4, [1, 9, 1, 2]),                       // an insert past the delta's end
            delta(4, [2, 0, 4]),                          // no such operation
            delta(4, [0, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x02, 4]),   // past 64 bits
            delta(4, [0, 0xFF, 0xFF, 0xFF, 0xFF, 0x0F, 4]),                                 // past Int32
            delta(4, [0, 0, 2]),                          // makes fewer bytes than it says
            delta(4, [0, 0, 4]),                          // the right bytes, the wrong checksum
            Array("CBD2".utf8),
            [],
        ]
        for bytes in refused {
            #expect(throws: SnapshotDelta.Refusal.self) { try SnapshotDelta.apply(bytes, to: old, maxCount: 1 << 20) }
        }
        // A claim of four gigabytes is refused before anything is allocated.
        let huge = Array("CBD1".utf8) + [1, 10, 0xFF, 0xFF, 0xFF, 0xFF, 0x07] + [UInt8](repeating: 0, count: 8)
        #expect(throws: SnapshotDelta.Refusal.self) { try SnapshotDelta.apply(huge, to: old, maxCount: 64 << 20) }
        // The checksum is part of the format (canvasd versions read each other's logs): pinned,
        // as it was for the hand-made inputs of Tests/FuzzRegressionTests/Inputs/delta.
        #expect(SnapshotDelta.checksum(Array("0123".utf8)) == 4_214_913_884_628_559_029)
        // The same, checksummed, is taken: the format is what the comment says.
        var sum: [UInt8] = []
        withUnsafeBytes(of: SnapshotDelta.checksum(Array("0123".utf8)).bigEndian) { sum.append(contentsOf: $0) }
        #expect(try SnapshotDelta.apply(delta(4, [0, 0, 4], sum: sum), to: old, maxCount: 100) == Array("0123".utf8))
        #expect(try SnapshotDelta.apply(delta(4, [0, 0, 2, 1, 2, 0x32, 0x33], sum: sum), to: old, maxCount: 100) == Array("0123".utf8))
    }

    /// LEB128, as deltas write their numbers.
    static func number(_ value: Int) -> [UInt8] {
        var value = value, out: [UInt8] = []
        while value >= 0x80 {
            out.append(UInt8(value & 0x7F) | 0x80)
            value >>= 7
        }
        return out + [UInt8(value)]
    }

    /// A delta written by hand, with a true checksum of `result`.
    static func handMade(version: Int, oldCount: Int, result: [UInt8], operations: [UInt8]) -> [UInt8] {
        var sum: [UInt8] = []
        withUnsafeBytes(of: SnapshotDelta.checksum(result).bigEndian) { sum.append(contentsOf: $0) }
        return Array("CBD1".utf8) + number(version) + number(oldCount) + number(result.count) + sum + operations
    }

    @Test("a log applied at once makes what its entries applied one by one make")
    func wholeLogs() throws {
        for seed in UInt64(100)...140 {
            var random = SplitMix(seed: seed)
            let first = Self.snapshotLike(&random, count: Int(random.next() % 100_000))
            var log: [[UInt8]] = [], bytes = first
            for step in 0..<Int(random.next() % 40) {
                let next = Self.edit(bytes, &random)
                log.append(SnapshotDelta.make(from: bytes, to: next, version: UInt64(step + 2)))
                bytes = next
            }
            var oneByOne = first
            for delta in log { oneByOne = try SnapshotDelta.apply(delta, to: oneByOne, maxCount: 1 << 20) }
            #expect(oneByOne == bytes)
            #expect(try SnapshotDelta.apply(log: log, to: first, maxCount: 1 << 20) == bytes, "seed \(seed)")
        }
    }

    @Test("a log with an entry made from other bytes, or one too long, is refused")
    func wrongLogs() throws {
        var random = SplitMix(seed: 12)
        let first = Self.snapshotLike(&random, count: 20_000)
        let second = Self.edit(first, &random), third = Self.edit(second, &random)
        var other = first
        other[100] ^= 1
        let log = [SnapshotDelta.make(from: first, to: second, version: 2), SnapshotDelta.make(from: second, to: third, version: 3)]
        #expect(try SnapshotDelta.apply(log: log, to: first, maxCount: 1 << 20) == third)
        #expect(throws: SnapshotDelta.Refusal.self) { try SnapshotDelta.apply(log: log, to: other, maxCount: 1 << 20) }
        // An entry made from bytes of the same length that differ where it copies.
        var otherSecond = second
        otherSecond[second.count / 2] ^= 1
        let astray = [log[0], SnapshotDelta.make(from: otherSecond, to: otherSecond + [9], version: 3)]
        #expect(throws: SnapshotDelta.Refusal.self) { try SnapshotDelta.apply(log: astray, to: first, maxCount: 1 << 20) }
        #expect(throws: SnapshotDelta.Refusal.self) { try SnapshotDelta.apply(log: [SnapshotDelta.make(from: other, to: other + [9], version: 2)], to: first, maxCount: 1 << 20) }
        #expect(throws: SnapshotDelta.Refusal.self) { try SnapshotDelta.apply(log: [log[1], log[0]], to: first, maxCount: 1 << 20) }
        #expect(throws: SnapshotDelta.Refusal.self) { try SnapshotDelta.apply(log: log, to: first, maxCount: third.count - 1) }
        #expect(throws: SnapshotDelta.Refusal.self) { try SnapshotDelta.apply(log: log + [Array(log[1].dropLast())], to: first, maxCount: 1 << 20) }
    }

    @Test("a log that cuts the session into a piece per byte is written out on the way, and still makes the right bytes")
    func manyPieces() throws {
        let first: [UInt8] = [7]
        // A thousand copies of the one byte, then a hundred copies of those, each copy one piece.
        let thousand = [UInt8](repeating: 7, count: 1000)
        let one = Self.handMade(version: 2, oldCount: 1, result: thousand,
                                operations: Array(repeating: [0, 0, 1], count: 1000).flatMap { $0 })
        let hundred = [UInt8](repeating: 7, count: 100_000)
        let two = Self.handMade(version: 3, oldCount: 1000, result: hundred,
                                operations: Array(repeating: [0, 0] + Self.number(1000), count: 100).flatMap { $0 })
        let three = Self.handMade(version: 4, oldCount: 100_000, result: hundred + [1, 2],
                                  operations: [0, 0] + Self.number(100_000) + [1, 2, 1, 2])
        #expect(try SnapshotDelta.apply(log: [one, two, three], to: first, maxCount: 1 << 20) == hundred + [1, 2])
        var oneByOne = first
        for delta in [one, two, three] { oneByOne = try SnapshotDelta.apply(delta, to: oneByOne, maxCount: 1 << 20) }
        #expect(oneByOne == hundred + [1, 2])
    }

    @Test("a log longer, or larger, than any writer of the store leaves is refused before it is applied")
    func hostileLogsRefused() throws {
        // Each entry a no-op copy of the whole: cheap to write into Redis, each walked in full.
        let base = [UInt8](repeating: 7, count: 1_000)
        func log(_ count: Int) -> [[UInt8]] {
            (0..<count).map { SnapshotDelta.make(from: base, to: base, version: UInt64($0) + 2) }
        }
        let honest = SessionSnapshotStore.Snapshot(version: 1 + UInt64(StoredSnapshot.maxLogEntries), bytes: base, baseVersion: 1,
                                                   log: log(StoredSnapshot.maxLogEntries))
        #expect(try honest.assembled(maxCount: 1 << 20).bytes == base)
        let long = 2 * StoredSnapshot.maxLogEntries + 1
        let tooLong = SessionSnapshotStore.Snapshot(version: 1 + UInt64(long), bytes: base, baseVersion: 1, log: log(long))
        #expect(throws: SnapshotDelta.Refusal.self) { _ = try tooLong.assembled(maxCount: 1 << 20) }
        // Three entries each making a new 600-byte session: each within 1,000 bytes, together past it.
        var random = SplitMix(seed: 3)
        var entries: [[UInt8]] = [], previous = [UInt8](repeating: 1, count: 10)
        for version in 2...4 {
            let next = (0..<600).map { _ in UInt8(truncatingIfNeeded: random.next()) }
            entries.append(SnapshotDelta.make(from: previous, to: next, version: UInt64(version)))
            previous = next
        }
        let tooLarge = SessionSnapshotStore.Snapshot(version: 4, bytes: [UInt8](repeating: 1, count: 10), baseVersion: 1, log: entries)
        #expect(entries.reduce(0) { $0 + $1.count } > 1_000)
        #expect(throws: SnapshotDelta.Refusal.self) { _ = try tooLarge.assembled(maxCount: 1_000) }
        #expect(try tooLarge.assembled(maxCount: 1 << 20).bytes == previous)
    }
}
