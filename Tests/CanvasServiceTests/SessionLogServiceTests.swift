@testable import CanvasService
import CanvasCore
import CanvasProtocol
import Foundation
import Logging
import SessionStore
import Testing
import TestSupport

/// Sessions written to Redis as deltas, with real session snapshots: recorded handwriting,
/// stroke by stroke.
@Suite("session changes written as deltas", .serialized)
struct SessionLogServiceTests {
    /// The recorded words as `drawing.addStroke` params, and what each added to a snapshot
    /// before changes were logged as their operations: the stroke (base64 of 24 bytes a point)
    /// and, in the reply cache, its request's fingerprint (the points as JSON). A change sends
    /// less now; these are the bounds the test holds it to.
    static func recordedStrokes(copies: Int) throws -> [(params: [String: JSONValue], storedBytes: Int)] {
        try RecordedHandwriting.page(copies: copies).strokes.map { stroke in
            let params = try JSONCodec.value(of: stroke).objectValue ?? [:]
            let request = Request(id: .integer(1), method: "drawing.addStroke", params: params, session: "5eed")
            return (params, (stroke.points.count * 24 + 2) / 3 * 4 + ReplyCache.fingerprint(request).count)
        }
    }

    /// What Redis has received from every client so far.
    static func bytesReceived(_ redis: RedisConnection) throws -> Int {
        let info = try redis.command(["INFO", "stats"], doing: "reading Redis's counters").string ?? ""
        let line = info.split(whereSeparator: \.isNewline).first { $0.hasPrefix("total_net_input_bytes:") }
        return Int(line?.split(separator: ":").last ?? "") ?? 0
    }

    @Test("a stroke added to a drawing of 48 recorded strokes sends Redis what it adds (the stroke, and its request in the reply cache), not the session; another instance takes it over exactly")
    func aStrokeCostsAStroke() throws {
        let pair = try TwoInstances()
        defer { pair.stop() }
        let redis = try RedisConnection(url: RedisURL(pair.redis.url))
        let session = try pair.openSession()
        _ = try SharedSessionTests.send(pair.toA, id: 2, "canvas.open", session: session)
        let strokes = try Self.recordedStrokes(copies: 2)
        var sent: [(bytes: Int, stroke: Int)] = []
        for (index, stroke) in strokes.enumerated() {
            let before = try Self.bytesReceived(redis)
            let reply = try SharedSessionTests.send(pair.toA, id: Int64(3 + index), "drawing.addStroke", stroke.params, session: session)
            #expect(reply["result"]?["strokes"]?.integerValue == Int64(index + 1))
            // Less the INFO that asked: the count includes it.
            if index >= strokes.count / 2 { sent.append((try Self.bytesReceived(redis) - before - 30, stroke.storedBytes)) }
        }
        let drawingOnA = try SharedSessionTests.send(pair.toA, id: 1000, "drawing.get", session: session)
        let whole = strokes.reduce(0) { $0 + $1.storedBytes }
        // Most changes cost at most what they add to the snapshot and the request's record (less,
        // as a rule: parts of the request's JSON, its pressures say, are copies of earlier ones);
        // now and then one is a whole snapshot, and spread over the others that stays a fraction
        // of what whole snapshots every time would send (the median before the log: 640 kB more
        // than what the change added).
        let costs = sent.map { $0.bytes - $0.stroke }.sorted()
        let median = costs[costs.count / 2]
        #expect(median < 2_000, "a change sent what it added and \(median) bytes more (strokes \(sent.map(\.stroke)), sent \(sent.map(\.bytes)))")
        let total = sent.reduce(0) { $0 + $1.bytes }
        #expect(total < sent.count * whole / 4, "\(total) bytes for \(sent.count) strokes; one snapshot has \(whole) of strokes alone")

        kill(pair.a.process.processIdentifier, SIGKILL)
        pair.a.process.waitUntilExit()
        let drawingOnB = try SharedSessionTests.send(pair.toB, id: 1000, "drawing.get", session: session)
        #expect(drawingOnB["result"] == drawingOnA["result"])
        #expect(drawingOnB["result"]?["strokes"]?.arrayValue?.count == strokes.count)
        // And it goes on from there, its undo history whole.
        #expect(try SharedSessionTests.send(pair.toB, id: 1001, "drawing.undo", session: session)["result"]?["strokes"] == .integer(Int64(strokes.count - 1)))
    }

    /// A session as the service holds one, with its canvas open.
    static func session() throws -> ServiceSession {
        var canvas = CanvasSession(transitions: .instant)
        _ = try canvas.open()
        return ServiceSession(id: "5eed", owner: nil, canvas: canvas, transitions: .instant, size: nil, resultImages: false,
                              lastActive: .now, replies: ReplyCache(limits: Limits()))
    }

    @Test("real snapshots, stroke by stroke with a reply each: every delta makes the next snapshot exactly, about one stroke in size")
    func realSnapshots() throws {
        var session = try Self.session()
        var old = try SessionSnapshot.encode(session)
        let strokes = try RecordedHandwriting.page(copies: 3).strokes
        for (index, stroke) in strokes.enumerated() {
            _ = try session.canvas.edit(.addStroke(stroke))
            session.seq += 1
            session.replies.store(Array(#"{"id":\#(index),"result":{"strokes":\#(index + 1)}}"#.utf8), for: .integer(Int64(index)),
                                  request: Array("request \(index)".utf8))
            let new = try SessionSnapshot.encode(session)
            let delta = SnapshotDelta.make(from: old, to: new, version: UInt64(index + 2))
            #expect(try SnapshotDelta.apply(delta, to: old, maxCount: SessionSnapshot.maxBytes) == new)
            let strokeBytes = (stroke.points.count * 24 + 2) / 3 * 4
            #expect(delta.count < strokeBytes + 600, "stroke \(index): \(delta.count) bytes for a stroke of \(strokeBytes), snapshot \(new.count)")
            old = new
        }
    }

    @Test("through SharedSessions and a real Redis: many changes, then another instance's take-over gives exactly the session")
    func sharedSessionsTakeOver() throws {
        let redis = try RedisProcess()
        let logger = Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })
        let a = SharedSessions(store: try SessionSnapshotStore(url: redis.url, instance: "a", ttl: .seconds(60)), limits: Limits(), logger: logger)
        let b = SharedSessions(store: try SessionSnapshotStore(url: redis.url, instance: "b", ttl: .seconds(60)), limits: Limits(), logger: logger)
        var session = try Self.session()
        let created = try #require(try a.create(session))
        session.storedVersion = created.version
        session.stored = created
        var logged = 0
        for stroke in try RecordedHandwriting.page(copies: 4).strokes {
            _ = try session.canvas.edit(.addStroke(stroke))
            let stored = try #require(try a.persist(session))
            #expect(stored.version == session.storedVersion + 1)
            #expect(stored.bytes == (try SessionSnapshot.encode(session)))
            logged = max(logged, stored.logEntries)
            session.storedVersion = stored.version
            session.stored = stored
        }
        #expect(logged > 4, "the log never held more than \(logged) entries")
        let taken = try #require(try b.takeOver("5eed", owner: nil, connection: nil, now: ContinuousClock.now))
        #expect(taken.session.canvas == session.canvas)
        #expect(taken.session.storedVersion == session.storedVersion)
        #expect(taken.session.stored?.bytes == session.stored?.bytes)
        // The copy left on `a` is stale: its next change is not written.
        _ = try session.canvas.edit(.undo)
        #expect(try a.persist(session) == nil)
    }
}
