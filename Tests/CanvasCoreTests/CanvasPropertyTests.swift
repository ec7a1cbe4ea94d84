import CanvasCore
import CanvasModel
import PropertyBased
import Testing

/// The brief's three properties of the pencil double-tap, over random drawings and random
/// command sequences.
@Suite("Double-tap properties")
struct CanvasPropertyTests {
    /// A device with a pencil, initialized, toggling as in the original design.
    static func togglingSession(_ transitions: TransitionMode) -> CanvasSession {
        CanvasSession(pencil: PencilConfiguration(supported: true, preferredTapAction: .switchEraser, policy: .alwaysToggle),
                      transitions: transitions)
    }

    /// Completes any animation, so the canvas rests in closed, open or minimized.
    static func settle(_ session: inout CanvasSession) {
        if session.phase.isTransition { _ = try! session.finishTransition() }
    }

    static func draw(_ drawing: Drawing, into session: inout CanvasSession) throws {
        for stroke in drawing.strokes { _ = try session.edit(.addStroke(stroke)) }
        for text in drawing.texts { _ = try session.edit(.addText(text)) }
    }

    @Test("Property 1: from any resting state a double-tap goes to the opposite state", .shrinking)
    func property1() async {
        await propertyCheck(count: 500, input: Generators.transitions, Generators.commands) { transitions, prefix in
            var session = Self.togglingSession(transitions)
            // Any history of client and pencil commands, but the pencil set-up stays togglable.
            for command in prefix {
                if case .configurePencil = command { continue }
                _ = session.perform(command)
            }
            Self.settle(&session)
            let before = session.phase
            let report = session.doubleTap()
            Self.settle(&session)
            switch before {
            case .closed, .minimized:
                #expect(report.outcome == .opened, "from \(before) after \(prefix)")
                #expect(session.phase == .open)
            case .open:
                #expect(report.outcome.name == "minimized", "from open after \(prefix)")
                #expect(session.phase == .minimized)
            case .opening, .minimizing:
                Issue.record("settle left the canvas animating")
            }
        }
    }

    @Test("Property 1, mid-animation: a double-tap while opening or minimizing is ignored", .shrinking)
    func property1Transition() async {
        await propertyCheck(count: 500, input: Generators.drawing, Gen.bool) { drawing, fromOpen in
            var session = Self.togglingSession(.manual)
            _ = try session.open()
            if fromOpen {
                _ = try session.finishTransition()
                try Self.draw(drawing, into: &session)
                _ = try session.minimize()
            }
            let phase = session.phase
            #expect(session.doubleTap() == DoubleTapReport(outcome: .ignored(.transition), actions: []))
            #expect(session.phase == phase)
        }
    }

    @Test("Property 2: minimize and reopen by double-tap keep exactly the same strokes and texts", .shrinking)
    func property2() async {
        await propertyCheck(count: 500, input: Generators.drawing, Generators.transitions, Gen.int(in: 1...3)) { drawing, transitions, cycles in
            var session = Self.togglingSession(transitions)
            _ = try session.open()
            Self.settle(&session)
            try Self.draw(drawing, into: &session)
            let before = session.canvas.editableDrawing
            #expect(session.drawing == drawing)
            for _ in 0..<cycles {
                #expect(session.doubleTap().outcome.name == "minimized")
                Self.settle(&session)
                #expect(session.doubleTap().outcome == .opened)
                Self.settle(&session)
                #expect(session.drawing == drawing, "the reopened drawing differs")
                #expect(session.canvas.editableDrawing == before, "the undo history did not survive")
            }
        }
    }

    @Test("Property 3: a double-tap minimize reports hasContent exactly when there is content", .shrinking)
    func property3() async {
        let edits = Generators.command.array(of: 0...12).map { $0.filter { if case .edit = $0 { true } else { false } } }
        await propertyCheck(count: 500, input: Generators.drawing, edits) { drawing, edits in
            var session = Self.togglingSession(.instant)
            _ = try session.open()
            try Self.draw(drawing, into: &session)
            for edit in edits { _ = session.perform(edit) }
            let content = !session.drawing.strokes.isEmpty || !session.drawing.texts.isEmpty
            let report = session.doubleTap()
            let expected = CanvasResult(action: .minimized, hasContent: content)
            #expect(report.outcome == .minimized(expected))
            let emitted = report.actions.emittedResult
            #expect(emitted?.result == expected, "the web layer was not told")
            #expect(emitted?.cause == .pencil)
        }
    }
}
