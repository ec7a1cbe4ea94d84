import Foundation
import SessionStore
import Testing
import TestSupport

@Suite(.serialized) struct SessionSnapshotStoreTests {
    let redis: RedisProcess
    init() throws { redis = try RedisProcess() }

    func store(_ instance: String, ttl: Duration = .seconds(60)) throws -> SessionSnapshotStore {
        try SessionSnapshotStore(url: redis.url, instance: instance, ttl: ttl)
    }

    @Test func addressesAreRead() throws {
        let url = try RedisURL("redis://:secret@10.1.2.3:7000/4")
        #expect(url.host == "10.1.2.3" && url.port == 7000 && url.database == 4 && url.password == "secret")
        #expect(url.description == "redis://10.1.2.3:7000/4")
        #expect(try RedisURL("redis://localhost").port == 6379)
        #expect(throws: RedisError.self) { try RedisURL("http://localhost:6379") }
        #expect(throws: RedisError.self) { try RedisURL("redis://localhost/x") }
    }

    @Test func sentinelAddressesAreRead() throws {
        let url = try RedisURL("redis-sentinel://:secret@10.0.0.1,10.0.0.2:26380,[::1]:26381/canvas/2")
        #expect(url.sentinel?.master == "canvas" && url.database == 2 && url.password == "secret")
        #expect(url.sentinel?.addresses.map(\.description) == ["10.0.0.1:26379", "10.0.0.2:26380", "[::1]:26381"])
        #expect(url.description == "redis-sentinel://10.0.0.1:26379,10.0.0.2:26380,[::1]:26381/canvas/2")
        #expect(try RedisURL("redis-sentinel://s1/main").sentinel?.addresses.first?.port == 26379)
        for bad in ["redis-sentinel://s1", "redis-sentinel://s1/", "redis-sentinel://s1:x/m", "redis-sentinel://,s1/m", "redis-sentinel://s1/m/x"] {
            #expect(throws: RedisError.self, "\(bad)") { try RedisURL(bad) }
        }
    }

    /// With replicas asked for and none there, every write fails and says so (a write the primary
    /// alone holds is lost with it); reads still answer.
    @Test func aWriteNoReplicaConfirmsFails() throws {
        let plain = try store("a")
        #expect(try plain.create("r", owner: nil, snapshot: [1]))
        let waiting = try SessionSnapshotStore(url: redis.url, instance: "a", ttl: .seconds(60), replicas: 1, replicaTimeout: .milliseconds(50))
        do {
            _ = try waiting.write("r", snapshot: [2], expected: 1)
            Issue.record("a write was taken with no replica to confirm it")
        } catch {
            #expect(error.cause == .unreplicated(wanted: 1, confirmed: 0), "\(error)")
            #expect(error.description.contains("0 of the 1 replicas"))
        }
        #expect(try waiting.read("r") != nil)
    }

    @Test func aRefusedConnectionSaysWhatAndWhy() throws {
        let port = redis.port
        redis.stop()
        do {
            _ = try SessionSnapshotStore(url: "redis://127.0.0.1:\(port)/0", instance: "a", ttl: .seconds(1))
            Issue.record("connected to a stopped server")
        } catch {
            #expect(error.description.contains("connecting to the session store at redis://127.0.0.1:\(port)/0"))
            #expect(error.description.contains("Connection refused"))
        }
    }

    @Test func writesCompareAndSet() throws {
        let a = try store("a"), b = try store("b")
        #expect(try a.create("s1", owner: nil, snapshot: Array("v1".utf8)))
        #expect(try !b.create("s1", owner: nil, snapshot: Array("other".utf8)))    // ids are unique
        #expect(try a.write("s1", snapshot: Array("v2".utf8), expected: 1) == .written(version: 2))
        // A stale version is refused, and says what is there.
        #expect(try a.write("s1", snapshot: Array("stale".utf8), expected: 1) == .lost(holder: "a", version: 2))
        // b is not the holder until it takes over.
        #expect(try b.write("s1", snapshot: Array("b".utf8), expected: 2) == .lost(holder: "a", version: 2))
        let taken = try #require(try b.takeOver("s1", owner: nil))
        #expect(taken == .init(version: 2, bytes: Array("v2".utf8)))
        // Now a's writes fail, whatever version it names, and b's land.
        #expect(try a.write("s1", snapshot: Array("a3".utf8), expected: 2) == .lost(holder: "b", version: 2))
        #expect(try b.write("s1", snapshot: Array("b3".utf8), expected: 2) == .written(version: 3))
        #expect(try a.inspect("s1")! == ("b", 3))
        #expect(try !a.confirm("s1", expected: 3))
        #expect(try b.confirm("s1", expected: 3))
        #expect(try !b.confirm("s1", expected: 2))
        // Only the holder removes it; once gone, removing it says so (an idle session the store
        // let go before its holder's sweep still expires there, announced).
        #expect(try a.remove("s1") == .heldElsewhere)
        #expect(try b.remove("s1") == .removed)
        #expect(try b.remove("s1") == .absent)
        #expect(try a.remove("s1") == .absent)
        #expect(try a.takeOver("s1", owner: nil) == nil)
        #expect(try b.write("s1", snapshot: [], expected: 3) == .lost(holder: nil, version: nil))
    }

    @Test func aRequestIsRecordedOnceWhoeverWritesIt() throws {
        let a = try store("a"), b = try store("b")
        #expect(try a.create("s2", owner: nil, snapshot: Array("v1".utf8)))
        let first = SessionSnapshotStore.Answer(key: Array("k1".utf8), entry: Array("reply one".utf8))
        #expect(try a.write("s2", snapshot: Array("v2".utf8), expected: 1, answering: first) == .written(version: 2))
        // The same request again, from the holder at the right version: refused, with the entry.
        let again = SessionSnapshotStore.Answer(key: first.key, entry: Array("reply two".utf8))
        #expect(try a.write("s2", snapshot: Array("v3".utf8), expected: 2, answering: again) == .answered(entry: first.entry))
        #expect(try a.inspect("s2")! == ("a", 2))
        // A fence: not for a request already answered, nor for a stale holder.
        #expect(try !a.confirm("s2", expected: 2, unanswered: first.key))
        #expect(try a.confirm("s2", expected: 2, unanswered: Array("k2".utf8)))
        // Another instance taking over learns the answer with the snapshot.
        let taken = try #require(try b.takeOver("s2", owner: nil, asking: first.key))
        #expect(taken == .init(version: 2, bytes: Array("v2".utf8), answer: first.entry))
        #expect(try b.takeOver("s2", owner: nil, asking: Array("k2".utf8))?.answer == nil)
        #expect(try !a.confirm("s2", expected: 2, unanswered: Array("k2".utf8)))
        // The oldest answers go once more than `answersKept` are recorded.
        for index in 0..<SessionSnapshotStore.answersKept {
            let answer = SessionSnapshotStore.Answer(key: Array("n\(index)".utf8), entry: [1])
            #expect(try b.write("s2", snapshot: [], expected: UInt64(2 + index), answering: answer) == .written(version: UInt64(3 + index)))
        }
        #expect(try b.takeOver("s2", owner: nil, asking: first.key)?.answer == nil)
        #expect(try b.takeOver("s2", owner: nil, asking: Array("n0".utf8))?.answer == [1])
        // Removing the session removes its record; a new one of that id starts with none.
        #expect(try b.remove("s2") == .removed)
        #expect(try a.create("s2", owner: nil, snapshot: []))
        #expect(try a.takeOver("s2", owner: nil, asking: Array("n0".utf8))?.answer == nil)
    }

    @Test func binarySnapshotsStayExact() throws {
        let a = try store("a")
        let bytes = (0..<70_000).map { UInt8(truncatingIfNeeded: $0 &* 31) }   // zeros, \r\n, everything
        #expect(try a.create("bin", owner: "key", snapshot: bytes))
        #expect(try a.takeOver("bin", owner: "key")?.bytes == bytes)
        #expect(try a.write("bin", snapshot: [], expected: 1) == .written(version: 2))
        #expect(try a.takeOver("bin", owner: "key")?.bytes == [])
    }

    @Test func anotherClientsSessionIsNotFound() throws {
        let a = try store("a"), b = try store("b")
        #expect(try a.create("mine", owner: "alice", snapshot: [1]))
        #expect(try b.takeOver("mine", owner: "mallory") == nil)
        #expect(try b.takeOver("mine", owner: nil) == nil)
        #expect(try a.inspect("mine")!.holder == "a")   // and nothing was taken
        #expect(try a.owner(of: "mine") == "alice")
    }

    @Test func sessionsExpireUnlessTouched() throws {
        let a = try store("a", ttl: .milliseconds(300))
        #expect(try a.create("t", owner: nil, snapshot: [1]))
        #expect(try a.create("u", owner: nil, snapshot: [2]))
        for _ in 0..<4 {
            usleep(150_000)
            #expect(try a.confirm("t", expected: 1))
        }
        #expect(try !a.confirm("t", expected: 2))
        #expect(try a.inspect("t") != nil)
        #expect(try a.inspect("u") == nil)
    }

    @Test func scriptsAreLoadedAgainAfterAFlush() throws {
        let a = try store("a")
        #expect(try a.create("f", owner: nil, snapshot: [1]))
        let admin = try RedisConnection(url: RedisURL(redis.url))
        _ = try admin.command(["SCRIPT", "FLUSH"], doing: "flushing scripts")
        #expect(try a.write("f", snapshot: [2], expected: 1) == .written(version: 2))
    }

    @Test func aLostConnectionIsMadeAgainOnTheNextCommand() throws {
        let a = try store("a")
        #expect(try a.create("c", owner: nil, snapshot: [1]))
        let admin = try RedisConnection(url: RedisURL(redis.url))
        _ = try admin.command(["CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes"], doing: "dropping clients")
        // The first command after the drop fails with the native cause; the next connects again.
        #expect(throws: RedisError.self) { try a.write("c", snapshot: [2], expected: 1) }
        #expect(try a.write("c", snapshot: [2], expected: 1) == .written(version: 2))
    }
}
