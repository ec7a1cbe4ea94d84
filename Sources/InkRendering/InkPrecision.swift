public import CanvasCore

/// The precision ink is kept at once it is on paper: 0.01 pt for positions, widths and sizes,
/// 0.001 for pressure (a width step under 0.01 pt for any pen up to 7 pt). Flattening rounds a
/// drawing to it first, so that the page's ink and the drawing stored beside it agree exactly,
/// and neither carries digits nobody can see.
public enum InkPrecision {
    public static func rounded(_ drawing: Drawing) -> Drawing {
        Drawing(strokes: drawing.strokes.map(rounded), texts: drawing.texts.map(rounded))
    }

    static func hundredths(_ value: Double) -> Double { (value * 100).rounded() / 100 }

    static func rounded(_ stroke: Stroke) -> Stroke {
        let points = stroke.points.map { point in
            (try? InkPoint(x: hundredths(point.x), y: hundredths(point.y), pressure: point.pressure.map { ($0 * 1000).rounded() / 1000 })) ?? point
        }
        // Rounding cannot leave the allowed ranges (their ends are round numbers); the original
        // stays if it somehow did.
        return (try? Stroke(tool: stroke.tool, color: stroke.color, width: hundredths(stroke.width), points: points)) ?? stroke
    }

    static func rounded(_ text: TextAnnotation) -> TextAnnotation {
        (try? TextAnnotation(text: text.text, x: hundredths(text.x), y: hundredths(text.y), fontSize: hundredths(text.fontSize),
                             color: text.color)) ?? text
    }
}
