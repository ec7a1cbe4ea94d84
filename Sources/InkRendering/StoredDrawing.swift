public import CanvasCore

/// The drawing stored beside the ink it was made from: JSON as `drawing.get` returns it (keys
/// sorted), with numbers at `InkPrecision`. Written directly, since a page of handwriting has
/// thousands of points and a general encoder spends more time on them than the rest of a
/// flatten.
public enum StoredDrawing {
    /// `drawing` must already be rounded (`InkPrecision.rounded`), or its numbers are rounded
    /// here as they are written.
    public static func json(_ drawing: Drawing) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(64 + drawing.strokes.reduce(0) { $0 + 40 * $1.points.count })
        func raw(_ text: StaticString) { out.append(contentsOf: UnsafeBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount)) }
        func number(_ value: Double, _ decimals: Int = 2) { DecimalText.append(value, decimals: decimals, json: true, to: &out) }
        func string(_ text: String) {
            out.append(UInt8(ascii: "\""))
            for byte in text.utf8 {
                switch byte {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"):
                    out.append(UInt8(ascii: "\\"))
                    out.append(byte)
                case 0..<0x20:
                    let hex = Array("0123456789abcdef".utf8)
                    out.append(contentsOf: Array("\\u00".utf8) + [hex[Int(byte >> 4)], hex[Int(byte & 15)]])
                default:
                    out.append(byte)
                }
            }
            out.append(UInt8(ascii: "\""))
        }
        raw("{\"strokes\":[")
        for (index, stroke) in drawing.strokes.enumerated() {
            if index > 0 { raw(",") }
            raw("{\"color\":")
            string(stroke.color.rawValue)
            raw(",\"points\":[")
            for (k, point) in stroke.points.enumerated() {
                raw(k > 0 ? ",{" : "{")
                if let pressure = point.pressure {
                    raw("\"pressure\":")
                    number(pressure, 3)
                    raw(",")
                }
                raw("\"x\":")
                number(point.x)
                raw(",\"y\":")
                number(point.y)
                raw("}")
            }
            raw("],\"tool\":")
            string(stroke.tool.rawValue)
            raw(",\"width\":")
            number(stroke.width)
            raw("}")
        }
        raw("],\"texts\":[")
        for (index, text) in drawing.texts.enumerated() {
            if index > 0 { raw(",") }
            raw("{\"color\":")
            string(text.color.rawValue)
            raw(",\"fontSize\":")
            number(text.fontSize)
            raw(",\"text\":")
            string(text.text)
            raw(",\"x\":")
            number(text.x)
            raw(",\"y\":")
            number(text.y)
            raw("}")
        }
        raw("]}")
        return out
    }
}
