import CanvasCore
import CanvasModel
import PropertyBased
import Testing

/// Runs the real session and the reference model side by side over random command sequences
/// and checks after every step that they agree on the reply, the events and the state.
@Suite("Model-based")
struct ModelBasedTests {
    static let phases = CanvasPhase.allCases.map(\.rawValue)
    static let kinds = ["open", "minimize", "submit", "cancel", "doubleTap", "finishTransition", "timerFired",
                        "initialize", "configurePencil", "addStroke", "addText", "moveText", "erase", "clear",
                        "undo", "redo"]

    @Test("the session agrees with the reference model after every step", .shrinking)
    func agreesWithModel() async {
        var covered = Set<String>()
        var steps = 0
        var runs = 0
        await propertyCheck(count: 1_000, input: Generators.setup, Generators.commands) { setup, commands in
            runs += 1
            var session = setup.session()
            var model = setup.model()
            for (index, command) in commands.enumerated() {
                let before = model.phase
                let expected = model.predict(command)
                let actual = session.perform(command)
                steps += 1
                covered.insert("\(before.rawValue) × \(command.kind)")
                guard actual == expected else {
                    Issue.record("""
                        step \(index): \(command) from \(before.rawValue)
                          model:   \(expected)
                          session: \(actual)
                          set-up:  \(setup)
                          commands: \(commands.map(\.description))
                        """)
                    return
                }
            }
        }
        let all = Self.phases.flatMap { phase in Self.kinds.map { "\(phase) × \($0)" } }
        let missing = all.filter { !covered.contains($0) }
        print("model-based: \(runs) runs, \(steps) steps, covered \(covered.count) of \(all.count) phase × command pairs")
        #expect(missing.isEmpty, "never exercised: \(missing)")
    }

    /// Sequences a shrunk failure once came down to; kept as plain regressions.
    @Test("regression: a late timer does not finish a later transition")
    func lateTimer() throws {
        var session = CanvasSession(transitions: .timed(milliseconds: 100))
        _ = try session.open()                          // ticket 1
        _ = try session.finishTransition()              // finished early by a client
        _ = try session.minimize()                      // ticket 2
        #expect(throws: CanvasRejection.staleTransition) { try session.finishTransition(TransitionTicket(number: 1)) }
        #expect(session.phase == .minimizing)
        _ = try session.finishTransition(TransitionTicket(number: 2))
        #expect(session.phase == .minimized)
    }
}
