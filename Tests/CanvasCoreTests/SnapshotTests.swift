import CanvasCore
import CanvasModel
import Foundation
import PropertyBased
import Testing

/// A session written out and read back (as a service instance that takes a session over does)
/// is the same session: equal now, and it answers every later command exactly as the original.
@Suite("session snapshots")
struct SnapshotTests {
    static func roundTrip(_ session: CanvasSession) throws -> CanvasSession {
        try JSONDecoder().decode(CanvasSession.self, from: JSONEncoder().encode(session))
    }

    @Test("restored after any history, a session is equal and behaves the same for the next commands")
    func restoredBehavesTheSame() async {
        await propertyCheck(count: 300, input: Generators.setup, Generators.commands, Generators.commands) { setup, before, after in
            var original = CanvasSession(pencil: setup.pencil, transitions: setup.transitions, initialized: setup.initialized)
            for command in before { _ = original.perform(command) }
            var restored = try Self.roundTrip(original)
            #expect(restored == original)
            for command in after {
                #expect(restored.perform(command) == original.perform(command), "\(command)")
                #expect(restored == original)
            }
        }
    }

    @Test("undo and redo history survive, each stroke drawn written once")
    func historyIsKept() throws {
        var session = CanvasSession()
        _ = try session.open()
        let stroke = try Stroke(tool: .pen, color: InkColor("blue"), width: 3,
                                points: [InkPoint(x: 1, y: 2, pressure: 0.5), InkPoint(x: 300.25, y: 400.125)])
        for _ in 0..<40 { _ = try session.edit(.addStroke(stroke)) }
        _ = try session.edit(.undo)
        _ = try session.edit(.undo)
        let encoded = try JSONEncoder().encode(session)
        // Forty strokes drawn, forty-one versions: each stroke is written once (not once per
        // version that holds it, 820 times), and each version as what it adds to the one before.
        #expect(String(decoding: encoded, as: UTF8.self).components(separatedBy: #""points":"#).count == 41)
        #expect(encoded.count < 8_000)
        var restored = try Self.roundTrip(session)
        #expect(restored.drawing.strokes.count == 38)
        #expect(try restored.edit(.redo).canRedo)
        #expect(try !restored.edit(.redo).canRedo)
        #expect(restored.drawing.strokes.count == 40)
        for _ in 0..<40 { _ = try restored.edit(.undo) }
        #expect(restored.drawing == .empty)
    }

    @Test("a transition under way keeps its ticket, so a late timer still finishes it and a stale one does not")
    func transitionsKeepTheirTicket() throws {
        var session = CanvasSession(transitions: .timed(milliseconds: 200))
        _ = try session.open()
        let ticket = try #require(session.canvas.pendingTransition)
        var restored = try Self.roundTrip(session)
        #expect(restored.phase == .opening)
        #expect(throws: CanvasRejection.self) { try restored.finishTransition(TransitionTicket(number: ticket.number + 1)) }
        _ = try restored.finishTransition(ticket)
        #expect(restored.phase == .open)
    }

    @Test("points come back bit for bit, with and without pressure, whatever the number of points")
    func pointsExact() throws {
        let values: [Double] = [0, -0.0, 1e-300, 0.1 + 0.2, 5_000 - 1e-9, .leastNonzeroMagnitude]
        var session = CanvasSession()
        _ = try session.open()
        for count in 1...4 {   // every base64 padding
            let points = try (0..<count).map { try InkPoint(x: values[$0 % values.count], y: values[($0 + 1) % values.count],
                                                           pressure: $0 % 2 == 0 ? nil : 0.25 * Double($0 % 4)) }
            _ = try session.edit(.addStroke(try Stroke(tool: .highlighter, color: InkColor("#00aa11"), width: 7.5, points: points)))
        }
        let restored = try Self.roundTrip(session)
        #expect(restored == session)
        for (a, b) in zip(restored.drawing.strokes.flatMap(\.points), session.drawing.strokes.flatMap(\.points)) {
            #expect(a.x.bitPattern == b.x.bitPattern && a.y.bitPattern == b.y.bitPattern && a.pressure?.bitPattern == b.pressure?.bitPattern)
        }
    }

    @Test("a snapshot naming a stroke that is not there is refused")
    func corruptSnapshotsAreRefused() throws {
        var session = CanvasSession()
        _ = try session.open()
        var text = String(decoding: try JSONEncoder().encode(session), as: UTF8.self)
        text = text.replacingOccurrences(of: #""add":[]"#, with: #""add":[7]"#)
        #expect(throws: DecodingError.self) { try JSONDecoder().decode(CanvasSession.self, from: Data(text.utf8)) }
    }
}
