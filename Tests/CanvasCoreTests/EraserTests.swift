import CanvasCore
import PropertyBased
import Testing

@Suite("Eraser")
struct EraserTests {
    func line(_ xs: [Double], y: Double = 0, width: Double = 2, pressures: [Double]? = nil) throws -> Stroke {
        let points = try xs.enumerated().map { index, x in try InkPoint(x: x, y: y, pressure: pressures?[index]) }
        return try Stroke(tool: .pen, color: .black, width: width, points: points)
    }

    func xs(_ stroke: Stroke) -> [Double] { stroke.points.map(\.x) }

    @Test("a partial erase across the middle splits a stroke in two, cut on the eraser's edge")
    func partialSplit() throws {
        let stroke = try line(Array(stride(from: 0.0, through: 100, by: 10)))
        let drawing = Drawing(strokes: [stroke])
        // Reach = radius 10 + half the width 1 = 11: ink from x = 39 to 61 goes.
        let (erased, touched) = drawing.erasing(try EraseRequest(x: 50, y: 0, radius: 10, mode: .partial))
        #expect(touched == 1)
        #expect(erased.strokes.count == 2)
        #expect(xs(erased.strokes[0]) == [0, 10, 20, 30, 39])
        #expect(xs(erased.strokes[1]) == [61, 70, 80, 90, 100])
        #expect(erased.strokes.allSatisfy { $0.tool == .pen && $0.width == 2 && $0.color == .black })
    }

    @Test("a partial erase at one end shortens the stroke; pressure is interpolated at the cut")
    func partialEnd() throws {
        let stroke = try line([0, 100], pressures: [0, 1])
        let (erased, _) = Drawing(strokes: [stroke]).erasing(try EraseRequest(x: 100, y: 0, radius: 24, mode: .partial))
        #expect(erased.strokes.count == 1)
        let cut = try #require(erased.strokes.first?.points.last)
        #expect(abs(cut.x - 75) < 1e-9)
        #expect(abs(cut.pressure! - 0.75) < 1e-9)
    }

    @Test("a partial erase over a diagonal crossing cuts where the disc meets the line")
    func partialDiagonal() throws {
        let stroke = try Stroke(tool: .highlighter, color: .black, width: 0.1,
                                points: [InkPoint(x: 0, y: 0), InkPoint(x: 100, y: 100)])
        let (erased, _) = Drawing(strokes: [stroke]).erasing(try EraseRequest(x: 50, y: 50, radius: 9.95, mode: .partial))
        #expect(erased.strokes.count == 2)
        let end = erased.strokes[0].points[1], start = erased.strokes[1].points[0]
        let d = 10 / 2.0.squareRoot()
        #expect(abs(end.x - (50 - d)) < 1e-9 && abs(end.y - (50 - d)) < 1e-9)
        #expect(abs(start.x - (50 + d)) < 1e-9 && abs(start.y - (50 + d)) < 1e-9)
    }

    @Test("the eraser reaches the ink, not just the centre line")
    func reachIncludesWidth() throws {
        let stroke = try line([0, 100], y: 0, width: 10)
        let drawing = Drawing(strokes: [stroke])
        // Centre line at y = 0, ink to y = 5; eraser of radius 2 at y = 6.9 reaches it, at 7.1 not.
        #expect(drawing.erasing(try EraseRequest(x: 50, y: 6.9, radius: 2, mode: .stroke)).touched == 1)
        #expect(drawing.erasing(try EraseRequest(x: 50, y: 7.1, radius: 2, mode: .stroke)).touched == 0)
    }

    @Test("a stroke erase removes whole strokes it touches and keeps the rest exactly")
    func wholeStroke() throws {
        let a = try line([0, 100], y: 0)
        let b = try line([0, 100], y: 50)
        let dot = try line([200], y: 200)
        let drawing = Drawing(strokes: [a, b, dot])
        let (erased, touched) = drawing.erasing(try EraseRequest(x: 50, y: 1, radius: 3, mode: .stroke))
        #expect(touched == 1)
        #expect(erased.strokes == [b, dot])
        let (noDot, _) = erased.erasing(try EraseRequest(x: 201, y: 201, radius: 1, mode: .partial))
        #expect(noDot.strokes == [b])
    }

    @Test("an erase that misses changes nothing")
    func miss() throws {
        let drawing = Drawing(strokes: [try line([0, 100])])
        for mode in EraseMode.allCases {
            let (erased, touched) = drawing.erasing(try EraseRequest(x: 50, y: 40, radius: 5, mode: mode))
            #expect(touched == 0 && erased == drawing)
        }
    }

    @Test("after a partial erase no ink lies inside the eraser, and no ink outside it is lost")
    func partialProperty() async {
        await propertyCheck(count: 500, input: Generators.drawing, Generators.erase) { drawing, request in
            let partial = try! EraseRequest(x: request.x, y: request.y, radius: request.radius, mode: .partial)
            let (erased, _) = drawing.erasing(partial)
            #expect(erased.texts == drawing.texts)
            for stroke in erased.strokes {
                let reach = partial.radius + stroke.width / 2
                for point in stroke.points {
                    let distance = ((point.x - partial.x) * (point.x - partial.x) + (point.y - partial.y) * (point.y - partial.y)).squareRoot()
                    #expect(distance >= reach - 1e-6, "a point of the erased drawing lies inside the eraser")
                }
            }
            // Every original point outside the eraser survives in some piece of the same stroke kind.
            let kept = Set(erased.strokes.flatMap(\.points))
            for stroke in drawing.strokes {
                let reach = partial.radius + stroke.width / 2
                for point in stroke.points where (point.x - partial.x) * (point.x - partial.x) + (point.y - partial.y) * (point.y - partial.y) > reach * reach {
                    #expect(kept.contains(point), "a point outside the eraser was lost")
                }
            }
        }
    }
}
