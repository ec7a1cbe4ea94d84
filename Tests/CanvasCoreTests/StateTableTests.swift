import CanvasCore
import CanvasModel
import Foundation
import Testing

/// Walks every transitions × policy × preference × pencil × state × event combination
/// through `protocol/state-table.md`, which is the specification, and a real session.
@Suite("State table")
struct StateTableTests {
    struct Row: CustomStringConvertible {
        let cells: [String]   // transitions, policy, preference, pencil, state, event, reply, result, next
        let line: Int

        func matches(_ key: [String]) -> Bool {
            zip(cells.prefix(6), key).allSatisfy { pattern, value in pattern == "*" || pattern == value }
        }
        var reply: String { cells[6] }
        var result: String { cells[7] }
        var next: String { cells[8] }
        var description: String { "line \(line): | " + cells.joined(separator: " | ") + " |" }
    }

    static let tableURL = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("protocol/state-table.md")

    static func rows() throws -> [Row] {
        try table("table", columns: 9).map { Row(cells: $0.cells, line: $0.line) }
    }

    /// The rows of the table between `<!-- name:begin -->` and `<!-- name:end -->` in the file,
    /// each with its line number, without the header and the rule under it.
    static func table(_ name: String, columns: Int) throws -> [(cells: [String], line: Int)] {
        let text = try String(contentsOf: tableURL, encoding: .utf8)
        var rows: [(cells: [String], line: Int)] = []
        var inside = false
        var header = true
        for (number, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            if line.contains("\(name):begin") { inside = true; continue }
            if line.contains("\(name):end") { break }
            guard inside, line.hasPrefix("|") else { continue }
            let cells = line.split(separator: "|").map { $0.trimmingCharacters(in: .whitespaces) }
            guard cells.count == columns, !cells[0].hasPrefix("---") else { continue }
            if header {
                header = false
                continue
            }
            rows.append((cells, number + 1))
        }
        return rows
    }

    static let events = ["open", "minimize", "submit", "cancel", "finishTransition", "edit", "doubleTap"]
    static let pencils = ["ready", "unsupported", "uninitialized"]

    /// Brings a fresh session to `state` with client commands only (they work whatever the
    /// pencil), leaving a stroke on the canvas so results carry content.
    static func session(transitions: TransitionMode, pencil: String, policy: TapPolicy,
                        preference: PreferredTapAction, state: CanvasPhase) throws -> CanvasSession {
        var session = CanvasSession(
            pencil: PencilConfiguration(supported: pencil != "unsupported", preferredTapAction: preference, policy: policy),
            transitions: transitions, initialized: pencil != "uninitialized")
        let stroke = try Stroke(tool: .pen, color: .black, width: 2, points: [InkPoint(x: 1, y: 1)])
        func settle() throws { if session.phase.isTransition { _ = try session.finishTransition() } }
        if state == .closed { return session }
        _ = try session.open()
        if state == .opening { return session }
        try settle()
        _ = try session.edit(.addStroke(stroke))
        if state == .open { return session }
        _ = try session.minimize()
        if state == .minimizing { return session }
        try settle()
        return session
    }

    static func command(_ event: String) throws -> CanvasCommand {
        switch event {
        case "open": return .open
        case "minimize": return .minimize
        case "submit": return .submit
        case "cancel": return .cancel
        case "finishTransition": return .finishTransition
        case "doubleTap": return .doubleTap
        case "edit":
            return .edit(.addStroke(try Stroke(tool: .highlighter, color: .black, width: 9, points: [InkPoint(x: 5, y: 5)])))
        default: throw TableError.unknownEvent(event)
        }
    }

    enum TableError: Error { case unknownEvent(String) }

    /// The reply as the table spells it.
    static func spelled(_ observation: Observation) -> String {
        switch observation.reply {
        case .accepted: return observation.stateChanges.isEmpty ? "unchanged" : "ok"
        case .edited: return "ok"
        case .rejected(let rejection): return "INVALID_STATE:\(rejection.rawValue)"
        case .invalidEdit: return "INVALID_PARAMS"
        case .doubleTap(let outcome):
            if case .ignored(let reason) = outcome { return "ignored:\(reason.rawValue)" }
            return outcome.name
        }
    }

    @Test("every combination matches exactly one row, and the session does what the row says")
    func walkTable() throws {
        let rows = try Self.rows()
        #expect(rows.count > 40)
        var used = Set<Int>()
        var combinations = 0
        for (transitionName, transitions) in [("instant", TransitionMode.instant), ("manual", .manual)] {
            let states: [CanvasPhase] = transitions == .instant ? [.closed, .open, .minimized] : CanvasPhase.allCases
            for policy in TapPolicy.allCases {
                for preference in PreferredTapAction.allCases {
                    for pencil in Self.pencils {
                        for state in states {
                            for event in Self.events {
                                let key = [transitionName, policy.rawValue, preference.rawValue, pencil, state.rawValue, event]
                                let matching = rows.filter { $0.matches(key) }
                                guard matching.count == 1, let row = matching.first else {
                                    Issue.record("\(key) matches \(matching.count) rows: \(matching)")
                                    continue
                                }
                                used.insert(row.line)
                                combinations += 1
                                var session = try Self.session(transitions: transitions, pencil: pencil, policy: policy,
                                                               preference: preference, state: state)
                                #expect(session.phase == state)
                                let before = session.drawing
                                let observation = session.perform(try Self.command(event))
                                #expect(Self.spelled(observation) == row.reply, "\(key) → \(row)")
                                #expect((observation.result?.action.rawValue ?? "-") == row.result, "\(key) → \(row)")
                                if let result = observation.result {
                                    #expect(result.hasContent, "\(key): the drawing had a stroke")
                                    #expect(observation.resultDrawing == before)
                                }
                                let next = row.next == "=" ? state.rawValue : row.next
                                #expect(session.phase.rawValue == next, "\(key) → \(row)")
                                if row.reply.hasPrefix("INVALID_STATE") || row.reply.hasPrefix("ignored") {
                                    #expect(session.drawing == before && observation.stateChanges.isEmpty,
                                            "\(key): a refusal changed something")
                                }
                            }
                        }
                    }
                }
            }
        }
        let unused = rows.filter { !used.contains($0.line) }
        #expect(unused.isEmpty, "rows no combination reaches: \(unused)")
        print("state table: \(combinations) combinations checked against \(rows.count) rows")
    }
}
