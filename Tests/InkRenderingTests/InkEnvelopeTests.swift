import CanvasCore
import Foundation
@testable import InkRendering
import Testing
import TestSupport

/// Ink goes where it was drawn (spec §4): no inked pixel farther from the stroke's points than
/// the envelope (plus 0.5 pt for anti-aliasing and the pixel grid at 288 dpi), and ink at every
/// point the pen touched.
@Suite("Ink envelope")
struct InkEnvelopeTests {
    static func stroke(_ points: [(Double, Double, Double?)], width: Double, tool: InkTool = .pen) throws -> Stroke {
        try Stroke(tool: tool, color: InkColor("black"), width: width, points: points.map { try InkPoint(x: $0.0, y: $0.1, pressure: $0.2) })
    }

    /// The three reproductions of issue 23, flattened as PDF and rendered by poppler: a
    /// Catmull-Rom curve through the points put ink 25 pt past a hairpin's tip, 5 pt past a
    /// sharp turn, and a curve whose control points lay 75 pt off a stroke of six points.
    @Test("the issue's reproductions stay inside the envelope, as PDF at 288 dpi", arguments: [
        ("hairpin, width 1", [(100.0, 300.0, nil), (300, 300, nil), (300, 301, nil), (100, 301, nil)] as [(Double, Double, Double?)], 1.0),
        ("sharp turn, width 4, pressure 0.5", [(200, 500, 0.5), (260, 500, 0.5), (261, 505, 0.5), (200, 506, 0.5)], 4),
        ("six close points, width 1.5", [(496.05, 290.0, 0.3), (495.06, 290.1, 0.4), (494.0, 290.2, 0.5), (493.01, 290.0, 0.6),
                                         (492.02, 290.1, 0.7), (491.03, 290.2, 0.8)], 1.5),
    ])
    func reproductions(_ name: String, _ points: [(Double, Double, Double?)], _ width: Double) throws {
        let stroke = try Self.stroke(points, width: width)
        let raster = try InkRaster.pdf([stroke])
        let beyond = raster.beyond(stroke)
        #expect(beyond.pixels == 0, "\(name): \(beyond.pixels) px beyond the envelope + 0.5 pt; worst \(beyond.envelope) pt past it")
        #expect(beyond.widest <= 0.5, "\(name): ink \(beyond.widest) pt past 0.85 × width")
        #expect(raster.uncovered(stroke) == 0, "\(name): points with no ink")
        // Every control point of the outline lies inside the envelope, not only the ink.
        let envelope = SpecEnvelope(stroke)
        for element in StrokeOutline.pen(stroke).elements {
            if case let .curve(a, b, c) = element {
                for p in [a, b, c] { #expect(envelope.excess(p.x, p.y).envelope <= 1e-6, "\(name): control point \(p) outside") }
            }
        }
    }

    /// A thin pen pressed hard, round a corner the smoothed centre line cuts (six points as a
    /// Xournal++ user's 0.85 pt pen with pressure wrote them): each sample's disc fits the
    /// envelope, but midway between two of them the ink would not, and that one segment sent
    /// the whole stroke to polygons, 16 corners a segment (a 593-point stroke of such writing:
    /// 52 KB of PDF; fitted, 13 KB). The segment gets a narrower waist instead.
    @Test("a thin pen pressed hard round a cut corner keeps a fitted outline, inside the envelope and inked where drawn")
    func cutCorner() throws {
        let stroke = try Self.stroke([(98.27, 6.48, 0.802), (98.6, 6.7, 0.791), (99.38, 7.89, 0.804), (99.38, 8.43, 0.815),
                                      (99.38, 9.08, 0.769), (100.17, 10.81, 0.787)], width: 0.85)
        let outline = StrokeOutline.pen(stroke)
        let curves = outline.elements.count { if case .curve = $0 { true } else { false } }
        #expect(curves > 0 && outline.elements.count < 60, "\(outline.elements.count) elements, \(curves) curves")
        let envelope = SpecEnvelope(stroke)
        for element in outline.elements {
            switch element {
            case .move(let p), .line(let p): #expect(envelope.excess(p.x, p.y).envelope <= 1e-6, "\(p) outside")
            case let .curve(a, b, c): for p in [a, b, c] { #expect(envelope.excess(p.x, p.y).envelope <= 1e-6, "\(p) outside") }
            case .close: break
            }
        }
        let raster = try InkRaster.pdf([stroke])
        #expect(raster.beyond(stroke).pixels == 0)
        #expect(raster.uncovered(stroke) == 0)
    }

    /// The recorded words with thin pens, where the envelope leaves a few hundredths of a point
    /// beside the ink: at 0.3 and 0.5 pt one word went to polygons before (a segment no waist
    /// of half its width fitted). Each is a fitted outline, every point of it (control points
    /// included) inside the spec's envelope, and at 0.3 pt rendered inside it and inked where drawn.
    @Test("recorded words with thin pens keep fitted outlines inside the envelope, at 0.3 pt inked where drawn",
          arguments: [0.3, 0.5, 0.85])
    func thinPens(_ width: Double) throws {
        for (index, recorded) in try RecordedHandwriting.strokes().enumerated() {
            let stroke = try Self.stroke(recorded.map { (100 + $0.0, 100 + $0.1, Optional($0.2)) }, width: width)
            let outline = StrokeOutline.pen(stroke)
            #expect(outline.elements.contains { if case .curve = $0 { true } else { false } }, "word \(index) at \(width) pt: polygons")
            let envelope = SpecEnvelope(stroke)
            let outside = outline.elements.flatMap { element -> [InkVector] in
                switch element {
                case .move(let p), .line(let p): [p]
                case let .curve(a, b, c): [a, b, c]
                case .close: []
                }
            }.filter { envelope.excess($0.x, $0.y).envelope > 1e-6 }
            #expect(outside.isEmpty, "word \(index) at \(width) pt: \(outside.count) points outside")
            if width == 0.3 {
                let raster = try InkRaster.pdf([stroke])
                #expect(raster.beyond(stroke).pixels == 0 && raster.uncovered(stroke) == 0, "word \(index)")
            }
        }
    }

    /// Strokes that people wrote (UNIPEN, Tests/Fixtures/strokes), three times their size on
    /// the page: with their own pressure at width 6, with pressure from speed (slow is heavy,
    /// the way the issue found spikes 346 pt long), and without pressure at width 2.
    @Test("recorded handwriting stays inside the envelope, as PDF at 288 dpi")
    func recorded() throws {
        var checked = 0
        for (index, recorded) in try RecordedHandwriting.strokes().enumerated() {
            let points = recorded.map { (100 + 3 * $0.0, 100 + 3 * $0.1, $0.2) }
            var speedPressure: [(Double, Double, Double?)] = []
            let speeds = points.indices.map { k -> Double in
                let a = points[max(k - 1, 0)], b = points[min(k + 1, points.count - 1)]
                return ((a.0 - b.0) * (a.0 - b.0) + (a.1 - b.1) * (a.1 - b.1)).squareRoot()
            }
            let fastest = max(speeds.max() ?? 1, 1e-9)
            for (k, p) in points.enumerated() { speedPressure.append((p.0, p.1, max(0, 1 - speeds[k] / fastest))) }
            for (label, stroke) in [("own pressure, width 6", try Self.stroke(points.map { ($0.0, $0.1, Optional($0.2)) }, width: 6)),
                                    ("pressure from speed, width 6", try Self.stroke(speedPressure, width: 6)),
                                    ("no pressure, width 2", try Self.stroke(points.map { ($0.0, $0.1, nil) }, width: 2))] {
                let raster = try InkRaster.pdf([stroke])
                let beyond = raster.beyond(stroke)
                #expect(beyond.pixels == 0, "stroke \(index), \(label): \(beyond.pixels) px beyond; worst \(beyond.envelope) pt")
                #expect(raster.uncovered(stroke) == 0, "stroke \(index), \(label): points with no ink")
                checked += 1
            }
        }
        #expect(checked == 72)
    }

    /// Adversarial strokes, generated: random walks, hairpins, zigzags, spirals, sudden
    /// pressure steps, repeated points, points 0.01 pt apart, one and two points, jitter.
    /// They are held to the measure (0.85 × width + 0.5 pt from the line, whatever the
    /// pressure): a spiral whose points lie 100 pt and more apart on a turn tighter than a
    /// radian per point can fill a sliver up to 0.31 pt past the tighter envelope + 0.5 pt
    /// (its outline lies inside; its winding around a gap between the arms is not zero).
    ///
    /// The same 72 strokes every run (each kind eight times, widths, counts and pressures
    /// spread over their ranges): random draws made some runs take minutes and others fail on
    /// cases no run could replay, so the set is fixed and a failure names its case.
    @Test("generated hard strokes keep within 0.85 × width + 0.5 pt and are inked where drawn")
    func generated() {
        for stroke in HardStrokes.fixedSet {
            let raster = InkRaster.cairo([stroke])
            let beyond = raster.beyond(stroke)
            #expect(beyond.widestPixels == 0, "\(beyond.widestPixels) px beyond 0.85 × width + 0.5 pt, worst \(beyond.widest) pt: \(stroke)")
            #expect(raster.uncovered(stroke) == 0, "points with no ink: \(stroke)")
        }
    }
}

/// Strokes made to be hard to outline, each from a few numbers.
enum HardStrokes {
    enum Kind: Int, CaseIterable {
        case randomWalk, hairpin, zigzag, spiral, pressureSteps, repeats, closePoints, fewPoints, jitteryLine
    }

    /// Eight of each kind, with widths from 0.3 to 12 pt, 1 to 240 points, each pressure mode
    /// and now and then a highlighter, from fixed seeds.
    static var fixedSet: [Stroke] {
        Kind.allCases.flatMap { kind in
            (0..<8).map { n in
                let index = kind.rawValue * 8 + n
                return make(kind, seed: UInt64(index) &* 2_654_435_761, width: 0.3 + 11.7 * Double((n * 5) % 8) / 7,
                            count: 1 + (n * 37 + kind.rawValue * 11) % 240, pressure: n % 3, highlighter: index % 7 == 3)
            }
        }
    }

    /// `pressure`: 0 none, 1 smooth, 2 jumping between 0.05 and 1.
    static func make(_ kind: Kind, seed: UInt64, width: Double, count: Int, pressure: Int, highlighter: Bool) -> Stroke {
        var random = SplitMix(seed: seed)
        var points: [(Double, Double)] = []
        switch kind {
        case .randomWalk:
            var x = 100.0, y = 100.0, heading = 0.0
            let step = random.uniform(0.05, 4)
            for _ in 0..<count {
                heading += random.uniform(-2.5, 2.5)
                x += step * cos(heading)
                y += step * sin(heading)
                points.append((x, y))
            }
        case .hairpin:
            let length = random.uniform(1, 200), gap = random.uniform(0, 3)
            points = [(100, 100), (100 + length, 100), (100 + length, 100 + gap), (100, 100 + gap)]
        case .zigzag:
            let amplitude = random.uniform(0.2, 30), step = random.uniform(0.05, 10)
            for k in 0..<count { points.append((100 + Double(k) * step, 100 + (k % 2 == 0 ? 0 : amplitude))) }
        case .spiral:
            let growth = random.uniform(0.01, 1), turn = random.uniform(0.1, 1.5)
            for k in 0..<count {
                let a = Double(k) * turn, r = 0.5 + growth * Double(k)
                points.append((150 + r * cos(a), 150 + r * sin(a)))
            }
        case .pressureSteps:
            let step = random.uniform(0.01, 3)
            for k in 0..<count { points.append((100 + Double(k) * step, 100 + random.uniform(-0.2, 0.2))) }
        case .repeats:
            for k in 0..<count {
                let at = Double(k / 4)
                points.append((100 + at * random.uniform(0, 2), 100 + at * random.uniform(-1, 1)))
            }
        case .closePoints:
            for k in 0..<count { points.append((100 + Double(k) * 0.01, 100 + (k % 3 == 0 ? 0.01 : 0))) }
        case .fewPoints:
            points = [(100, 100)]
            if count % 2 == 0 { points.append((100 + random.uniform(-20, 20), 100 + random.uniform(-20, 20))) }
        case .jitteryLine:
            for k in 0..<count { points.append((100 + Double(k) * 1.2 + random.uniform(-0.4, 0.4), 100 + random.uniform(-0.4, 0.4))) }
        }
        let inkPoints = points.enumerated().map { k, p -> InkPoint in
            let value: Double? = switch (pressure, kind) {
            case (0, _): nil
            case (_, .pressureSteps), (2, _): k % 2 == 0 ? 0.05 : 1
            default: 0.5 + 0.5 * sin(Double(k) * 0.3)
            }
            // Rounded as flattening rounds them (InkPrecision).
            return try! InkPoint(x: (p.0 * 100).rounded() / 100, y: (p.1 * 100).rounded() / 100, pressure: value)
        }
        return try! Stroke(tool: highlighter ? .highlighter : .pen, color: InkColor("black"), width: (width * 100).rounded() / 100,
                           points: Array(inkPoints.prefix(4096)))
    }
}
