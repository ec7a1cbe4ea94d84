@testable import CanvasService
import CanvasClient
import CanvasCore
import CanvasProtocol
import Foundation
import SessionStore
import Testing
import TestSupport

/// Shared sessions written as their operations (`SessionOperation`), replayed by whichever
/// instance takes them over: a client that moves between two instances at random, request by
/// request, is answered exactly as one canvasd without a store answers the same requests, and
/// what the store holds is a log of entries about a change's own size.
@Suite("session changes written as operations", .serialized)
struct SessionOperationsTests {
    /// One random request of a session, as params (the session is added by the sender).
    struct Step {
        var method: String
        var params: [String: JSONValue]
    }

    /// Requests a person's client could send, drawn from recorded handwriting, with every
    /// method that changes a session among them (and refusals: an edit on a closed canvas, a
    /// text that is not there, a transition with none under way).
    static func randomStep(_ random: inout SplitMix, strokes: [Stroke]) -> [Step] {
        func points(_ stroke: Stroke) -> JSONValue { (try? JSONCodec.value(of: stroke.points)) ?? [] }
        func pick(_ count: Int) -> Int { Int(random.next() % UInt64(count)) }
        let stroke = strokes[pick(strokes.count)]
        let style: [String: JSONValue] = ["tool": .string(pick(5) == 0 ? "highlighter" : "pen"), "color": .string(stroke.color.rawValue),
                                          "width": .number(stroke.width)]
        switch pick(100) {
        case 0..<28:
            return [Step(method: "drawing.addStroke", params: style.merging(["points": points(stroke)]) { $1 })]
        case 28..<32:
            // A long stroke sent in two parts.
            let half = max(1, stroke.points.count / 2)
            let first = try! Stroke(tool: stroke.tool, color: stroke.color, width: stroke.width, points: Array(stroke.points[..<half]))
            let second = try! Stroke(tool: stroke.tool, color: stroke.color, width: stroke.width,
                                     points: half < stroke.points.count ? Array(stroke.points[half...]) : stroke.points)
            return [Step(method: "drawing.addStroke", params: style.merging(["points": points(first), "continued": true]) { $1 }),
                    Step(method: "drawing.addStroke", params: style.merging(["points": points(second)]) { $1 })]
        case 32..<40: return [Step(method: "drawing.undo", params: [:])]
        case 40..<45: return [Step(method: "drawing.redo", params: [:])]
        case 45..<53:
            let point = stroke.points[pick(stroke.points.count)]
            return [Step(method: "drawing.erase", params: ["x": .number(point.x), "y": .number(point.y), "radius": .number(Double(2 + pick(20))),
                                                           "mode": .string(pick(2) == 0 ? "stroke" : "partial")])]
        case 53..<58:
            return [Step(method: "drawing.addText", params: ["text": .string("note \(pick(1000)) é"), "x": .number(Double(pick(500)) + 0.25),
                                                             "y": .number(Double(pick(700))), "fontSize": .number(Double(8 + pick(40)))])]
        case 58..<61:
            return [Step(method: "drawing.moveText", params: ["index": .integer(Int64(pick(3))), "x": .number(Double(pick(400)) + 0.5),
                                                              "y": .number(Double(pick(400)))])]
        case 61..<64:
            return [Step(method: "drawing.editText", params: ["index": .integer(Int64(pick(3))), "dx": .number(1.5), "color": "red",
                                                              "text": .string("edited \(pick(100))")])]
        case 64..<66: return [Step(method: "drawing.clear", params: [:])]
        case 66..<72: return [Step(method: "canvas.open", params: [:])]
        case 72..<75: return [Step(method: "canvas.minimize", params: [:])]
        case 75..<77: return [Step(method: "canvas.submit", params: [:])]
        case 77..<78: return [Step(method: "canvas.cancel", params: [:])]
        case 78..<83: return [Step(method: "canvas.finishTransition", params: [:])]
        case 83..<89: return [Step(method: "pencil.doubleTap", params: [:])]
        case 89..<91:
            return [Step(method: "pencil.configure", params: ["preferredTapAction": .string(["switchEraser", "switchPrevious", "ignore"][pick(3)]),
                                                              "policy": .string(pick(2) == 0 ? "alwaysToggle" : "respectPreference")])]
        case 91..<95: return [Step(method: "canvas.state", params: [:])]
        default: return [Step(method: "drawing.get", params: [:])]
        }
    }

    /// A reply with the session's id taken out, so two runs' replies compare.
    static func comparable(_ reply: JSONValue, session: String) -> String {
        String(decoding: JSONCodec.serialize(reply), as: UTF8.self).replacingOccurrences(of: session, with: "<session>")
    }

    @Test("a client moving between two instances at random, request by request, is answered exactly as one canvasd without a store answers it",
          arguments: [(UInt64(7), "manual"), (UInt64(11), "instant"), (UInt64(23), "manual")])
    func movingClientMatchesOneInstance(seed: UInt64, transitions: String) throws {
        let pair = try TwoInstances()
        defer { pair.stop() }
        let alone = try LiveServer()
        defer { _ = alone.stop() }
        let toAlone = try alone.client()
        let strokes = try RecordedHandwriting.page(copies: 1).strokes
        var random = SplitMix(seed: seed)

        let open: [String: JSONValue] = ["transitions": .string(transitions), "resultImages": false]
        let shared = try #require(try SharedSessionTests.send(pair.toA, id: 1, "session.open", open, session: nil)["result"]?["session"]?.stringValue)
        let local = try #require(try SharedSessionTests.send(toAlone, id: 1, "session.open", open, session: nil)["result"]?["session"]?.stringValue)
        var onA = true, id: Int64 = 1, moves = 0
        var sent: [(id: Int64, step: Step)] = []
        for index in 0..<260 {
            var steps = Self.randomStep(&random, strokes: strokes)
            var ids: [Int64] = []
            let retry = index > 10 && random.next() % 12 == 0
            if retry {
                // A retry: the same id and request again, answered from the reply cache (or the
                // store's record), on whichever instance has the session now.
                let again = sent[sent.count - 1 - Int(random.next() % UInt64(min(sent.count, 8)))]
                steps = [again.step]
                ids = [again.id]
            } else {
                ids = steps.map { _ in
                    id += 1
                    return id
                }
            }
            for (step, requestID) in zip(steps, ids) {
                if random.next() % 3 == 0 {
                    onA.toggle()
                    moves += 1
                }
                let there = try SharedSessionTests.send(onA ? pair.toA : pair.toB, id: requestID, step.method, step.params, session: shared)
                let here = try SharedSessionTests.send(toAlone, id: requestID, step.method, step.params, session: local)
                #expect(Self.comparable(there, session: shared) == Self.comparable(here, session: local),
                        "step \(index), \(step.method) \(requestID) on \(onA ? "a" : "b") after \(moves) moves")
                if !retry { sent.append((requestID, step)) }
            }
        }
        // The session as last acknowledged, whoever reads it.
        for client in [pair.toA, pair.toB] {
            id += 1
            let there = try SharedSessionTests.send(client, id: id, "drawing.get", session: shared)
            let here = try SharedSessionTests.send(toAlone, id: id, "drawing.get", session: local)
            #expect(Self.comparable(there, session: shared) == Self.comparable(here, session: local))
        }
    }
}
