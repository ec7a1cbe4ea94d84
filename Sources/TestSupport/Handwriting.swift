public import CanvasCore
import Foundation

/// A page of handwriting as a person makes it, the same on every run: 40 pen strokes of 120
/// pressure points each (cursive loops along ruled lines), 3 highlighter strokes over printed
/// lines, and 5 short texts, on a US Letter page (612 × 792 display points).
///
/// The shapes are drawn from a seeded generator, so sizes and renders can be compared between
/// versions of the renderer and between runs of a benchmark. `jitteryPage()` is the same page
/// as a stylus reports it: a digitizer's noise on every sample.
public enum Handwriting {
    public static let penStrokes = 40
    public static let pointsPerStroke = 120
    public static let highlighterStrokes = 3
    public static let highlighterPoints = 24
    public static let texts = 5

    /// Every stroke point of `page()`: what "bytes per input point" divides by.
    public static let inputPoints = penStrokes * pointsPerStroke + highlighterStrokes * highlighterPoints

    /// The baselines (display y) of the printed lines `document` puts on its pages, which the
    /// highlighter strokes cover.
    public static let printedLines: [Double] = [88, 110, 132]

    /// The noise `jitteryPage` adds to each sample: up to this many points in x and in y.
    public static let jitter = 0.4

    /// The page with a stylus's jitter: each pen sample moved by independent uniform noise of
    /// up to ±0.4 pt in x and in y (a digitizer's resolution and a hand's tremor, which make
    /// neighbouring samples disagree), and its pressure by up to ±0.04 on top of the slow
    /// drift every stroke has (a pressure sensor's noise). Highlighters and texts are as on
    /// `page()`.
    public static func jitteryPage(seed: UInt64 = 13) -> Drawing {
        page(seed: seed, jitter: jitter)
    }

    public static func page(seed: UInt64 = 13) -> Drawing { page(seed: seed, jitter: 0) }

    private static func page(seed: UInt64, jitter: Double) -> Drawing {
        var random = SplitMix(seed: seed)
        var strokes: [Stroke] = []
        let colors = [try! InkColor("black"), try! InkColor("#1F3A93")]
        // Three words to a ruled line, 34 points apart, from y = 180 down.
        for index in 0..<penStrokes {
            let line = index / 3, word = index % 3
            let baseline = 180 + Double(line) * 34 + random.uniform(-2, 2)
            let x0 = 48 + Double(word) * 178 + random.uniform(0, 10)
            let stroke = cursive(x0: x0, baseline: baseline, color: colors[line % 2 == 0 ? 0 : 1],
                                 width: random.uniform(1.8, 2.6), random: &random)
            strokes.append(jitter > 0 ? jittered(stroke, by: jitter, seed: seed &+ UInt64(index)) : stroke)
        }
        // Highlighter over the printed lines: nearly straight, a slight drift and wobble.
        let yellow = try! InkColor("#FFE03A")
        for (index, line) in printedLines.enumerated() {
            let y0 = line - 4 + random.uniform(-1, 1), x0 = 70 + random.uniform(0, 6)
            let length = 260 + Double(index) * 40 + random.uniform(0, 20)
            let drift = random.uniform(-3, 3)
            let points = (0..<highlighterPoints).map { step -> InkPoint in
                let t = Double(step) / Double(highlighterPoints - 1)
                return try! InkPoint(x: x0 + length * t, y: y0 + drift * t + 0.8 * sin(t * 9 + Double(index)))
            }
            strokes.append(try! Stroke(tool: .highlighter, color: yellow, width: 14, points: points))
        }
        let texts = [
            ("Notes, 23 November", 60.0, 30.0, 18.0, "#1F3A93"),
            ("see p. 4 ✓", 450.0, 76.0, 12.0, "#C0392B"),
            ("ask about the deadline", 420.0, 124.0, 11.0, "#C0392B"),
            ("Summary:", 48.0, 660.0, 14.0, "black"),
            ("Ünïcode ok → done", 60.0, 700.0, 12.0, "#6C3483"),
        ].map { try! TextAnnotation(text: $0.0, x: $0.1, y: $0.2, fontSize: $0.3, color: InkColor($0.4)) }
        return Drawing(strokes: strokes, texts: texts)
    }

    /// One handwritten word: a trochoid (the loops of a cursive "e" chain) whose loop height,
    /// slant and pace drift slowly; pressure rises at the start, wavers, and lifts at the end.
    private static func cursive(x0: Double, baseline: Double, color: InkColor, width: Double,
                                random: inout SplitMix) -> Stroke {
        let pace = random.uniform(1.1, 1.5)          // points advanced per sample
        let turn = random.uniform(0.22, 0.32)        // radians of loop per sample
        let loop = random.uniform(5, 8)              // loop height
        let slant = random.uniform(0.15, 0.35)
        let back = random.uniform(0.7, 1.1)          // how far a loop turns back, per unit of height
        let wobble = random.uniform(0, 2 * Double.pi)
        var height = loop, pressure = random.uniform(0.4, 0.6)
        var points: [InkPoint] = []
        for step in 0..<pointsPerStroke {
            let s = Double(step)
            let phase = s * turn
            height += random.uniform(-0.25, 0.25)
            height = min(max(height, loop * 0.6), loop * 1.4)
            let rise = height * (1 + cos(phase)) / 2
            let x = x0 + s * pace - back * height * sin(phase) + slant * rise
            let y = baseline - rise + 0.6 * sin(s * 0.05 + wobble)
            pressure += random.uniform(-0.03, 0.03)
            pressure = min(max(pressure, 0.25), 0.85)
            let ends = min(1, Double(step + 1) / 8, Double(pointsPerStroke - step) / 10)
            points.append(try! InkPoint(x: x, y: y, pressure: max(0.05, pressure * (0.4 + 0.6 * ends))))
        }
        return try! Stroke(tool: .pen, color: color, width: width, points: points)
    }

    /// The stroke with noise on each sample, from a generator of its own, so the page's shapes
    /// stay those of `page()`.
    private static func jittered(_ stroke: Stroke, by amount: Double, seed: UInt64) -> Stroke {
        var random = SplitMix(seed: seed ^ 0x5EED_0F_1A77E5)
        let points = stroke.points.map { point in
            try! InkPoint(x: point.x + random.uniform(-amount, amount), y: point.y + random.uniform(-amount, amount),
                          pressure: point.pressure.map { min(1, max(0.02, $0 + random.uniform(-0.04, 0.04))) })
        }
        return try! Stroke(tool: stroke.tool, color: stroke.color, width: stroke.width, points: points)
    }

    /// A small text document for the handwriting: `pages` pages of printed lines, among them
    /// the lines the highlighter covers.
    public static func document(pages: Int = 3) -> [UInt8] {
        PDFFixtures.pdf((0..<pages).map { index in
            var content = "0 g BT /F1 11 Tf\n"
            for (line, y) in printedLines.enumerated() {
                content += "1 0 0 1 72 \(792 - y) Tm (Page \(index + 1), printed line \(line + 1): the quick brown fox.) Tj\n"
            }
            content += "ET\n"
            return PDFFixtures.Page(content: content)
        })
    }
}

/// SplitMix64: tiny, seedable, and the same on every platform.
public struct SplitMix {
    private var state: UInt64

    public init(seed: UInt64) { state = seed }

    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    public mutating func uniform(_ low: Double, _ high: Double) -> Double {
        low + (high - low) * Double(next() >> 11) / Double(1 << 53)
    }
}
