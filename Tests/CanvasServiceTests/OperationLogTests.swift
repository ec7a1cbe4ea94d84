@testable import CanvasService
import CanvasCore
import CanvasProtocol
import Foundation
import InkRendering
import SessionStore
import Testing
import TestSupport

/// A session's log entries written as operations (`OperationLog`): every operation the journal
/// keeps replays to the very session that was acknowledged, snapshot byte for byte; an entry
/// damaged anywhere, or cut short, is refused.
@Suite("operation entries")
struct OperationLogTests {
    /// A shared session's copy as its holder has it just after a write: stored, journal empty.
    static func stored(_ session: ServiceSession, version: UInt64 = 1) -> ServiceSession {
        var session = session
        session.storedVersion = version
        session.stored = StoredSnapshot(version: version, bytes: nil)
        session.startJournal()
        return session
    }

    static func freshSession() throws -> ServiceSession {
        var canvas = CanvasSession(transitions: .manual)
        canvas.initialize()
        return ServiceSession(id: "0123456789abcdef", owner: nil, canvas: canvas, transitions: .manual, size: nil, resultImages: false,
                              lastActive: .now, replies: ReplyCache(limits: Limits()))
    }

    /// Every kind of operation, each reply remembered as the service does (an edit's in its
    /// short form), with the sequence number moving as events would move it.
    static func everything(_ session: inout ServiceSession, strokes: [Stroke]) throws {
        var id: Int64 = 100
        func reply(_ text: String) {
            id += 1
            session.remember(Array(text.utf8), for: .integer(id), digest: ReplyCache.digest(fingerprint: Array("request \(id)".utf8)))
        }
        func edited(_ edit: DrawingEdit) throws {
            let report = try session.edit(edit)
            session.seq += 1
            id += 1
            let text = ReplyEncoder.success(id: .integer(id), result: CanvasMethods.editResult(changed: report.changed, session.canvas))
            session.remember(text, for: .integer(id), digest: ReplyCache.digest(fingerprint: Array("request \(id)".utf8)))
        }
        _ = try session.run(.open)
        _ = try session.run(.finishTransition(nil))
        reply(#"{"id":101,"result":{"state":"open"}}"#)
        try edited(.addStroke(strokes[0]))
        let last = strokes[0].points.last!
        try edited(.addStroke(try Stroke(tool: strokes[0].tool, color: strokes[0].color, width: strokes[0].width,
                                         points: [last, try InkPoint(x: last.x + 3.14159, y: last.y - 1e-7, pressure: 0.333)]),
                              joiningLastStep: true))
        try edited(.addStroke(strokes[1]))
        try edited(.addText(try TextAnnotation(text: "ünïcode ✓", x: 10.125, y: 20.5, fontSize: 13, color: try InkColor("#12AbEf"))))
        try edited(.moveText(index: 0, x: 33.3, y: 44.4))
        try edited(.editText(index: 0, TextChange(dx: 0.1, fontSize: 30, color: try InkColor("red"), text: "new words")))
        try edited(.editText(index: 0, TextChange(x: 1, y: 2, dy: -0.5)))
        let point = strokes[1].points[strokes[1].points.count / 2]
        try edited(.erase(try EraseRequest(x: point.x, y: point.y, radius: 6, mode: .partial)))
        try edited(.erase(try EraseRequest(x: strokes[0].points[0].x, y: strokes[0].points[0].y, radius: 3, mode: .stroke)))
        try edited(.undo)
        try edited(.redo)
        try edited(.undo)
        try edited(.clear)
        try edited(.undo)
        session.strokeParts = StrokeParts(tool: .highlighter, color: try InkColor("yellow"), width: 12, joined: true, points: strokes[2].points)
        reply(#"{"id":1,"result":{"changed":false,"pendingPoints":3}}"#)
        session.strokeParts = nil
        session.remember(nil, for: .string("too large"), digest: ReplyCache.digest(fingerprint: Array("large".utf8)))
        session.configurePencil(PencilConfiguration(supported: true, preferredTapAction: .switchEraser, policy: .respectPreference))
        _ = session.doubleTap()
        session.initializePencil()
        _ = session.doubleTap()
        _ = try session.run(.minimize)
        _ = try session.run(.finishTransition(session.canvas.canvas.pendingTransition))
        _ = try session.run(.open)
        session.seq += 3
        reply(#"{"id":"x","result":{"state":"opening"}}"#)
    }

    /// A fresh session, the same after `everything`, and the entry that says what it did.
    static func everythingLogged() throws -> (before: ServiceSession, live: ServiceSession, entry: [UInt8]) {
        let before = try freshSession()
        var live = stored(before)
        try everything(&live, strokes: try RecordedHandwriting.page(copies: 1).strokes)
        let journal = try #require(live.journal, "an operation the journal cannot say was used")
        #expect(journal.contains { if case .reply(_, _, .edit) = $0 { true } else { false } }, "no edit's reply in its short form")
        return (before, live, OperationLog.encode(journal, version: 2, after: live))
    }

    @Test("every operation the journal keeps replays, on the session before, to exactly the session acknowledged")
    func everyOperationReplays() throws {
        let (before, live, entry) = try Self.everythingLogged()
        var replayed = try SessionSnapshot.decode(try SessionSnapshot.encode(before), session: before.id, connection: nil, now: .now, limits: Limits())
        try OperationLog.replay(entry, on: &replayed, within: .unbounded)
        #expect(try SessionSnapshot.encode(replayed) == (try SessionSnapshot.encode(live)))
        #expect(replayed.canvas == live.canvas)
    }

    @Test("an entry with any byte changed, or cut short anywhere, is refused")
    func damagedEntriesAreRefused() throws {
        let (before, _, entry) = try Self.everythingLogged()
        let base = try SessionSnapshot.encode(before)
        func refused(_ bytes: [UInt8]) throws -> Bool {
            var session = try SessionSnapshot.decode(base, session: before.id, connection: nil, now: .now, limits: Limits())
            do {
                try OperationLog.replay(bytes, on: &session, within: .unbounded)
                return false
            } catch {
                return true
            }
        }
        var random = SplitMix(seed: 3)
        for _ in 0..<300 {
            var damaged = entry
            let place = OperationEntry.magic.count + 1 + Int(random.next() % UInt64(entry.count - OperationEntry.magic.count - 1))
            damaged[place] ^= UInt8(1 + random.next() % 255)
            #expect(try refused(damaged), "byte \(place) changed")
        }
        for length in Swift.stride(from: OperationEntry.magic.count, to: entry.count, by: 7) {
            #expect(try refused(Array(entry[..<length])), "cut at \(length)")
        }
    }

    @Test("a change the journal cannot say (the canvas changed from outside its methods) leaves no journal: the session is written whole")
    func unjournaledChangesGoWhole() throws {
        var live = Self.stored(try Self.freshSession())
        _ = try live.run(.open)
        #expect(live.journal?.count == 1)
        _ = try live.canvas.finishTransition()
        #expect(live.journal == nil)
        live.startJournal()
        live.size = (100, 100)
        #expect(live.journal == nil)
        // A session no store has keeps none.
        var local = try Self.freshSession()
        _ = try local.run(.open)
        #expect(local.journal?.isEmpty == true)
    }

    @Test("a client that only polls between changes does not grow the journal without end: past its bound the next write goes whole")
    func pollingIsBounded() throws {
        var live = Self.stored(try Self.freshSession())
        _ = try live.run(.open)
        let reply = [UInt8](repeating: UInt8(ascii: "x"), count: 200 << 10)
        for index in 0..<(ServiceSession.maxJournalBytes / reply.count + 1) {
            #expect(live.journal != nil, "given up after \(index) replies")
            live.remember(reply, for: .integer(Int64(index)), digest: ReplyCache.digest(fingerprint: Array("poll \(index)".utf8)))
        }
        #expect(live.journal == nil)
    }

    @Test("an entry that would take the drawing past its limits is refused on replay, as the edit was live")
    func replayKeepsTheLimits() throws {
        let strokes = try RecordedHandwriting.page(copies: 1).strokes
        let before = try Self.freshSession()
        var live = Self.stored(before)
        _ = try live.run(.open)
        _ = try live.run(.finishTransition(nil))
        for stroke in strokes.prefix(5) { _ = try live.edit(.addStroke(stroke)) }
        let entry = OperationLog.encode(try #require(live.journal), version: 2, after: live)
        func replayed(within bounds: DrawingBounds) throws -> Bool {
            var session = try SessionSnapshot.decode(try SessionSnapshot.encode(before), session: before.id, connection: nil, now: .now, limits: Limits())
            do {
                try OperationLog.replay(entry, on: &session, within: bounds)
                return true
            } catch {
                return false
            }
        }
        #expect(try replayed(within: DrawingBounds(maxStrokes: 5, maxPoints: 1_000_000, maxTexts: 10)))
        #expect(try !replayed(within: DrawingBounds(maxStrokes: 4, maxPoints: 1_000_000, maxTexts: 10)))
    }

    @Test("a snapshot's stroke table is refused past the points its size could hold as JSON, before they are made")
    func strokeTableIsBounded() throws {
        let strokes = try RecordedHandwriting.page(copies: 1).strokes
        let ink = InkSource.encode(Drawing(strokes: strokes))
        let points = strokes.reduce(0) { $0 + $1.points.count }
        #expect(try InkSource.decode(ink, maxPoints: points).strokes.count == strokes.count)
        #expect(throws: InkSource.DecodeError.self) { try InkSource.decode(ink, maxPoints: points - 1) }
    }
}
