@testable import CanvasService
import CanvasCore
import CanvasProtocol
import DocumentStore
import Foundation
import Testing

@Suite("session snapshot codec")
struct SessionSnapshotTests {
    static func session() throws -> ServiceSession {
        var canvas = CanvasSession(transitions: .timed(milliseconds: 250))
        _ = try canvas.open()
        var session = ServiceSession(
            id: "5eed", owner: "alice-key", connection: [1, 2], canvas: canvas, transitions: .timed(milliseconds: 250),
            size: (640, 480), resultImages: true, lastActive: .now, seq: 41,
            replies: ReplyCache(capacity: 4, maxReplyBytes: 10), target: DocumentTarget(name: "notes.pdf", page: 2))
        session.replies.store(Array(#"{"id":1}"#.utf8), for: .integer(-1), request: Array("r1".utf8))
        session.replies.store(Array("0123456789ABCDEF".utf8), for: .string("big"), request: Array("r2".utf8))   // too large: not kept
        session.replies.store([0, 255, 13, 10], for: .string("é\u{0}"), request: [])
        return session
    }

    @Test("everything acknowledged comes back; the connection and idle clock are the new instance's")
    func roundTrip() throws {
        let original = try Self.session()
        let bytes = try SessionSnapshot.encode(original)
        let later = ContinuousClock.now + .seconds(5)
        let restored = try SessionSnapshot.decode(bytes, session: "5eed", connection: [9], now: later, limits: Limits())
        #expect(restored.owner == "alice-key" && restored.canvas == original.canvas && restored.seq == 41)
        #expect(restored.size! == (640, 480) && restored.resultImages && restored.transitions == .timed(milliseconds: 250))
        #expect(restored.target?.name == "notes.pdf" && restored.target?.page == 2)
        #expect(restored.connection == [9] && restored.lastActive == later)
        #expect(restored.replies.entries.map(\.id) == original.replies.entries.map(\.id))
        #expect(restored.replies.entries.map(\.request) == original.replies.entries.map(\.request))
        #expect(restored.replies.entries.map(\.reply) == original.replies.entries.map(\.reply))
        #expect(restored.replies.entries[1].reply == nil)
        guard case .retry(let reply) = restored.replies.lookup(.string("é\u{0}"), request: []) else {
            Issue.record("the cached reply was not restored")
            return
        }
        #expect(reply == [0, 255, 13, 10])
    }

    @Test("a drawing reopened from its page keeps what it replaces and its ink form across instances; bad digests are refused")
    func reopenedTarget() throws {
        var session = try Self.session()
        let digest = String(repeating: "ab", count: 32)
        session.target = DocumentTarget(name: "notes.pdf", page: 2, form: .annotations,
                                        reopened: ReopenedInk(edits: [digest, String(repeating: "0", count: 64)], drawing: digest))
        let restored = try SessionSnapshot.decode(try SessionSnapshot.encode(session), session: "5eed", connection: nil, now: .now, limits: Limits())
        #expect(restored.target?.reopened == session.target?.reopened && restored.target?.form == .annotations)
        // A plain target (and a snapshot written before 1.8) is paper, not reopened.
        session.target = DocumentTarget(name: "notes.pdf", page: 2)
        let plain = try SessionSnapshot.decode(try SessionSnapshot.encode(session), session: "5eed", connection: nil, now: .now, limits: Limits())
        #expect(plain.target?.reopened == nil && plain.target?.form == .paper)
        session.target = DocumentTarget(name: "notes.pdf", page: 2, reopened: ReopenedInk(edits: ["../x"], drawing: digest))
        #expect(throws: SessionSnapshot.DecodeError.self) {
            _ = try SessionSnapshot.decode(try SessionSnapshot.encode(session), session: "5eed", connection: nil, now: .now, limits: Limits())
        }
    }

    @Test("a stroke half sent in parts comes back, and its last part completes it as one stroke")
    func strokeParts() throws {
        var canvas = CanvasSession(transitions: .instant)
        _ = try canvas.open()
        var original = ServiceSession(
            id: "5eed", owner: nil, connection: nil, canvas: canvas, transitions: .instant, size: nil, resultImages: false,
            lastActive: .now, seq: 3, replies: ReplyCache(capacity: 4, maxReplyBytes: 10), target: nil)
        let params = SessionParams(limits: Limits())
        let first: [String: JSONValue] = ["tool": "highlighter", "color": "#FF8800", "width": .number(3.0), "continued": true,
                                          "points": [["x": 10, "y": 20.125, "pressure": 0.5], ["x": 0.1, "y": 1e-7]]]
        #expect(try params.assembleStroke(Params(first), &original) == nil)
        let bytes = try SessionSnapshot.encode(original)
        var restored = try SessionSnapshot.decode(bytes, session: "5eed", connection: nil, now: .now, limits: Limits())
        let waiting = try #require(restored.strokeParts)
        #expect(waiting == original.strokeParts)
        #expect(waiting.points == [try InkPoint(x: 10, y: 20.125, pressure: 0.5), try InkPoint(x: 0.1, y: 1e-7)])
        // The last part repeats the style: the width as another number spelling, the colour in
        // another case; the stroke keeps the first part's spelling.
        let last: [String: JSONValue] = ["tool": "highlighter", "color": "#ff8800", "width": 3, "points": [["x": 99.5, "y": 7]]]
        let (whole, joined) = try #require(try params.assembleStroke(Params(last), &restored))
        #expect(restored.strokeParts == nil && !joined)
        #expect(whole.points == [try InkPoint(x: 10, y: 20.125, pressure: 0.5), try InkPoint(x: 0.1, y: 1e-7), try InkPoint(x: 99.5, y: 7)])
        #expect(whole.tool == .highlighter && whole.color.rawValue == "#FF8800" && whole.width == 3)
        // A snapshot without parts (and one written before they were kept) has none.
        let plain = try SessionSnapshot.decode(try SessionSnapshot.encode(try Self.session()), session: "5eed", connection: nil,
                                               now: .now, limits: Limits())
        #expect(plain.strokeParts == nil)
    }

    @Test("a joined stroke's waiting parts stay joined in the snapshot, and its last part joins the step before")
    func joinedStrokeParts() throws {
        var canvas = CanvasSession(transitions: .instant)
        _ = try canvas.open()
        let before = try Stroke(tool: .pen, color: .black, width: 2, points: [InkPoint(x: 0, y: 0), InkPoint(x: 10, y: 10)])
        _ = try canvas.edit(.addStroke(before))
        var original = ServiceSession(
            id: "5eed", owner: nil, connection: nil, canvas: canvas, transitions: .instant, size: nil, resultImages: false,
            lastActive: .now, seq: 3, replies: ReplyCache(capacity: 4, maxReplyBytes: 10), target: nil)
        let params = SessionParams(limits: Limits())
        let first: [String: JSONValue] = ["tool": "pen", "color": "black", "width": 2, "continued": true, "joined": true,
                                          "points": [["x": 10, "y": 10], ["x": 20, "y": 0]]]
        #expect(try params.assembleStroke(Params(first), &original) == nil)
        let bytes = try SessionSnapshot.encode(original)
        var restored = try SessionSnapshot.decode(bytes, session: "5eed", connection: nil, now: .now, limits: Limits())
        #expect(restored.strokeParts?.joined == true && restored.strokeParts == original.strokeParts)
        let last: [String: JSONValue] = ["tool": "pen", "color": "black", "width": 2, "joined": true, "points": [["x": 30, "y": 10]]]
        let (whole, joined) = try #require(try params.assembleStroke(Params(last), &restored))
        #expect(joined && whole.points.count == 3)
        _ = try restored.canvas.edit(.addStroke(whole, joiningLastStep: joined))
        _ = try restored.canvas.edit(.undo)
        #expect(restored.canvas.drawing == .empty, "one undo took back the stroke and the one it joined")
        // Parts that are not joined are written as before joined existed.
        var plain = original
        plain.strokeParts = StrokeParts(tool: .pen, color: .black, width: 2, points: [try InkPoint(x: 1, y: 1)])
        let text = String(decoding: try JSONEncoder().encode(plain.strokeParts), as: UTF8.self)
        #expect(!text.contains("joined"))
    }

    @Test("waiting parts stored by the earlier version, as JSON style and points, are read as points")
    func earlierStrokeParts() throws {
        let earlier = ##"{"style":{"tool":"pen","color":"#FFD400","width":2},"points":[{"x":1,"y":2,"pressure":0.5},{"x":3.5,"y":4}]}"##
        let parts = try JSONDecoder().decode(StrokeParts.self, from: Data(earlier.utf8))
        #expect(parts == StrokeParts(tool: .pen, color: try InkColor("#FFD400"), width: 2,
                                     points: [try InkPoint(x: 1, y: 2, pressure: 0.5), try InkPoint(x: 3.5, y: 4)]))
        let broken = ##"{"style":{"tool":"pen","color":"#FFD400","width":2},"points":[{"x":"far","y":2}]}"##
        #expect(throws: DecodingError.self) { try JSONDecoder().decode(StrokeParts.self, from: Data(broken.utf8)) }
    }

    @Test("a snapshot cut short, of another session or not a snapshot at all is refused")
    func refused() throws {
        let bytes = try SessionSnapshot.encode(try Self.session())
        for cut in [4, 8, bytes.count / 2, bytes.count - 1] {
            #expect(throws: SessionSnapshot.DecodeError.self) {
                try SessionSnapshot.decode(Array(bytes[..<cut]), session: "5eed", connection: nil, now: .now, limits: Limits())
            }
        }
        #expect(throws: SessionSnapshot.DecodeError.self) {
            try SessionSnapshot.decode(bytes, session: "other", connection: nil, now: .now, limits: Limits())
        }
        #expect(throws: SessionSnapshot.DecodeError.self) {
            try SessionSnapshot.decode(Array("{}".utf8), session: "5eed", connection: nil, now: .now, limits: Limits())
        }
    }

    @Test("a snapshot that says what no request could (seq at the counter's end, a size past the limit, a bad target, a history past its limit) is refused")
    func validatedLikeRequests() throws {
        func refusedWith(_ change: (inout ServiceSession) -> Void) throws -> Bool {
            var session = try Self.session()
            change(&session)
            let bytes = try SessionSnapshot.encode(session)
            do {
                _ = try SessionSnapshot.decode(bytes, session: "5eed", connection: nil, now: .now, limits: Limits())
                return false
            } catch {
                return true
            }
        }
        #expect(try refusedWith { $0.seq = .max })
        #expect(try refusedWith { $0.seq = (1 << 53) + 1 })
        #expect(try !refusedWith { $0.seq = 1 << 53 })
        #expect(try refusedWith { $0.size = (9_000, 10) })
        #expect(try refusedWith { $0.size = (0, 10) })
        #expect(try refusedWith { $0.target = DocumentTarget(name: "../x.pdf", page: 0) })
        #expect(try refusedWith { $0.target = DocumentTarget(name: "x.pdf", page: -1) })
        // A history limit written past what this code keeps, in the JSON part only (the binary
        // reply cache after it is kept byte for byte).
        let bytes = try SessionSnapshot.encode(try Self.session())
        let length = Int(UInt32(bytes[4]) << 24 | UInt32(bytes[5]) << 16 | UInt32(bytes[6]) << 8 | UInt32(bytes[7]))
        let json = String(decoding: bytes[8..<(8 + length)], as: UTF8.self)
        func snapshot(historyLimit: Int) -> [UInt8] {
            let edited = Array(json.replacingOccurrences(of: "\"historyLimit\":256", with: "\"historyLimit\":\(historyLimit)").utf8)
            let size = UInt32(edited.count)
            return Array(bytes[..<4]) + [UInt8(size >> 24), UInt8(size >> 16 & 0xFF), UInt8(size >> 8 & 0xFF), UInt8(size & 0xFF)]
                + edited + Array(bytes[(8 + length)...])
        }
        #expect(json.contains("\"historyLimit\":256"))
        _ = try SessionSnapshot.decode(snapshot(historyLimit: 200), session: "5eed", connection: nil, now: .now, limits: Limits())
        #expect(throws: SessionSnapshot.DecodeError.self) {
            try SessionSnapshot.decode(snapshot(historyLimit: 99_999_999), session: "5eed", connection: nil, now: .now, limits: Limits())
        }
    }
}
