@testable import CanvasService
import CanvasProtocol
import DocumentStore
import Foundation
import Testing

/// Every `PAYLOAD_TOO_LARGE` says what the request has or would make (`size`) beside the limit
/// it passes, whichever limit and whichever method: a client tells "how far over" from `data`
/// without parsing the message. Small limits, so each is reached in a few requests.
@Suite("over-limit refusals")
struct OverLimitTests {
    static var limits: Limits {
        var limits = Limits()
        limits.maxPointsPerStroke = 3
        limits.maxPointsPerDrawing = 5
        limits.maxStrokesPerDrawing = 2
        limits.maxTextsPerDrawing = 1
        limits.maxTextLength = 4
        limits.maxUploadBytes = 100
        return limits
    }

    static func points(_ count: Int) -> JSONValue {
        .array((0..<count).map { .object(["x": .integer(Int64($0)), "y": 1]) })
    }

    static func stroke(_ count: Int, continued: Bool = false) -> [String: JSONValue] {
        var params: [String: JSONValue] = ["tool": "pen", "color": "blue", "width": 2, "points": points(count)]
        if continued { params["continued"] = true }
        return params
    }

    static func text(_ length: Int) -> [String: JSONValue] {
        ["text": .string(String(repeating: "t", count: length)), "x": 1, "y": 1, "fontSize": 12, "color": "black"]
    }

    /// The refusal's `data`, checked to be an over-limit one with `size` past `limit`.
    static func refusal(_ reply: JSONValue?, field: JSONValue, size: Int, limit: Int, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(reply?["error"]?["code"] == "PAYLOAD_TOO_LARGE", sourceLocation: sourceLocation)
        #expect(reply?["error"]?["data"]?["field"] == field, sourceLocation: sourceLocation)
        #expect(reply?["error"]?["data"]?["size"] == .integer(Int64(size)), sourceLocation: sourceLocation)
        #expect(reply?["error"]?["data"]?["limit"] == .integer(Int64(limit)), sourceLocation: sourceLocation)
    }

    @Test("each drawing limit, through each method that can pass it, answers its size")
    func drawingLimits() throws {
        var harness = try OwnerLimitsTests.Harness(limits: Self.limits)
        let session = try harness.open(from: nil)
        _ = harness.send("canvas.open", session: session, from: nil)
        Self.refusal(harness.send("drawing.addStroke", Self.stroke(4), session: session, from: nil).replies.first,
                     field: "points", size: 4, limit: 3)
        Self.refusal(harness.send("drawing.addText", Self.text(5), session: session, from: nil).replies.first,
                     field: "text", size: 5, limit: 4)
        _ = harness.send("drawing.addText", Self.text(1), session: session, from: nil)
        Self.refusal(harness.send("drawing.addText", Self.text(1), session: session, from: nil).replies.first,
                     field: "texts", size: 2, limit: 1)
        Self.refusal(harness.send("drawing.editText", ["index": 0, "text": .string("ttttt")], session: session, from: nil).replies.first,
                     field: "text", size: 5, limit: 4)
        _ = harness.send("drawing.addStroke", Self.stroke(3), session: session, from: nil)
        Self.refusal(harness.send("drawing.addStroke", Self.stroke(3), session: session, from: nil).replies.first,
                     field: "points", size: 6, limit: 5)
        _ = harness.send("drawing.addStroke", Self.stroke(2, continued: true), session: session, from: nil)
        Self.refusal(harness.send("drawing.addStroke", Self.stroke(2), session: session, from: nil).replies.first,
                     field: "points", size: 4, limit: 3)
        _ = harness.send("drawing.addStroke", Self.stroke(1), session: session, from: nil)
        Self.refusal(harness.send("drawing.addStroke", Self.stroke(1), session: session, from: nil).replies.first,
                     field: "strokes", size: 3, limit: 2)
    }

    @Test("a flattened drawing past a limit, and an upload past its size, answer their size")
    func documentLimits() throws {
        var harness = try OwnerLimitsTests.Harness(limits: Self.limits)
        func flatten(_ drawing: [String: JSONValue]) -> JSONValue? {
            harness.send("document.flatten", ["name": "doc.pdf", "page": 0, "drawing": .object(drawing)], from: nil).replies.first
        }
        let one = JSONValue.object(Self.stroke(1))
        Self.refusal(flatten(["strokes": [one, one, one]]), field: "drawing.strokes", size: 3, limit: 2)
        Self.refusal(flatten(["texts": [.object(Self.text(1)), .object(Self.text(1))]]), field: "drawing.texts", size: 2, limit: 1)
        Self.refusal(flatten(["strokes": [.object(Self.stroke(3)), .object(Self.stroke(3))]]), field: "drawing.strokes", size: 6, limit: 5)
        Self.refusal(flatten(["strokes": [one, .object(Self.stroke(4))]]), field: "drawing.strokes[1].points", size: 4, limit: 3)
        Self.refusal(flatten(["texts": [.object(Self.text(5))]]), field: "drawing.texts[0].text", size: 5, limit: 4)
        let begin = harness.send("document.upload.begin", ["name": "new.pdf", "size": 101, "sha256": .string(String(repeating: "0", count: 64))],
                                 from: nil).replies.first
        Self.refusal(begin, field: "size", size: 101, limit: 100)
    }

    @Test("an expectedRevision past the current one is not called saved since")
    func revisionNotMadeYet() {
        #expect(DocumentError.conflict(name: "d.pdf", expected: 5, current: 1).description == "d.pdf is at revision 1; there is no revision 5 yet")
        #expect(DocumentError.conflict(name: "d.pdf", expected: 1, current: 2).description.hasSuffix("it was saved since"))
    }
}
