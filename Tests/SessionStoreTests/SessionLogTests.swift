import Foundation
import SessionStore
import Testing
import TestSupport

/// Sessions written as a log of deltas after a whole snapshot, in a real Redis: what another
/// instance takes over is exactly what was written, a change costs about its own size in Redis,
/// the log is folded into a whole snapshot now and then, and the compare-and-set and the
/// record of answered requests work as they did with whole snapshots.
@Suite(.serialized) struct SessionLogTests {
    let redis: RedisProcess
    let admin: RedisConnection
    init() throws {
        redis = try RedisProcess()
        admin = try RedisConnection(url: RedisURL(redis.url))
    }

    func store(_ instance: String, ttl: Duration = .seconds(60)) throws -> SessionSnapshotStore {
        try SessionSnapshotStore(url: redis.url, instance: instance, ttl: ttl)
    }

    func ask(_ arguments: String...) throws -> RedisValue {
        try admin.command(arguments, doing: "asking the test's Redis")
    }

    func logLengths(_ session: String) throws -> [Int] {
        guard case .array(let entries) = try ask("LRANGE", "canvas:session:{\(session)}:log", "0", "-1") else { return [] }
        return entries.map { if case .bytes(let bytes) = $0 { bytes.count } else { -1 } }
    }

    /// A writer as canvasd is one: it keeps what it stored and writes each change as the
    /// policy says.
    struct Writer {
        let store: SessionSnapshotStore
        let session: String
        var stored: StoredSnapshot

        mutating func write(_ next: [UInt8], answering: SessionSnapshotStore.Answer? = nil) throws -> SessionSnapshotStore.WriteOutcome {
            let change = stored.change(to: next)
            let outcome = try store.write(session, change, expected: stored.version, answering: answering)
            if case .written(let version) = outcome { stored = stored.after(change, next: next, version: version) }
            return outcome
        }
    }

    @Test("many changes, then a take-over by another instance: exactly the session as last written")
    func manyWritesThenTakeOver() throws {
        let a = try store("a"), b = try store("b")
        var random = SplitMix(seed: 21)
        var bytes = SnapshotDeltaTests.snapshotLike(&random, count: 300_000)
        #expect(try a.create("m", owner: "alice", snapshot: bytes))
        var writer = Writer(store: a, session: "m", stored: StoredSnapshot(version: 1, bytes: bytes))
        var deltas = 0
        for step in 0..<150 {
            bytes = SnapshotDeltaTests.edit(bytes, &random)
            if case .delta = writer.stored.change(to: bytes) { deltas += 1 }
            #expect(try writer.write(bytes) == .written(version: UInt64(step + 2)))
            if step % 37 == 5 {
                // Read back halfway as well, without taking it over.
                #expect(try a.read("m")?.assembled(maxCount: 1 << 24).bytes == bytes)
            }
        }
        #expect(deltas > 100, "only \(deltas) of 150 changes went as deltas")
        let taken = try #require(try b.takeOver("m", owner: "alice"))
        #expect(taken.version == 151)
        let assembled = try taken.assembled(maxCount: 1 << 24)
        #expect(assembled.bytes == bytes && assembled.version == 151)
        // The new holder writes on from there; the old one has lost.
        #expect(try writer.write(bytes + [1]) == .lost(holder: "b", version: 151))
        var next = Writer(store: b, session: "m", stored: assembled.stored)
        #expect(try next.write(bytes + [2]) == .written(version: 152))
        #expect(try a.takeOver("m", owner: "alice")?.assembled(maxCount: 1 << 24).bytes == bytes + [2])
    }

    @Test("a log lost apart from its session (evicted, or expired a moment before it) refuses a delta, and the change written whole makes it whole again")
    func aLostLogRefusesDeltas() throws {
        let a = try store("a"), b = try store("b")
        var random = SplitMix(seed: 34)
        var bytes = SnapshotDeltaTests.snapshotLike(&random, count: 50_000)
        #expect(try a.create("lost", owner: nil, snapshot: bytes))
        var writer = Writer(store: a, session: "lost", stored: StoredSnapshot(version: 1, bytes: bytes))
        for step in 0..<5 {
            bytes = SnapshotDeltaTests.edit(bytes, &random)
            #expect(try writer.write(bytes) == .written(version: UInt64(step + 2)))
        }
        #expect(try logLengths("lost").count == 5)
        _ = try ask("DEL", "canvas:session:{lost}:log")
        // Appended to the empty log, this delta would follow a base five versions older.
        bytes = SnapshotDeltaTests.edit(bytes, &random)
        let change = writer.stored.change(to: bytes)
        guard case .delta = change else { Issue.record("the change should have gone as a delta"); return }
        #expect(try a.write("lost", change, expected: 6) == .wholeNeeded)
        #expect(try ask("HGET", "canvas:session:{lost}", "version") == .bytes(Array("6".utf8)), "nothing written")
        #expect(try logLengths("lost").isEmpty)
        #expect(try a.write("lost", .whole(bytes), expected: 6) == .written(version: 7))
        #expect(try b.takeOver("lost", owner: nil)?.assembled(maxCount: 1 << 24).bytes == bytes)
    }

    @Test("a stroke's worth of change to a large session puts about that much into Redis, not the session")
    func aChangeCostsItsSize() throws {
        let a = try store("a")
        var random = SplitMix(seed: 5)
        var bytes = SnapshotDeltaTests.snapshotLike(&random, count: 2_000_000)
        #expect(try a.create("big", owner: nil, snapshot: bytes))
        var writer = Writer(store: a, session: "big", stored: StoredSnapshot(version: 1, bytes: bytes))
        for _ in 0..<10 {
            // A stroke into the middle, a counter at the start, a reply at the end.
            bytes.insert(contentsOf: (0..<12_000).map { _ in UInt8(truncatingIfNeeded: random.next()) }, at: bytes.count / 2)
            bytes[6] &+= 1
            bytes += Array(#"{"id":9,"result":{"strokes":10}}"#.utf8)
            _ = try writer.write(bytes)
        }
        // Ten entries of about a stroke each; the whole snapshot is the one created.
        let logged = try logLengths("big")
        #expect(logged.count == 10)
        #expect(logged.allSatisfy { (12_000..<12_300).contains($0) }, "\(logged)")
        #expect(try ask("HSTRLEN", "canvas:session:{big}", "base") == .integer(2_000_000))
        #expect(try a.takeOver("big", owner: nil)?.assembled(maxCount: 1 << 24).bytes == bytes)
    }

    @Test("the log is folded into a whole snapshot: after enough entries, or enough of its bytes, or a delta not worth it")
    func compaction() throws {
        let a = try store("a")
        var random = SplitMix(seed: 8)
        var bytes = SnapshotDeltaTests.snapshotLike(&random, count: 100_000)
        #expect(try a.create("c", owner: nil, snapshot: bytes))
        var writer = Writer(store: a, session: "c", stored: StoredSnapshot(version: 1, bytes: bytes))
        // Small changes: the entry count folds it.
        for _ in 0..<StoredSnapshot.maxLogEntries {
            bytes[Int(random.next() % UInt64(bytes.count))] &+= 1
            _ = try writer.write(bytes)
        }
        #expect(try logLengths("c").count == StoredSnapshot.maxLogEntries)
        bytes[0] &+= 1
        _ = try writer.write(bytes)
        #expect(try logLengths("c").isEmpty)
        #expect(try ask("HMGET", "canvas:session:{c}", "version", "baseVersion") == .array([.bytes(Array("\(StoredSnapshot.maxLogEntries + 2)".utf8)), .bytes(Array("\(StoredSnapshot.maxLogEntries + 2)".utf8))]))
        #expect(try ask("HSTRLEN", "canvas:session:{c}", "base") == .integer(Int64(bytes.count)))
        // Large changes: the log's bytes fold it before they pass half the snapshot.
        for _ in 0..<10 {
            bytes.insert(contentsOf: (0..<20_000).map { _ in UInt8(truncatingIfNeeded: random.next()) }, at: 50_000)
            _ = try writer.write(bytes)
            let logged = try logLengths("c").reduce(0, +)
            guard case .integer(let base) = try ask("HSTRLEN", "canvas:session:{c}", "base") else { Issue.record("no base"); return }
            #expect(logged <= max(Int(base), bytes.count) / 2)
        }
        // A change of everything: written whole at once.
        bytes = (0..<bytes.count).map { _ in UInt8(truncatingIfNeeded: random.next()) }
        _ = try writer.write(bytes)
        #expect(try logLengths("c").isEmpty)
        #expect(try a.takeOver("c", owner: nil)?.assembled(maxCount: 1 << 24).bytes == bytes)
    }

    @Test("a stale writer's delta loses the compare-and-set; a request is recorded once, in a delta write too")
    func compareAndSetAndAnswers() throws {
        let a = try store("a"), b = try store("b")
        var random = SplitMix(seed: 4)
        let first = SnapshotDeltaTests.snapshotLike(&random, count: 50_000)
        #expect(try a.create("s", owner: nil, snapshot: first))
        var writer = Writer(store: a, session: "s", stored: StoredSnapshot(version: 1, bytes: first))
        let answer = SessionSnapshotStore.Answer(key: Array("k1".utf8), entry: Array("reply".utf8))
        #expect(try writer.write(first + [1], answering: answer) == .written(version: 2))
        #expect(try logLengths("s").count == 1)
        #expect(try writer.write(first + [1, 2], answering: answer) == .answered(entry: answer.entry))
        #expect(try logLengths("s").count == 1)
        // A delta made against an old version is refused by version, whoever holds it.
        let stale = writer.stored
        #expect(try writer.write(first + [1, 3]) == .written(version: 3))
        #expect(try a.write("s", stale.change(to: first + [9]), expected: stale.version) == .lost(holder: "a", version: 3))
        // Taken over: a's next delta is refused, and nothing of it is logged.
        let taken = try #require(try b.takeOver("s", owner: nil, asking: answer.key))
        #expect(taken.answer == answer.entry)
        #expect(try taken.assembled(maxCount: 1 << 20).bytes == first + [1, 3])
        #expect(try writer.write(first + [1, 3, 4]) == .lost(holder: "b", version: 3))
        #expect(try logLengths("s").count == 2)
        #expect(try b.read("s")?.assembled(maxCount: 1 << 20).bytes == first + [1, 3])
    }

    @Test("a session stored before the log (its whole snapshot in 'snapshot') is read, and written on as a base and log")
    func sessionsStoredBeforeTheLog() throws {
        let a = try store("a"), b = try store("b")
        var random = SplitMix(seed: 9)
        let old = SnapshotDeltaTests.snapshotLike(&random, count: 40_000)
        // As the earlier script wrote it.
        _ = try admin.command([Array("HSET".utf8), Array("canvas:session:old".utf8), Array("holder".utf8), Array("x".utf8),
                               Array("owner".utf8), [], Array("version".utf8), Array("7".utf8), Array("snapshot".utf8), old],
                              doing: "writing a session as the earlier canvasd did")
        let taken = try #require(try a.takeOver("old", owner: nil))
        #expect(taken == .init(version: 7, bytes: old))
        var writer = Writer(store: a, session: "old", stored: try taken.assembled(maxCount: 1 << 20).stored)
        var next = old
        next.insert(contentsOf: Array("one more stroke".utf8), at: 20_000)
        #expect(try writer.write(next) == .written(version: 8))
        #expect(try ask("EXISTS", "canvas:session:old") == .integer(0), "moved to the tagged keys")
        #expect(try ask("HEXISTS", "canvas:session:{old}", "snapshot") == .integer(0))
        #expect(try ask("HGET", "canvas:session:{old}", "baseVersion") == .bytes(Array("7".utf8)))
        #expect(try logLengths("old").count == 1)
        #expect(try b.takeOver("old", owner: nil)?.assembled(maxCount: 1 << 20).bytes == next)
    }

    @Test("every key of a session has its id as hash tag, so a sharded Redis keeps them on one node")
    func keysShareAHashTag() throws {
        let a = try store("a")
        #expect(try a.create("t1", owner: nil, snapshot: Array("whole".utf8)))
        var writer = Writer(store: a, session: "t1", stored: StoredSnapshot(version: 1, bytes: Array("whole".utf8)))
        _ = try writer.write(Array("whole, and more".utf8), answering: .init(key: Array("k".utf8), entry: Array("e".utf8)))
        _ = try a.write("t1", .operations(OperationEntry.head(version: 3) + [0]), expected: 2)
        guard case .array(let found) = try ask("KEYS", "canvas:session:*") else { Issue.record("no keys"); return }
        let names = found.compactMap(\.string).filter { !$0.contains(":instance:") }.sorted()
        #expect(names == ["canvas:session:{t1}", "canvas:session:{t1}:answered", "canvas:session:{t1}:log", "canvas:session:{t1}:order"])
    }

    @Test("create empties a log an earlier session of the id left; remove takes the log too; every key expires together")
    func keysOfTheLog() throws {
        let a = try store("a", ttl: .seconds(30))
        _ = try ask("RPUSH", "canvas:session:{k}:log", "left over")
        #expect(try a.create("k", owner: nil, snapshot: Array(repeating: 1, count: 1000)))
        #expect(try logLengths("k").isEmpty)
        var writer = Writer(store: a, session: "k", stored: StoredSnapshot(version: 1, bytes: Array(repeating: 1, count: 1000)))
        #expect(try writer.write(Array(repeating: 1, count: 1000) + [2]) == .written(version: 2))
        #expect(try logLengths("k").count == 1)
        for suffix in ["", ":log"] {
            guard case .integer(let left) = try ask("PTTL", "canvas:session:{k}\(suffix)") else { Issue.record("no PTTL"); continue }
            #expect((20_000...30_000).contains(left), "canvas:session:{k}\(suffix) expires in \(left) ms")
        }
        #expect(try a.remove("k") == .removed)
        #expect(try ask("EXISTS", "canvas:session:{k}:log") == .integer(0))
    }

    @Test("a log someone else wrote is refused when assembled, not applied")
    func aForgedLogIsRefused() throws {
        let a = try store("a"), b = try store("b")
        let base = Array(repeating: UInt8(ascii: "x"), count: 5000)
        #expect(try a.create("f", owner: nil, snapshot: base))
        var writer = Writer(store: a, session: "f", stored: StoredSnapshot(version: 1, bytes: base))
        #expect(try writer.write(base + Array("y".utf8)) == .written(version: 2))
        // A delta that reaches past the base, and one out of order.
        let forged = Array("CBD1".utf8) + [2, 0x88, 0x27, 4] + [UInt8](repeating: 0, count: 8) + [0, 0x88, 0x27, 4]
        _ = try admin.command([Array("LSET".utf8), Array("canvas:session:{f}:log".utf8), Array("0".utf8), forged], doing: "forging")
        let taken = try #require(try b.takeOver("f", owner: nil))
        #expect(throws: SnapshotDelta.Refusal.self) { try taken.assembled(maxCount: 1 << 20) }
        let other = SnapshotDelta.make(from: base, to: base + [1], version: 5)
        _ = try admin.command([Array("LSET".utf8), Array("canvas:session:{f}:log".utf8), Array("0".utf8), other], doing: "forging")
        #expect(throws: SnapshotDelta.Refusal.self) { try b.takeOver("f", owner: nil)?.assembled(maxCount: 1 << 20) }
        _ = try ask("HSET", "canvas:session:{f}", "version", "3")
        #expect(throws: SnapshotDelta.Refusal.self) { try b.takeOver("f", owner: nil)?.assembled(maxCount: 1 << 20) }
    }
}
