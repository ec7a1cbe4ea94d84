@testable import CanvasService
import CanvasProtocol
import DocumentStore
import Foundation
import Logging
import Synchronization
import Testing
import TestSupport

/// Limits counted per owner (a web token's owner, a CurveZMQ key, or the local owner), not per
/// connection: the dispatcher driven directly, each request from a connection of its own.
@Suite("limits per owner")
struct OwnerLimitsTests {
    struct Harness {
        let dispatcher: Dispatcher
        let t0 = ContinuousClock.now
        var nextID = 0

        init(limits: Limits = Limits(), reads: Dispatcher.SaveExecutor? = nil) throws {
            let folder = FileManager.default.temporaryDirectory.appendingPathComponent("owners-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            try Data(PDFFixtures.pdf([.init()])).write(to: folder.appendingPathComponent("doc.pdf"))
            var configuration = ServiceConfiguration()
            configuration.documentsPath = folder.path
            configuration.limits = limits
            dispatcher = Dispatcher(configuration: configuration, logger: Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() }),
                                    reads: reads)
        }

        /// One request from `owner` on a connection no other request used.
        mutating func send(_ method: String, _ params: [String: JSONValue] = [:], session: String? = nil,
                           from owner: String?) -> (replies: [JSONValue], events: [[[UInt8]]]) {
            nextID += 1
            let request = Request(id: .integer(Int64(nextID)), method: method, params: params, session: session)
            let connection = Array("connection \(nextID)".utf8)
            let output = dispatcher.handle([JSONCodec.serialize(request.json)], envelope: [connection], from: owner, at: t0)
            return (output.replies.map { (try? JSONCodec.parse($0.bytes)) ?? .null }, output.events)
        }

        mutating func open(_ params: [String: JSONValue] = [:], from owner: String?) throws -> String {
            try #require(send("session.open", params, from: owner).replies.first?["result"]?["session"]?.stringValue)
        }
    }

    @Test("one owner over eleven connections holds at most maxSessionsPerOwner sessions; others still get theirs")
    func sessionsPerOwner() throws {
        var limits = Limits()
        limits.maxSessionsPerOwner = 5
        var harness = try Harness(limits: limits)
        var alices: [String] = []
        for _ in 0..<5 { alices.append(try harness.open(from: "web:alice")) }
        for _ in 0..<6 {
            let refused = harness.send("session.open", from: "web:alice").replies.first?["error"]
            #expect(refused?["code"] == "UNAVAILABLE")
            #expect(refused?["data"] == ["reason": "ownerSessions", "limit": 5])
        }
        #expect(harness.dispatcher.sessionCount == 5)
        _ = try harness.open(from: "web:bob")
        _ = try harness.open(from: nil)
        _ = harness.send("session.close", session: alices[0], from: "web:alice")
        _ = try harness.open(from: "web:alice")
    }

    @Test("the local owner is every unauthenticated connection together")
    func localOwner() throws {
        var limits = Limits()
        limits.maxSessionsPerOwner = 3
        var harness = try Harness(limits: limits)
        for _ in 0..<3 { _ = try harness.open(from: nil) }
        #expect(harness.send("session.open", from: nil).replies.first?["error"]?["data"]?["reason"] == "ownerSessions")
    }

    @Test("one owner has at most maxPendingReadsPerOwner reads waiting; another owner's still start")
    func readsPerOwner() throws {
        let reads = DispatcherTests.HeldJobs()
        var harness = try Harness(reads: reads.executor)
        for _ in 0..<Jobs.maxPendingReadsPerOwner {
            #expect(harness.send("document.list", from: "web:alice").replies.isEmpty, "waits for its job")
        }
        let refused = harness.send("document.list", from: "web:alice").replies.first?["error"]
        #expect(refused?["code"] == "UNAVAILABLE")
        #expect(refused?["data"] == ["reason": "ownerBusy", "limit": .integer(Int64(Jobs.maxPendingReadsPerOwner))])
        #expect(harness.send("document.list", from: "web:bob").replies.isEmpty, "bob's read is started, not refused")
        #expect(reads.count == Jobs.maxPendingReadsPerOwner + 1)
        reads.runAll()
        #expect(harness.dispatcher.collectSaves(at: harness.t0).replies.count == Jobs.maxPendingReadsPerOwner + 1)
        #expect(harness.send("document.list", from: "web:alice").replies.isEmpty, "alice's slots came back")
    }

    @Test("past an owner's renders in flight, a double-tap still minimizes, its result saying the image was left out")
    func rendersPerOwner() throws {
        let reads = DispatcherTests.HeldJobs()
        var harness = try Harness(reads: reads.executor)
        let big: [String: JSONValue] = ["resultImages": true, "size": ["width": 8192, "height": 8192]]
        var sessions: [String] = []
        for _ in 0..<(Jobs.maxRendersPerOwner + 2) {
            let session = try harness.open(big, from: "web:alice")
            _ = harness.send("canvas.open", session: session, from: "web:alice")
            sessions.append(session)
        }
        for session in sessions.prefix(Jobs.maxRendersPerOwner) {
            #expect(harness.send("pencil.doubleTap", session: session, from: "web:alice").replies.isEmpty, "rendering off the loop")
        }
        #expect(reads.count == Jobs.maxRendersPerOwner)
        // The next is answered at once: minimized as the machine says, without the image.
        let next = harness.send("pencil.doubleTap", session: sessions[Jobs.maxRendersPerOwner], from: "web:alice")
        #expect(next.replies.first?["result"]?["outcome"] == "minimized")
        #expect(next.replies.first?["result"]?["state"] == "minimized")
        let result = try #require(next.events.first { String(decoding: $0[0], as: UTF8.self).hasSuffix(".canvas.result") })
        let data = try JSONCodec.parse(result[1])["data"]
        #expect(data?["imageOmitted"] == "ownerBusy")
        #expect(data?["imageData"] == nil)
        // A submit that asks for its image gets the result without it, and says why.
        let submit = harness.send("canvas.submit", ["imageData": true], session: sessions.last!, from: "web:alice")
        #expect(submit.replies.first?["result"] == ["action": "submitted", "hasContent": false, "imageOmitted": "ownerBusy", "state": "closed"])
        #expect(reads.count == Jobs.maxRendersPerOwner, "nothing more was rendered, here or beside the loop")
        // Another owner's image is still rendered off the loop.
        let bobs = try harness.open(big, from: "web:bob")
        _ = harness.send("canvas.open", session: bobs, from: "web:bob")
        #expect(harness.send("pencil.doubleTap", session: bobs, from: "web:bob").replies.isEmpty)
        #expect(reads.count == Jobs.maxRendersPerOwner + 1)
        // (The held renders are not run: an 8192-pixel square takes seconds in a debug build.)
    }

    /// A clock the test moves.
    final class TestClock: Sendable {
        let start = ContinuousClock.now
        private let offset = Mutex<Duration>(.zero)
        var now: ContinuousClock.Instant { start + offset.withLock { $0 } }
        func set(_ elapsed: Duration) { offset.withLock { $0 = elapsed } }
    }

    /// Document methods on an empty folder whose uploads expire by `clock`.
    func documents(_ clock: TestClock) throws -> DocumentMethods {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("uploads-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        var limits = Limits()
        limits.maxUploads = 4   // the figures these tests count against
        return DocumentMethods(store: try DocumentStore(folder: folder), limits: limits,
                               uploads: Uploads(idleLimit: .seconds(600), now: { clock.now }))
    }

    func begin(_ documents: DocumentMethods, _ name: String, owner: String?) throws(ProtocolError) -> String {
        let params: [String: JSONValue] = ["name": .string(name), "size": 100, "sha256": .string(String(repeating: "0", count: 64))]
        return try documents.read(.documentUploadBegin, Params(params), owner: owner)["upload"]!.stringValue!
    }

    @Test("one owner has at most maxUploadsPerOwner uploads under way; another owner still begins one")
    func uploadsPerOwner() throws {
        let documents = try documents(TestClock())
        _ = try begin(documents, "a.pdf", owner: "web:alice")
        _ = try begin(documents, "b.pdf", owner: "web:alice")
        #expect(throws: ProtocolError(.unavailable, "this owner (key or web token) has 2 uploads under way; the limit is 2",
                                      data: ["reason": "ownerUploads", "limit": 2])) {
            try begin(documents, "c.pdf", owner: "web:alice")
        }
        _ = try begin(documents, "d.pdf", owner: "web:bob")
        _ = try begin(documents, "e.pdf", owner: nil)
        #expect(throws: ProtocolError(.unavailable, "4 uploads are under way; the limit is 4", data: ["reason": "busy", "limit": 4])) {
            try begin(documents, "f.pdf", owner: "web:carol")
        }
    }

    @Test("no one owner fills every upload slot: the last free one is kept for an owner with none under way")
    func lastSlotKept() throws {
        let documents = try documents(TestClock())
        // One person's two tokens: two owners, each within its own limit.
        _ = try begin(documents, "a.pdf", owner: "web:alice")
        _ = try begin(documents, "b.pdf", owner: "web:alice")
        _ = try begin(documents, "c.pdf", owner: "web:alice-laptop")
        #expect(throws: ProtocolError(.unavailable, "3 uploads are under way; the last of the 4 slots is kept for an owner with none under way",
                                      data: ["reason": "busy", "limit": 4])) {
            try begin(documents, "d.pdf", owner: "web:alice-laptop")
        }
        // Another owner still begins one; once every slot is taken, anyone is refused.
        _ = try begin(documents, "e.pdf", owner: "web:bob")
        #expect(throws: ProtocolError(.unavailable, "4 uploads are under way; the limit is 4", data: ["reason": "busy", "limit": 4])) {
            try begin(documents, "f.pdf", owner: "web:carol")
        }
    }

    @Test("clients without a key or token are owners by connection; the routing frames never show in a refusal")
    func localOwnersByConnection() throws {
        let first = Uploads.owner(client: nil, envelope: [[0, 1, 2, 3, 4], []])
        let second = Uploads.owner(client: nil, envelope: [[0, 1, 2, 3, 5], []])
        #expect(first != nil && second != nil && first != second)
        #expect(Uploads.owner(client: "web:alice", envelope: [[0, 1, 2, 3, 4], []]) == "web:alice")
        let documents = try documents(TestClock())
        _ = try begin(documents, "a.pdf", owner: first)
        _ = try begin(documents, "b.pdf", owner: first)
        #expect(throws: ProtocolError(.unavailable, "this connection (a client without a key or token) has 2 uploads under way; the limit is 2",
                                      data: ["reason": "ownerUploads", "limit": 2])) {
            try begin(documents, "c.pdf", owner: first)
        }
        _ = try begin(documents, "d.pdf", owner: second)
    }

    @Test("a part the server already has does not renew its upload; one that adds bytes does")
    func retriedPartDoesNotRenew() throws {
        let clock = TestClock(), documents = try documents(clock)
        let id = try begin(documents, "retried.pdf", owner: nil)
        func part(_ offset: Int, _ bytes: String) throws(ProtocolError) -> [String: JSONValue] {
            try documents.read(.documentUploadPart, Params(["upload": .string(id), "offset": .integer(Int64(offset))]),
                               attachments: [Array(bytes.utf8)])
        }
        #expect(try part(0, "%PDF-")["received"] == 5)
        for minute in 1...9 {
            clock.set(.seconds(60 * minute))
            #expect(try part(0, "%")["received"] == 5, "a retry is answered, and adds nothing")
        }
        clock.set(.seconds(600))
        #expect(throws: ProtocolError(.notFound, "no upload \"\(id)\": never begun, committed, aborted or expired",
                                      data: ["upload": .string(id)])) {
            try part(5, "1")
        }
    }

    @Test("an upload expires after its idle time however often its status is asked; a part renews it")
    func statusDoesNotRenew() throws {
        let clock = TestClock(), documents = try documents(clock)
        let asked = try begin(documents, "asked.pdf", owner: nil), fed = try begin(documents, "fed.pdf", owner: nil)
        func status(_ id: String) throws(ProtocolError) -> [String: JSONValue] {
            try documents.read(.documentUploadStatus, Params(["upload": .string(id)]))
        }
        for minute in 1...9 {
            clock.set(.seconds(60 * minute))
            #expect(try status(asked)["received"] == 0)
        }
        _ = try documents.read(.documentUploadPart, Params(["upload": .string(fed), "offset": 0]), attachments: [Array("%PDF-".utf8)])
        clock.set(.seconds(600))
        #expect(throws: ProtocolError(.notFound, "no upload \"\(asked)\": never begun, committed, aborted or expired",
                                      data: ["upload": .string(asked)])) {
            try status(asked)
        }
        #expect(try status(fed)["received"] == 5, "fed by a part at 540 s, alive until 1,140 s")
        // The expired upload's slot is free again for its owner.
        _ = try begin(documents, "next.pdf", owner: nil)
        clock.set(.seconds(1_140))
        #expect(throws: ProtocolError.self) { try status(fed) }
    }
}
