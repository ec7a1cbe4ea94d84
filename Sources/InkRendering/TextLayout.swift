public import CanvasCore

/// Where a text's lines go (spec §4): (x, y) is the top-left corner of the first line's box,
/// which is the font's ascent above the baseline and its descent below it; each next line is
/// one line height lower. The numbers are DejaVu Sans's own (its `hhea` table: ascent 1901,
/// descent 483, no line gap, of 2048 units per em), written here rather than asked of the font
/// at run time, so that the PDF, the PNG (whose Cairo surface would round hinted metrics to
/// whole pixels) and a browser's preview all put a line at the same place.
public enum TextLayout {
    /// The first baseline's distance below `y`, per point of font size.
    public static let ascent = 1901.0 / 2048
    /// How far a line's box reaches below its baseline, per point of font size.
    public static let descent = 483.0 / 2048
    /// From one baseline to the next, per point of font size.
    public static let lineHeight = 2384.0 / 2048

    /// The baseline of line `line` (from 0) of `text`, in display points.
    public static func baseline(of text: TextAnnotation, line: Int) -> Double {
        text.y + (ascent + Double(line) * lineHeight) * text.fontSize
    }

    /// The lines of a text, as it is split for drawing.
    public static func lines(of text: TextAnnotation) -> [Substring] {
        text.text.split(separator: "\n", omittingEmptySubsequences: false)
    }
}
