import CanvasClient
import CanvasProtocol
import DocumentStore
import Foundation
import SessionStore
import Synchronization
import Testing
import TestSupport

/// A real Redis and two real canvasd instances sharing it, `a` and `b`, with a client for each.
struct TwoInstances {
    let redis: RedisProcess
    let a: LiveServer
    let b: LiveServer
    let toA: CanvasClient
    let toB: CanvasClient

    init() throws {
        redis = try RedisProcess()
        a = try LiveServer(arguments: ["--session-store", redis.url, "--instance", "a"])
        b = try LiveServer(arguments: ["--session-store", redis.url, "--instance", "b"])
        toA = try a.client()
        toB = try b.client()
    }

    /// Opens a session on `a` (request id 1) and returns its id.
    func openSession(transitions: JSONValue = "instant") throws -> String {
        let opened = try SharedSessionTests.send(toA, id: 1, "session.open", ["transitions": transitions], session: nil)
        return try #require(opened["result"]?["session"]?.stringValue)
    }

    func stop() {
        a.stop()
        b.stop()
    }
}

/// Two real canvasd processes sharing one real Redis: a session moves from one to the other
/// when the first is killed, exactly as last acknowledged.
@Suite("sessions shared through Redis", .serialized)
struct SharedSessionTests {
    /// Sends a request with a chosen id and returns the parsed reply.
    static func send(_ client: CanvasClient, id: Int64, _ method: String, _ params: [String: JSONValue] = [:],
                     session: String?) throws -> JSONValue {
        let request = Request(id: .integer(id), method: method, params: params, session: session)
        return try client.exchange([JSONCodec.serialize(request.json)], method: method)
    }

    static let stroke: [String: JSONValue] = [
        "tool": "pen", "color": "blue", "width": 3,
        "points": [["x": 10, "y": 20, "pressure": 0.5], ["x": 30.25, "y": 40.5]],
    ]

    @Test("a killed instance's session is answered by another: retries from the cache, drawing, history and seq as acknowledged")
    func failover() throws {
        let pair = try TwoInstances()
        defer { pair.stop() }
        let a = pair.a, b = pair.b, toA = pair.toA, toB = pair.toB

        let session = try pair.openSession()
        _ = try Self.send(toA, id: 2, "canvas.open", session: session)
        for id in Int64(3)...5 { _ = try Self.send(toA, id: id, "drawing.addStroke", Self.stroke, session: session) }
        _ = try Self.send(toA, id: 6, "drawing.undo", session: session)
        let tapped = try Self.send(toA, id: 7, "pencil.doubleTap", session: session)   // minimized
        #expect(tapped["result"]?["outcome"] == "minimized")
        let reopened = try Self.send(toA, id: 8, "pencil.doubleTap", session: session)
        let drawingOnA = try Self.send(toA, id: 9, "drawing.get", session: session)
        let stateOnA = try Self.send(toA, id: 10, "canvas.state", session: session)
        let seq = try #require(stateOnA["result"]?["seq"]?.integerValue)

        let events = try EventSubscriber(endpoint: b.events, prefix: "\(session).")
        _ = try events.next(timeoutMilliseconds: 200)
        kill(a.process.processIdentifier, SIGKILL)
        a.process.waitUntilExit()

        // A retry of an answered request: the same reply, and nothing runs twice.
        #expect(try Self.send(toB, id: 8, "pencil.doubleTap", session: session) == reopened)
        #expect(try Self.send(toB, id: 7, "pencil.doubleTap", session: session) == tapped)
        // The drawing exactly as acknowledged, with its undo and redo history.
        let drawingOnB = try Self.send(toB, id: 11, "drawing.get", session: session)
        #expect(drawingOnB["result"] == drawingOnA["result"])
        #expect(drawingOnB["result"]?["canRedo"] == true)
        #expect(drawingOnB["result"]?["strokes"]?.arrayValue?.count == 2)
        #expect(try Self.send(toB, id: 12, "drawing.redo", session: session)["result"]?["strokes"] == 3)
        // Events go on with the next seq.
        let stateOnB = try Self.send(toB, id: 13, "canvas.state", session: session)
        #expect(stateOnB["result"]?["seq"]?.integerValue == seq)
        _ = try Self.send(toB, id: 14, "pencil.doubleTap", session: session)
        let event = try #require(try events.next(timeoutMilliseconds: 2_000))
        #expect(event.topic == "\(session).canvas.stateChanged")
        #expect(event.body["seq"]?.integerValue == seq + 1)
    }

    @Test("a stroke half sent in parts when its instance dies is finished on the one that takes the session over")
    func strokePartsMove() throws {
        let pair = try TwoInstances()
        defer { pair.stop() }
        let a = pair.a, toA = pair.toA, toB = pair.toB
        let session = try pair.openSession()
        _ = try Self.send(toA, id: 2, "canvas.open", session: session)
        var first = Self.stroke
        first["continued"] = true
        let waiting = try Self.send(toA, id: 3, "drawing.addStroke", first, session: session)
        #expect(waiting["result"]?["pendingPoints"] == 2)
        kill(a.process.processIdentifier, SIGKILL)
        a.process.waitUntilExit()

        var last = Self.stroke
        last["points"] = [["x": 50, "y": 60.75]]
        let done = try Self.send(toB, id: 4, "drawing.addStroke", last, session: session)
        #expect(done["result"]?["strokes"] == 1)
        let drawing = try Self.send(toB, id: 5, "drawing.get", session: session)
        let points = try #require(drawing["result"]?["strokes"]?.arrayValue?.first?["points"]?.arrayValue)
        #expect(points.map { [$0["x"]?.doubleValue, $0["y"]?.doubleValue] } == [[10, 20], [30.25, 40.5], [50, 60.75]])
        // One stroke, one undo step.
        #expect(try Self.send(toB, id: 6, "drawing.undo", session: session)["result"]?["strokes"] == 0)
    }

    @Test("a joined stroke half sent when its instance dies joins the step before it on the one that takes the session over")
    func joinedPartsMove() throws {
        let pair = try TwoInstances()
        defer { pair.stop() }
        let a = pair.a, toA = pair.toA, toB = pair.toB
        let session = try pair.openSession()
        _ = try Self.send(toA, id: 2, "canvas.open", session: session)
        _ = try Self.send(toA, id: 3, "drawing.addStroke", Self.stroke, session: session)
        var first = Self.stroke
        first["joined"] = true
        first["continued"] = true
        first["points"] = [["x": 30.25, "y": 40.5], ["x": 35, "y": 45]]
        #expect(try Self.send(toA, id: 4, "drawing.addStroke", first, session: session)["result"]?["pendingPoints"] == 2)
        kill(a.process.processIdentifier, SIGKILL)
        a.process.waitUntilExit()

        var last = Self.stroke
        last["joined"] = true
        last["points"] = [["x": 50, "y": 60.75]]
        #expect(try Self.send(toB, id: 5, "drawing.addStroke", last, session: session)["result"]?["strokes"] == 2)
        // The session's history came over as drawings: B works out that the stroke continues
        // the step A made, and one undo takes both strokes back.
        let undone = try Self.send(toB, id: 6, "drawing.undo", session: session)["result"]
        #expect(undone?["strokes"] == 0 && undone?["canUndo"] == false)
        #expect(try Self.send(toB, id: 7, "drawing.redo", session: session)["result"]?["strokes"] == 2)
    }

    @Test("two live instances never both act on a session: a stale copy is dropped and the request answered on the stored one")
    func noTwoInstancesAtOnce() throws {
        let pair = try TwoInstances()
        defer { pair.stop() }
        let toA = pair.toA, toB = pair.toB
        let session = try pair.openSession()
        _ = try Self.send(toA, id: 2, "canvas.open", session: session)
        _ = try Self.send(toA, id: 3, "drawing.addStroke", Self.stroke, session: session)
        // b takes it over and draws; a still holds its old copy.
        #expect(try Self.send(toB, id: 4, "drawing.addStroke", Self.stroke, session: session)["result"]?["strokes"] == 2)
        // a's read and a's write both see b's stroke: its copy was stale, so it took the session back.
        #expect(try Self.send(toA, id: 5, "drawing.get", session: session)["result"]?["strokes"]?.arrayValue?.count == 2)
        #expect(try Self.send(toA, id: 6, "drawing.addStroke", Self.stroke, session: session)["result"]?["strokes"] == 3)
        #expect(try Self.send(toB, id: 7, "drawing.addStroke", Self.stroke, session: session)["result"]?["strokes"] == 4)
        let store = try SessionSnapshotStore(url: pair.redis.url, instance: "inspector", ttl: .seconds(60))
        #expect(try store.inspect(session)! == ("b", 6))   // open, and five acknowledged changes
        // Closed on one, gone for all.
        #expect(try Self.send(toA, id: 8, "session.close", session: session)["result"]?["closed"] == true)
        #expect(try Self.send(toB, id: 9, "canvas.state", session: session)["error"]?["code"] == "UNKNOWN_SESSION")
        #expect(try store.inspect(session) == nil)
    }

    @Test("without Redis, canvasd says so and does not start")
    func unreachableStore() throws {
        let folder = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("canvasd-nostore-\(getpid())")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let process = Process()
        process.executableURL = LiveServer.executable
        process.arguments = ["--endpoint", "ipc://\(folder.path)/r", "--events", "ipc://\(folder.path)/e", "--documents", folder.path,
                             "--session-store", "redis://127.0.0.1:1/0"]
        let errors = Pipe()
        process.standardError = errors
        try process.run()
        process.waitUntilExit()
        let text = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        #expect(process.terminationStatus != 0)
        #expect(text.contains("connecting to the session store at redis://127.0.0.1:1/0: Connection refused"))
    }
}

@Suite("sessions shared through Redis: timers and outages", .serialized)
struct SharedSessionEdgeTests {
    @Test("a timed transition under way when its instance dies is finished by the instance that takes it over")
    func timedTransitionMoves() throws {
        let pair = try TwoInstances()
        defer { pair.stop() }
        let a = pair.a, b = pair.b, toA = pair.toA, toB = pair.toB
        let session = try pair.openSession(transitions: ["ms": 400])
        #expect(try SharedSessionTests.send(toA, id: 2, "canvas.open", session: session)["result"]?["state"] == "opening")
        kill(a.process.processIdentifier, SIGKILL)
        a.process.waitUntilExit()
        let events = try EventSubscriber(endpoint: b.events, prefix: "\(session).")
        _ = try events.next(timeoutMilliseconds: 200)
        let state = try SharedSessionTests.send(toB, id: 3, "canvas.state", session: session)
        #expect(state["result"]?["state"] == "opening")
        let seq = try #require(state["result"]?["seq"]?.integerValue)
        let event = try #require(try events.next(timeoutMilliseconds: 2_000))
        #expect(event.topic == "\(session).canvas.stateChanged")
        #expect(event.body["seq"]?.integerValue == seq + 1)
        #expect(event.body["data"]?["to"] == "open" && event.body["data"]?["cause"] == "timer")
        #expect(try SharedSessionTests.send(toB, id: 4, "canvas.state", session: session)["result"]?["state"] == "open")
    }

    @Test("a submit whose instance lost the session during its save takes it back and answers the one save; sent again to the other instance, the same reply")
    func retriedSubmitSavesOnce() throws {
        let redis = try RedisProcess()
        let folder = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("canvasd-shared-\(UInt32.random(in: 0...UInt32.max))")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let document = folder.appendingPathComponent("doc.pdf")
        try Data(PDFFixtures.pdf([.init(mediaBox: [0, 0, 300, 200], content: "")])).write(to: document)
        // Two instances on one document folder, as behind HAProxy.
        let a = try LiveServer(arguments: ["--session-store", redis.url, "--instance", "a"], folder: folder)
        let b = try LiveServer(arguments: ["--session-store", redis.url, "--instance", "b", "--events", "ipc://\(folder.path)/events-b"],
                               endpoint: "ipc://\(folder.path)/requests-b", folder: folder)
        defer { a.stop(); b.stop() }
        let toA = try a.client(), toB = try b.client()
        let opened = try SharedSessionTests.send(toA, id: 1, "session.open", ["transitions": "instant"], session: nil)
        let session = try #require(opened["result"]?["session"]?.stringValue)
        _ = try SharedSessionTests.send(toA, id: 2, "canvas.open", ["document": "doc.pdf"], session: session)
        _ = try SharedSessionTests.send(toA, id: 3, "drawing.addStroke", SharedSessionTests.stroke, session: session)

        // a's save waits for the document's lock (the `lock` file of its history), held here,
        // while b takes the session over.
        let history = folder.appendingPathComponent(".canvas-revisions/doc.pdf")
        try FileManager.default.createDirectory(at: history, withIntermediateDirectories: true)
        let held = open(history.appendingPathComponent("lock").path, O_RDWR | O_CREAT, 0o644)
        #expect(held >= 0 && flock(held, LOCK_EX) == 0)
        let first = Mutex<JSONValue?>(nil)
        let endpointA = a.endpoint
        let submitting = Thread {
            // A client of its own: one socket is never shared between threads.
            let client = try? CanvasClient(endpoint: endpointA, timeoutMilliseconds: 10_000)
            let reply = client.flatMap { try? SharedSessionTests.send($0, id: 4, "canvas.submit", session: session) }
            first.withLock { $0 = reply }
        }
        submitting.start()
        // Time for a to receive the submit and start its save, which then waits for the lock
        // (sub-millisecond on an idle machine; the margin is for a loaded one).
        usleep(500_000)
        #expect(try SharedSessionTests.send(toB, id: 5, "canvas.state", session: session)["result"]?["state"] == "open")
        flock(held, LOCK_UN)
        close(held)
        var waited = 0
        while first.withLock({ $0 == nil }) && waited < 500 { usleep(10_000); waited += 1 }
        // a saved revision 2, but could not record it in the session it no longer held: it took
        // the session back and ran the submit on it as stored, which found its own save.
        let answered = try #require(first.withLock { $0 })
        #expect(answered["result"]?["document"]?["revision"] == 2, "\(answered)")

        // The same request on b answers the same, from the store's record.
        let retried = try SharedSessionTests.send(toB, id: 4, "canvas.submit", session: session)
        #expect(retried == answered)
        let bytes = Array(try Data(contentsOf: document))
        #expect(retried["result"]?["document"]?["revision"] == 2)
        #expect(retried["result"]?["document"]?["sha256"]?.stringValue == DocumentStore.sha256(bytes))
        let revisions = try SharedSessionTests.send(toB, id: 6, "document.revisions", ["name": "doc.pdf"], session: session)
        #expect(revisions["result"]?["revisions"]?.arrayValue?.count == 2, "one save, not two")
        #expect(try SharedSessionTests.send(toB, id: 7, "canvas.state", session: session)["result"]?["state"] == "closed")
    }

    @Test("with Redis gone, a change is not acknowledged: UNAVAILABLE sessionStore, and nothing published")
    func storeOutage() throws {
        let redis = try RedisProcess()
        let a = try LiveServer(arguments: ["--session-store", redis.url, "--instance", "a"])
        defer { a.stop() }
        let toA = try a.client()
        let opened = try SharedSessionTests.send(toA, id: 1, "session.open", ["transitions": "instant"], session: nil)
        let session = try #require(opened["result"]?["session"]?.stringValue)
        let events = try EventSubscriber(endpoint: a.events, prefix: "\(session).")
        _ = try events.next(timeoutMilliseconds: 200)
        redis.stop()
        let reply = try SharedSessionTests.send(toA, id: 2, "canvas.open", session: session)
        #expect(reply["error"]?["code"] == "UNAVAILABLE")
        #expect(reply["error"]?["data"]?["reason"] == "sessionStore")
        #expect(try events.next(timeoutMilliseconds: 300) == nil)
        #expect(a.process.isRunning)
    }

    /// Two instances on one document folder and one Redis, addressed directly.
    struct SharedFolder {
        let redis: RedisProcess
        let folder: URL
        let a: LiveServer
        let b: LiveServer

        init(documents: [String]) throws {
            redis = try RedisProcess()
            folder = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("canvasd-fence-\(UInt32.random(in: 0...UInt32.max))")
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            for name in documents {
                try Data(PDFFixtures.pdf([.init(mediaBox: [0, 0, 300, 200], content: "")])).write(to: folder.appendingPathComponent(name))
            }
            a = try LiveServer(arguments: ["--session-store", redis.url, "--instance", "a"], folder: folder)
            b = try LiveServer(arguments: ["--session-store", redis.url, "--instance", "b", "--events", "ipc://\(folder.path)/events-b"],
                               endpoint: "ipc://\(folder.path)/requests-b", folder: folder)
        }

        func stop() {
            a.stop()
            b.stop()
            try? FileManager.default.removeItem(at: folder)
        }
    }

    static let red: [String: JSONValue] = [
        "tool": "pen", "color": "red", "width": 3, "points": [["x": 10, "y": 20], ["x": 30, "y": 40]],
    ]

    @Test("a submit on an instance whose copy is stale saves the session as stored, never the stale drawing",
          arguments: ["x.pdf", "y.pdf"])
    func staleCopyNeverSaves(reopened: String) throws {
        let pair = try SharedFolder(documents: ["x.pdf", "y.pdf"])
        defer { pair.stop() }
        let toA = try pair.a.client(), toB = try pair.b.client()
        let opened = try SharedSessionTests.send(toA, id: 1, "session.open", ["transitions": "instant"], session: nil)
        let session = try #require(opened["result"]?["session"]?.stringValue)
        _ = try SharedSessionTests.send(toA, id: 2, "canvas.open", ["document": "x.pdf"], session: session)
        _ = try SharedSessionTests.send(toA, id: 3, "drawing.addStroke", Self.red, session: session)
        // The client moves to b: submits there, opens a document again and draws.
        let submitted = try SharedSessionTests.send(toB, id: 4, "canvas.submit", session: session)
        #expect(submitted["result"]?["document"]?["revision"] == 2)
        _ = try SharedSessionTests.send(toB, id: 5, "canvas.open", ["document": .string(reopened)], session: session)
        _ = try SharedSessionTests.send(toB, id: 6, "drawing.addStroke", SharedSessionTests.stroke, session: session)
        // Back on a, which still has its copy from before the first submit.
        let second = try SharedSessionTests.send(toA, id: 7, "canvas.submit", session: session)
        #expect(second["error"] == nil, "answered on the session as stored: \(second)")
        #expect(second["result"]?["document"]?["name"] == .string(reopened))
        #expect(second["result"]?["document"]?["revision"]?.integerValue == (reopened == "x.pdf" ? 3 : 2))
        // The retry answers the same, on either instance.
        #expect(try SharedSessionTests.send(toA, id: 7, "canvas.submit", session: session) == second)
        #expect(try SharedSessionTests.send(toB, id: 7, "canvas.submit", session: session) == second)
        // Exactly the revisions acknowledged: none from a's stale drawing.
        let x = try SharedSessionTests.send(toB, id: 8, "document.revisions", ["name": "x.pdf"], session: session)
        #expect(x["result"]?["revisions"]?.arrayValue?.count == (reopened == "x.pdf" ? 3 : 2))
        let y = try SharedSessionTests.send(toB, id: 9, "document.revisions", ["name": "y.pdf"], session: session)
        #expect(y["result"]?["revisions"]?.arrayValue?.count == (reopened == "y.pdf" ? 2 : 1))
        let current = Array(try Data(contentsOf: pair.folder.appendingPathComponent(reopened)))
        #expect(second["result"]?["document"]?["sha256"]?.stringValue == DocumentStore.sha256(current))
    }

    @Test("an instance paused with a request, answered meanwhile by another, does not run it again when it wakes")
    func pausedInstanceDoesNotRunTwice() throws {
        let pair = try TwoInstances()
        defer { pair.stop() }
        let toA = pair.toA, toB = pair.toB
        let session = try pair.openSession()
        _ = try SharedSessionTests.send(toA, id: 2, "canvas.open", session: session)
        kill(pair.a.process.processIdentifier, SIGSTOP)
        // The request reaches a, which cannot answer; the client sends it again, to b.
        let late = Mutex<JSONValue?>(nil)
        let endpointA = pair.a.endpoint
        let waiting = Thread {
            let client = try? CanvasClient(endpoint: endpointA, timeoutMilliseconds: 20_000)
            let reply = client.flatMap { try? SharedSessionTests.send($0, id: 3, "drawing.addStroke", SharedSessionTests.stroke, session: session) }
            late.withLock { $0 = reply }
        }
        waiting.start()
        usleep(300_000)
        let answered = try SharedSessionTests.send(toB, id: 3, "drawing.addStroke", SharedSessionTests.stroke, session: session)
        #expect(answered["result"]?["strokes"] == 1)
        // More than the 64 replies a session's own cache keeps, each a change.
        for id in Int64(4)..<84 {
            let method = id % 2 == 0 ? "drawing.addStroke" : "drawing.undo"
            _ = try SharedSessionTests.send(toB, id: id, method, method == "drawing.undo" ? [:] : Self.red, session: session)
        }
        kill(pair.a.process.processIdentifier, SIGCONT)
        var waited = 0
        while late.withLock({ $0 == nil }) && waited < 1000 { usleep(10_000); waited += 1 }
        // a answers its copy of the request with the reply b gave, and runs nothing.
        #expect(late.withLock { $0 } == answered)
        let drawing = try SharedSessionTests.send(toB, id: 84, "drawing.get", session: session)
        #expect(drawing["result"]?["strokes"]?.arrayValue?.count == 1, "one stroke acknowledged: \(drawing)")
        // The client, back on a with a new request, is served on the session as stored.
        let next = try SharedSessionTests.send(toA, id: 85, "drawing.addStroke", SharedSessionTests.stroke, session: session)
        #expect(next["result"]?["strokes"] == 2)
    }
}
