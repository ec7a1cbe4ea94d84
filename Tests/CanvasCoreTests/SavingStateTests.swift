import CanvasCore
import Foundation
import Testing

/// `protocol/state-table.md`'s "Submit into a document" table, row by row, on a real canvas.
@Suite("Submit into a document")
struct SavingStateTests {
    struct Row: CustomStringConvertible {
        let state, event, reply, result, next: String
        let line: Int
        var description: String { "line \(line): | \(state) | \(event) | \(reply) | \(result) | \(next) |" }
    }

    static func rows() throws -> [Row] {
        try StateTableTests.table("saving", columns: 5).map { row in
            Row(state: row.cells[0], event: row.cells[1], reply: row.cells[2], result: row.cells[3], next: row.cells[4], line: row.line)
        }
    }

    static let stroke = DrawingEdit.addStroke(try! Stroke(tool: .pen, color: InkColor("red"), width: 2,
                                                          points: [InkPoint(x: 1, y: 1), InkPoint(x: 5, y: 5)]))

    /// A canvas in `state` (manual transitions), with a stroke once it has been open.
    static func canvas(in state: String) throws -> CanvasStateMachine {
        var canvas = CanvasStateMachine(transitions: .manual)
        func drawn() throws {
            _ = try canvas.open(cause: .client)
            _ = try canvas.finishTransition()
            _ = try canvas.edit(stroke)
        }
        switch state {
        case "closed": break
        case "opening": _ = try canvas.open(cause: .client)
        case "open", "saving(open)": try drawn()
        case "minimizing": try drawn(); _ = try canvas.minimize(cause: .client)
        case "minimized", "saving(minimized)": try drawn(); _ = try canvas.minimize(cause: .client); _ = try canvas.finishTransition()
        default: Issue.record("no state \(state)")
        }
        if state.hasPrefix("saving") { _ = try canvas.submit(cause: .client, savingFirst: true) }
        return canvas
    }

    static func run(_ event: String, on canvas: inout CanvasStateMachine) throws(CanvasRejection) -> [CanvasAction] {
        switch event {
        case "submit": return try canvas.submit(cause: .client, savingFirst: true)
        case "saved": return try canvas.saved(true, cause: .client)
        case "saveFailed": return try canvas.saved(false, cause: .client)
        case "open": return try canvas.open(cause: .client)
        case "minimize": return try canvas.minimize(cause: .client)
        case "cancel": return try canvas.cancel(cause: .client)
        case "finishTransition": return try canvas.finishTransition()
        case "edit":
            do {
                _ = try canvas.edit(stroke)
                return []
            } catch {
                guard case .rejected(let rejection) = error else { return [] }
                throw rejection
            }
        default: preconditionFailure("no event \(event)")
        }
    }

    @Test("every row, on a real canvas: the reply, the result and the state after")
    func rowsHold() throws {
        let rows = try Self.rows()
        #expect(rows.count == 14)
        for row in rows {
            let states = row.state == "saving(*)" ? ["saving(open)", "saving(minimized)"] : [row.state]
            for state in states {
                var canvas = try Self.canvas(in: state)
                let before = canvas
                do throws(CanvasRejection) {
                    let actions = try Self.run(row.event, on: &canvas)
                    switch row.reply {
                    case "save":
                        #expect(actions == [.save(before.drawing)], "\(row)")
                        #expect(canvas.isSaving && canvas.phase == before.phase && canvas.drawing == before.drawing, "\(row)")
                    case "ok":
                        #expect(actions.emittedResult?.result.action.rawValue == row.result, "\(row)")
                        #expect(actions.emittedResult?.drawing == before.drawing, "\(row): the drawing saved is the one handed over")
                    case "error":
                        #expect(actions.isEmpty, "\(row)")
                    default:
                        Issue.record("\(row): \(state) answered \(actions), not \(row.reply)")
                    }
                } catch {
                    #expect(row.reply == "INVALID_STATE:\(error.rawValue)", "\(row) on \(state)")
                    #expect(canvas == before, "\(row): a refused event changes nothing")
                }
                let next = row.next == "=" ? state : row.next
                if next.hasPrefix("saving") {
                    #expect(canvas.isSaving, "\(row)")
                } else {
                    #expect(!canvas.isSaving && canvas.phase.rawValue == next, "\(row) on \(state): \(canvas.phase)")
                }
                if row.event == "saveFailed" { #expect(canvas.drawing == before.drawing, "\(row): the drawing is kept for another try") }
            }
        }
    }
}
