public import CanvasCore
internal import CCairo

/// Why rendering failed: what was being done and Cairo's own status.
public struct RenderError: Error, Sendable, CustomStringConvertible {
    public let operation: String
    public let status: String
    public var description: String { "\(operation): cairo says \(status)" }

    init(_ operation: String, _ status: cairo_status_t) {
        self.operation = operation
        self.status = String(cString: cairo_status_to_string(status))
    }
}

/// Draws a `Drawing`: with Cairo into a PNG for `imageData`, or as the layers of PDF that
/// flattening puts on a page.
public enum InkRenderer {
    /// The font every text is set in; Debian's fonts-dejavu-core provides it.
    public static let fontFamily = "DejaVu Sans"

    /// A PNG of the drawing on a transparent background, `width` × `height` display points at
    /// one pixel per point.
    public static func png(_ drawing: Drawing, width: Int, height: Int) throws(RenderError) -> [UInt8] {
        guard let surface = cairo_image_surface_create(CAIRO_FORMAT_ARGB32, Int32(width), Int32(height)) else {
            throw RenderError("create image surface", CAIRO_STATUS_NO_MEMORY)
        }
        defer { cairo_surface_destroy(surface) }
        try check(cairo_surface_status(surface), "create \(width)×\(height) image surface")
        let context = cairo_create(surface)!
        defer { cairo_destroy(context) }
        draw(drawing, on: context)
        try check(cairo_status(context), "draw the ink")
        cairo_surface_flush(surface)

        let sink = ByteSink()
        let status = cairo_surface_write_to_png_stream(surface, { closure, data, length in
            let sink = Unmanaged<ByteSink>.fromOpaque(closure!).takeUnretainedValue()
            sink.bytes.append(contentsOf: UnsafeBufferPointer(start: data, count: Int(length)))
            return CAIRO_STATUS_SUCCESS
        }, Unmanaged.passUnretained(sink).toOpaque())
        try check(status, "encode PNG")
        return sink.bytes
    }

    /// The smallest size, from the origin, that shows everything drawn (at least 1 × 1).
    public static func extent(of drawing: Drawing) -> (width: Int, height: Int) {
        var maxX = 1.0, maxY = 1.0
        for stroke in drawing.strokes {
            let reach = stroke.width * PenProfile.maximumFactor / 2
            for point in stroke.points {
                maxX = max(maxX, point.x + reach)
                maxY = max(maxY, point.y + reach)
            }
        }
        for text in drawing.texts {
            let lines = text.text.split(separator: "\n", omittingEmptySubsequences: false)
            let longest = lines.map(\.count).max() ?? 0
            maxX = max(maxX, text.x + Double(longest) * text.fontSize * 0.7)
            maxY = max(maxY, text.y + Double(lines.count) * text.fontSize * 1.25)
        }
        return (Int(min(maxX.rounded(.up), 8192)), Int(min(maxY.rounded(.up), 8192)))
    }

    static func check(_ status: cairo_status_t, _ operation: String) throws(RenderError) {
        guard status == CAIRO_STATUS_SUCCESS else { throw RenderError(operation, status) }
    }

    /// Draws everything in the order it was made, in display points with y down.
    static func draw(_ drawing: Drawing, on context: OpaquePointer) {
        for stroke in drawing.strokes {
            switch stroke.tool {
            case .pen: drawPen(stroke, on: context)
            case .highlighter: drawHighlighter(stroke, on: context)
            }
        }
        for text in drawing.texts { drawText(text, on: context) }
    }

    private static func setColor(_ color: InkColor, on context: OpaquePointer) {
        cairo_set_source_rgb(context, Double(color.red) / 255, Double(color.green) / 255, Double(color.blue) / 255)
    }

    /// A pen stroke is its outline, filled with the winding rule (see `StrokeOutline`).
    private static func drawPen(_ stroke: Stroke, on context: OpaquePointer) {
        cairo_new_path(context)
        add(StrokeOutline.pen(stroke), to: context)
        setColor(stroke.color, on: context)
        cairo_set_fill_rule(context, CAIRO_FILL_RULE_WINDING)
        cairo_fill(context)
    }

    /// A highlighter multiplies its colour into what is below, so black text under it stays
    /// black. Its centre line is one stroke, painted once, so the parts of it that cross
    /// themselves do not darken twice.
    private static func drawHighlighter(_ stroke: Stroke, on context: OpaquePointer) {
        cairo_save(context)
        cairo_new_path(context)
        add(StrokeOutline.highlighter(stroke), to: context)
        cairo_set_line_width(context, stroke.width)
        cairo_set_line_cap(context, CAIRO_LINE_CAP_ROUND)
        cairo_set_line_join(context, CAIRO_LINE_JOIN_ROUND)
        setColor(stroke.color, on: context)
        cairo_set_operator(context, CAIRO_OPERATOR_MULTIPLY)
        cairo_stroke(context)
        cairo_restore(context)
    }

    /// Traces `path` on the Cairo context, as the current path.
    static func add(_ path: InkPath, to context: OpaquePointer) {
        for element in path.elements {
            switch element {
            case .move(let p): cairo_move_to(context, p.x, p.y)
            case .line(let p): cairo_line_to(context, p.x, p.y)
            case .curve(let c1, let c2, let p): cairo_curve_to(context, c1.x, c1.y, c2.x, c2.y, p.x, p.y)
            case .close: cairo_close_path(context)
            }
        }
    }

    /// Each line on its baseline as `TextLayout` places it. Metrics and outlines are not
    /// hinted, so glyphs land and advance the same on an image surface as in a PDF.
    static func drawText(_ text: TextAnnotation, on context: OpaquePointer) {
        cairo_save(context)
        cairo_select_font_face(context, fontFamily, CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL)
        cairo_set_font_size(context, text.fontSize)
        if let options = cairo_font_options_create() {
            cairo_font_options_set_hint_metrics(options, CAIRO_HINT_METRICS_OFF)
            cairo_font_options_set_hint_style(options, CAIRO_HINT_STYLE_NONE)
            cairo_set_font_options(context, options)
            cairo_font_options_destroy(options)
        }
        setColor(text.color, on: context)
        for (index, line) in TextLayout.lines(of: text).enumerated() {
            cairo_move_to(context, text.x, TextLayout.baseline(of: text, line: index))
            cairo_show_text(context, String(line))
        }
        cairo_restore(context)
    }
}

/// What Cairo writes to a stream, collected.
final class ByteSink {
    var bytes: [UInt8] = []
}
