@testable import CanvasService
import CanvasCore
import CanvasProtocol
import Foundation
import Logging
import Synchronization
import Testing
import TestSupport

/// The dispatcher driven directly, with no sockets and a made-up clock: every instant below is
/// chosen by the test, so timers and idle expiry are exact, not slept for.
@Suite("dispatcher on a made-up clock")
struct DispatcherTests {
    /// Jobs held until the test lets them run, so a session can be caught while a job holds it.
    final class HeldJobs: Sendable {
        private let held = Mutex<[@Sendable () -> Void]>([])
        var executor: Dispatcher.SaveExecutor { { _, work in self.held.withLock { $0.append(work) } } }
        var count: Int { held.withLock { $0.count } }
        func runAll() {
            for work in held.withLock({ list in defer { list.removeAll() }; return list }) { work() }
        }
    }

    struct Harness {
        let dispatcher: Dispatcher
        let t0 = ContinuousClock.now
        var nextID = 0

        init(idleTimeout: Duration = .seconds(600), saves: Dispatcher.SaveExecutor? = nil, reads: Dispatcher.SaveExecutor? = nil) throws {
            let folder = FileManager.default.temporaryDirectory.appendingPathComponent("dispatcher-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            try Data(PDFFixtures.pdf([.init(), .init(mediaBox: [0, 0, 300, 200])])).write(to: folder.appendingPathComponent("doc.pdf"))
            var configuration = ServiceConfiguration()
            configuration.documentsPath = folder.path
            configuration.idleTimeout = idleTimeout
            dispatcher = Dispatcher(configuration: configuration, logger: Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() }),
                                    saves: saves, reads: reads)
        }

        /// Sends one request at `t0 + ms`; returns the replies that came out, as JSON, and the
        /// events' topics.
        mutating func send(_ method: String, _ params: [String: JSONValue] = [:], session: String? = nil,
                           at ms: Int = 0) -> (replies: [JSONValue], events: [String]) {
            nextID += 1
            let request = Request(id: .integer(Int64(nextID)), method: method, params: params, session: session)
            let output = dispatcher.handle([JSONCodec.serialize(request.json)], envelope: [[UInt8(nextID)]], at: t0 + .milliseconds(ms))
            return (output.replies.map(\.bytes).map(Self.json), output.events.map { String(decoding: $0[0], as: UTF8.self) })
        }

        static func json(_ bytes: [UInt8]) -> JSONValue { (try? JSONCodec.parse(bytes)) ?? .null }
        static func data(_ event: [[UInt8]]) -> JSONValue { json(event[1])["data"] ?? .null }

        mutating func open(_ params: [String: JSONValue] = [:]) throws -> String {
            try #require(send("session.open", params).replies.first?["result"]?["session"]?.stringValue)
        }
    }

    @Test("a timed transition finishes at its deadline, not a moment before, and says the timer did it")
    func timedTransition() throws {
        var harness = try Harness()
        let session = try harness.open(["transitions": ["ms": 80]])
        #expect(harness.send("pencil.doubleTap", session: session, at: 10).replies.first?["result"]?["state"] == "opening")
        #expect(harness.dispatcher.nextDeadline == harness.t0 + .milliseconds(90))
        #expect(harness.dispatcher.fireTimers(at: harness.t0 + .milliseconds(89)).isEmpty)
        let events = harness.dispatcher.fireTimers(at: harness.t0 + .milliseconds(90))
        #expect(events.map { Harness.data($0) } == [["from": "opening", "to": "open", "state": "open", "cause": "timer"]])
        #expect(harness.dispatcher.nextDeadline == nil)
        #expect(harness.send("canvas.state", session: session, at: 91).replies.first?["result"]?["state"] == "open")
    }

    @Test("a read's reply may go out before the turn ends, and is still remembered; a change's never does")
    func replySentAtOnce() throws {
        var harness = try Harness()
        let session = try harness.open()
        var sent: [Dispatcher.Output.Reply] = []
        func handle(_ id: Int64, _ method: String, at ms: Int) -> Dispatcher.Output {
            let frame = JSONCodec.serialize(Request(id: .integer(id), method: method, session: session).json)
            return harness.dispatcher.handle([frame], envelope: [[9]], at: harness.t0 + .milliseconds(ms)) { sent.append($0) }
        }
        let state = handle(100, "canvas.state", at: 1)
        #expect(state.replies.isEmpty && sent.count == 1 && sent[0].envelope == [[9]])
        #expect(Harness.json(sent[0].bytes)["result"]?["state"] == "closed")
        // A change: its events go first, so its reply stays in the output, after them.
        let open = handle(101, "canvas.open", at: 2)
        #expect(sent.count == 1 && open.replies.count == 1 && !open.events.isEmpty)
        // The read was remembered on the way: its retry gets the very same bytes, though the
        // canvas is open now (final too, so it goes at once as well).
        let retry = handle(100, "canvas.state", at: 3)
        #expect(retry.replies.isEmpty && sent.count == 2 && sent[1].bytes == sent[0].bytes)
        _ = handle(102, "canvas.state", at: 4)
        #expect(sent.count == 3 && Harness.json(sent[2].bytes)["result"]?["state"] == "open")
    }

    @Test("session ids are 15 lowercase hex digits and distinct")
    func sessionIDs() throws {
        var harness = try Harness()
        let ids = try (0..<64).map { _ in try harness.open() }
        #expect(Set(ids).count == ids.count)
        for id in ids {
            #expect(id.utf8.count == 15 && id.utf8.allSatisfy { (48...57).contains($0) || (97...102).contains($0) }, "\(id)")
        }
    }

    @Test("a session expires after exactly its idle timeout since it was last used")
    func idleExpiry() throws {
        var harness = try Harness(idleTimeout: .seconds(10))
        let session = try harness.open()
        _ = harness.send("canvas.state", session: session, at: 5_000)
        #expect(harness.dispatcher.expireIdle(at: harness.t0 + .seconds(15)).isEmpty)
        let expired = harness.dispatcher.expireIdle(at: harness.t0 + .milliseconds(15_001))
        #expect(expired.map { String(decoding: $0[0], as: UTF8.self) } == ["\(session).session.expired"])
        #expect(harness.dispatcher.sessionCount == 0)
        #expect(harness.send("canvas.state", session: session, at: 15_002).replies.first?["error"]?["code"] == "UNKNOWN_SESSION")
    }

    @Test("while a save holds a session, its requests wait and are answered in order after it; others' are not held up")
    func queuedBehindSave() throws {
        let saves = HeldJobs()
        var harness = try Harness(saves: saves.executor)
        let session = try harness.open(), other = try harness.open()
        _ = harness.send("canvas.open", ["document": "doc.pdf", "page": 1], session: session)
        _ = harness.send("drawing.addText", ["text": "hi", "x": 10, "y": 10, "fontSize": 12, "color": "black"], session: session)
        #expect(harness.send("canvas.submit", session: session).replies.isEmpty)
        #expect(saves.count == 1)
        #expect(harness.send("canvas.state", session: session).replies.isEmpty)
        #expect(harness.send("no.such", session: session).replies.isEmpty)
        // Another session, and an idle sweep, go on meanwhile; the held session does not expire.
        #expect(harness.send("canvas.state", session: other).replies.first?["result"]?["state"] == "closed")
        #expect(harness.dispatcher.expireIdle(at: harness.t0 + .seconds(3_600)).count == 1)
        saves.runAll()
        let output = harness.dispatcher.collectSaves(at: harness.t0 + .seconds(3_600))
        let replies = output.replies.map { Harness.json($0.bytes) }
        #expect(replies.map { $0["id"] } == [5, 6, 7])
        #expect(replies[0]["result"]?["document"]?["revision"] == 2)
        #expect(replies[1]["result"]?["state"] == "closed")
        #expect(replies[2]["error"]?["code"] == "METHOD_NOT_FOUND")
        #expect(output.events.map { String(decoding: $0[0], as: UTF8.self) }
            == ["\(session).canvas.stateChanged", "\(session).canvas.result", "\(session).document.saved", "documents.document.saved"])
    }

    /// The methods that end or hide a drawing, with the params that ask for its image (a
    /// double-tap's reply never carries one; its event does, with `resultImages`).
    static let resultMethods: [(method: String, params: [String: JSONValue])] = [
        ("canvas.minimize", ["imageData": true]), ("canvas.submit", ["imageData": true]),
        ("canvas.cancel", ["imageData": true]), ("pencil.doubleTap", [:]),
    ]

    @Test("a result whose image is rendered off the loop runs the canvas once; reply and events wait for the image",
          arguments: resultMethods)
    func resultRenderedOffLoop(method: String, params: [String: JSONValue]) throws {
        let reads = HeldJobs()
        var harness = try Harness(reads: reads.executor)
        // 600 x 600 pixels is over what is rendered on the loop (`ActionExecutor.rendersOffLoop`).
        let session = try harness.open(["resultImages": true, "size": ["width": 600, "height": 600]])
        _ = harness.send("canvas.open", session: session)
        let commands = CanvasChangeCount()
        let sent = CanvasChangeCount.$current.withValue(commands) { harness.send(method, params, session: session) }
        #expect(sent.replies.isEmpty && sent.events.isEmpty, "nothing goes before the image")
        #expect(reads.count == 1)
        reads.runAll()
        let output = CanvasChangeCount.$current.withValue(commands) { harness.dispatcher.collectSaves(at: harness.t0) }
        #expect(commands.value == 1, "the canvas changed once for \(method)")
        let reply = try #require(output.replies.first.map { Harness.json($0.bytes) })
        let topics = output.events.map { String(decoding: $0[0], as: UTF8.self) }
        let result = try #require(output.events.first { String(decoding: $0[0], as: UTF8.self).hasSuffix(".canvas.result") })
        #expect(Harness.data(result)["imageData"]?.stringValue?.isEmpty == false)
        if method == "pencil.doubleTap" {
            #expect(reply["result"]?["outcome"] == "minimized")
            #expect(topics == ["\(session).canvas.stateChanged", "\(session).canvas.result", "\(session).pencil.doubleTap"])
        } else {
            #expect(reply["result"]?["imageData"]?.stringValue?.isEmpty == false)
            #expect(topics == ["\(session).canvas.stateChanged", "\(session).canvas.result"])
        }
        // The session is given back: the next request is answered at once.
        #expect(harness.send("canvas.state", session: session).replies.count == 1)
    }

    @Test("a result whose image is small enough runs the canvas once too, its image rendered on the loop", arguments: resultMethods)
    func resultRenderedOnLoop(method: String, params: [String: JSONValue]) throws {
        let reads = HeldJobs()
        var harness = try Harness(reads: reads.executor)
        let session = try harness.open(["resultImages": true, "size": ["width": 40, "height": 30]])
        _ = harness.send("canvas.open", session: session)
        let commands = CanvasChangeCount()
        let sent = CanvasChangeCount.$current.withValue(commands) { harness.send(method, params, session: session) }
        #expect(commands.value == 1, "the canvas changed once for \(method)")
        #expect(reads.count == 0, "no job")
        #expect(sent.replies.count == 1)
        #expect(sent.events.contains("\(session).canvas.result"))
    }

    @Test("a timer due while a job holds its session fires after the job, not never")
    func timerWhileHeld() throws {
        let reads = HeldJobs()
        var harness = try Harness(reads: reads.executor)
        let session = try harness.open(["transitions": ["ms": 50]])
        _ = harness.send("pencil.doubleTap", session: session, at: 0)
        // Held by the page lookup of this open (which the opening canvas will refuse).
        #expect(harness.send("canvas.open", ["document": "doc.pdf"], session: session, at: 1).replies.isEmpty)
        #expect(harness.dispatcher.fireTimers(at: harness.t0 + .milliseconds(60)).isEmpty)
        reads.runAll()
        let output = harness.dispatcher.collectSaves(at: harness.t0 + .milliseconds(70))
        #expect(output.replies.map { Harness.json($0.bytes)["error"]?["data"]?["reason"] } == ["transition"])
        #expect(output.events.map { Harness.data($0)["cause"] } == ["timer"])
        #expect(harness.send("canvas.state", session: session, at: 71).replies.first?["result"]?["state"] == "open")
    }
}

@Suite("session slot")
struct SessionSlotTests {
    static let session = ServiceSession(id: "s", owner: nil, canvas: CanvasSession(pencil: PencilConfiguration(), transitions: .instant),
                                        transitions: .instant, size: nil, resultImages: false, lastActive: .now,
                                        replies: ReplyCache(capacity: 1))

    static func request(_ n: UInt8) -> QueuedWork {
        .request(InFlightRequest(Request(id: .integer(Int64(n)), method: "canvas.state", params: [:], session: "s"), .canvasState,
                                 frames: [[n]], envelope: [], client: nil))
    }

    @Test("ready runs at once; while held (running, a job, a store step) what follows queues, in order, until it is released")
    func queueOrder() {
        var slot = SessionSlot.ready(Self.session)
        #expect(slot.arrive(Self.request(1))?.id == "s")
        #expect(slot.idle == nil)
        #expect(slot.arrive(Self.request(2)) == nil)
        #expect(slot.arrive(.timer(TransitionTicket(number: 1))) == nil)
        #expect(slot.arrive(Self.request(3)) == nil)
        #expect(slot.hold() == nil, "held already")
        let queued = slot.release(Self.session)
        #expect(queued.map { work -> String in
            switch work {
            case .request(let request): return "r\(request.frames[0][0])"
            case .timer: return "t"
            }
        } == ["r2", "t", "r3"])
        #expect(slot.idle?.id == "s")
        #expect(slot.arrive(Self.request(4))?.id == "s")
        #expect(slot.release(Self.session).isEmpty)
        #expect(slot.hold()?.id == "s")
        #expect(slot.release(Self.session).isEmpty)
        #expect(slot.idle != nil)
    }

    @Test("parked, the slot owns the request and its session; what comes meanwhile queues behind it, and unpark hands both back held")
    func parkedRequest() {
        var slot = SessionSlot.ready(Self.session)
        guard case .request(var first) = Self.request(1), let session = slot.arrive(.request(first)) else {
            Issue.record("not handed over")
            return
        }
        first.state = .persisting(.persist(reply: [1]))
        slot.park(session, first)
        #expect(slot.idle == nil && slot.hold() == nil)
        #expect(slot.arrive(Self.request(2)) == nil)
        guard let (back, parked) = slot.unpark() else {
            Issue.record("nothing parked")
            return
        }
        #expect(back?.id == "s" && parked.frames == [[1]])
        if case .persisting(.persist) = parked.state {} else { Issue.record("state lost: \(parked.state)") }
        #expect(slot.unpark() == nil, "held again, not parked")
        #expect(slot.queue.count == 1)
        #expect(slot.release(Self.session).count == 1)
        #expect(slot.idle != nil)
    }

    @Test("a session being taken over is nobody's to subscribe to until the store says whose it is")
    func provisionalOwner() {
        var table = SessionTable()
        let alices = ServiceSession(id: "s", owner: "alice", canvas: CanvasSession(pencil: PencilConfiguration(), transitions: .instant),
                                    transitions: .instant, size: nil, resultImages: false, lastActive: .now, replies: ReplyCache(capacity: 1))
        // Anyone may name any id; while the store is asked, the asker is only provisionally its owner.
        table.insertTakingOver("s", owner: "mallory", connection: nil)
        #expect(table.isOwned("s", by: "mallory"), "what mallory sends meanwhile queues, to be checked again")
        #expect(!table.maySubscribe("mallory", to: Array("s.".utf8)))
        #expect(!table.holds("s"))
        table.adopt(alices)
        #expect(table.maySubscribe("alice", to: Array("s.".utf8)))
        #expect(!table.maySubscribe("mallory", to: Array("s.".utf8)))
        #expect(!table.isOwned("s", by: "mallory"))
    }

    @Test("a session is a value: a copy changed leaves the original as it was, field by field")
    func sessionIsAValue() throws {
        var original = Self.session
        original.canvas.configurePencil(PencilConfiguration(supported: false))
        func text(_ session: ServiceSession) -> String { String(decoding: JSONCodec.serialize(.object(WireShapesTests.state(session))), as: UTF8.self) }
        let before = text(original)
        var copy = original
        copy.canvas.configurePencil(PencilConfiguration(supported: true))
        copy.canvas.initialize()
        _ = try copy.canvas.open()
        copy.replies.store(Array("reply".utf8), for: .integer(1), request: [])
        copy.lastActive = original.lastActive + .seconds(5)
        copy.seq = 9
        copy.size = (width: 3, height: 4)
        copy.target = DocumentTarget(name: "a.pdf", page: 2)
        copy.storedVersion = 4
        #expect(text(original) == before)
        #expect(original.canvas.phase == .closed && !original.canvas.pencil.configuration.supported)
        #expect(original.replies.lookup(.integer(1), request: []).isMiss)
        #expect(original.lastActive < copy.lastActive)
        #expect(original.seq == 0 && original.size == nil && original.target == nil && original.storedVersion == 0)
        #expect(copy.canvas.phase == .open && copy.seq == 9 && copy.storedVersion == 4)
        // And the copy, once unique, is changed in place: the original is not touched again.
        var again = copy
        again.seq = 10
        #expect(copy.seq == 9 && again.seq == 10)
    }
}

extension ReplyCache.Lookup {
    var isMiss: Bool { if case .miss = self { true } else { false } }
}

@Suite("wire shapes")
struct WireShapesTests {
    /// `canvas.state`'s result as the spec lists it, built as values: what the text must equal.
    static func state(_ session: ServiceSession) -> [String: JSONValue] {
        var result: [String: JSONValue] = [
            "state": .string(session.canvas.phase.rawValue),
            "hasContent": .bool(session.canvas.hasContent),
            "seq": .integer(Int64(session.seq)),
            "pencil": WireShapes.pencil(session),
            "tool": WireShapes.tools(session.canvas.pencil.tools),
            "transitions": WireShapes.transitions(session.transitions),
        ]
        if let size = session.size { result["size"] = ["width": .integer(Int64(size.width)), "height": .integer(Int64(size.height))] }
        return result
    }

    @Test("canvas.state's text, written once and kept, is byte for byte the serialized state object after every change")
    func stateText() throws {
        let modes: [TransitionMode] = [.instant, .manual, .timed(milliseconds: 250)]
        for mode in modes {
            for size in [nil, (width: 640, height: 480)] as [(width: Int, height: Int)?] {
                var session = ServiceSession(id: "s", owner: nil,
                                             canvas: CanvasSession(pencil: PencilConfiguration(), transitions: mode, initialized: false),
                                             transitions: mode, size: size, resultImages: false, lastActive: .now,
                                             replies: ReplyCache(capacity: 1))
                for step in 0..<9 {
                    let expected = JSONCodec.serialize(.object(Self.state(session)))
                    // Written, then kept: both must be what the session shows now.
                    #expect(session.stateText() == expected, "mode \(mode), size \(String(describing: size)), step \(step)")
                    #expect(session.stateText() == expected, "kept, mode \(mode), size \(String(describing: size)), step \(step)")
                    // What does not show leaves it as it was.
                    session.lastActive = session.lastActive + .seconds(1)
                    session.replies.store([1], for: .integer(Int64(step)), request: [])
                    #expect(session.stateText() == expected)
                    // Move on, one change of what it shows at a time.
                    switch step {
                    case 0: session.canvas.initialize()
                    case 1: _ = try? session.canvas.open()
                    case 2: _ = try? session.canvas.edit(.addText(try TextAnnotation(text: "a", x: 1, y: 1, fontSize: 12, color: try InkColor("red"))))
                    case 3: _ = session.canvas.doubleTap()
                    case 4: session.size = session.size == nil ? (width: 3, height: 4) : nil
                    case 5: session.canvas.configurePencil(PencilConfiguration(supported: false, policy: .respectPreference))
                    default: session.seq += 7
                    }
                }
            }
        }
    }
}
