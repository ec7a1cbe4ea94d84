import CanvasCore
@testable import InkRendering
import Testing

/// A result image's render stops at its deadline (spec 3.1), and the work that makes it
/// stoppable leaves the image as it was.
@Suite("Render deadline")
struct RenderDeadlineTests {
    /// A pen and a highlighter stroke of `count` points each anywhere on a `side` square, and
    /// one short red line: lines across the page between samples, the most work a stroke makes.
    static func farApart(_ count: Int, side: Double) throws -> Drawing {
        var state: UInt64 = 7
        func next() -> Double {
            // A fixed sequence (xorshift), so the drawing is the same on every run.
            state ^= state << 13
            state ^= state >> 7
            state ^= state << 17
            return Double(state % 1_000_000) / 1_000_000
        }
        func points() throws -> [InkPoint] {
            try (0..<count).map { _ in try InkPoint(x: next() * side, y: next() * side, pressure: 0.1 + 0.9 * next()) }
        }
        return Drawing(strokes: [
            try Stroke(tool: .pen, color: InkColor("black"), width: 1, points: points()),
            try Stroke(tool: .highlighter, color: InkColor("yellow"), width: 4, points: points()),
            try Stroke(tool: .pen, color: InkColor("red"), width: 6, points: [InkPoint(x: 10, y: 10), InkPoint(x: 60, y: 12)]),
        ])
    }

    @Test("a large path painted in bands (with a deadline) gives the same PNG, byte for byte")
    func bandsChangeNothing() throws {
        let drawing = try Self.farApart(1_500, side: 1_200)
        // The bands are in play: the pen's outline has more elements than are painted at once,
        // and spans more rows than one band holds.
        let outline = StrokeOutline.pen(drawing.strokes[0])
        #expect(outline.elements.count > InkRenderer.bandedElements)
        let whole = try InkRenderer.png(drawing, width: 1_200, height: 1_200)
        let banded = try InkRenderer.png(drawing, width: 1_200, height: 1_200, deadline: RenderDeadline(.now + .seconds(600)))
        #expect(whole == banded)
    }

    @Test("a render past its deadline stops, saying so")
    func stops() throws {
        let drawing = try Self.farApart(1_500, side: 1_200)
        let started = ContinuousClock.now
        #expect {
            _ = try InkRenderer.png(drawing, width: 1_200, height: 1_200, deadline: RenderDeadline(.now + .milliseconds(20)))
        } throws: { error in
            (error as? RenderError)?.pastDeadline == true
        }
        // Generous: the whole render is seconds in a debug build; what overshoots is one band.
        #expect(ContinuousClock.now - started < .seconds(2))
    }
}
