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

/// Draws a `Drawing` with Cairo: into a PNG for `imageData`, or into a one-page PDF overlay.
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

    /// A one-page PDF, `width` × `height` points, with the drawing in display points (origin
    /// top-left, y down): the overlay that flattening places on a page.
    public static func pdf(_ drawing: Drawing, width: Double, height: Double) throws(RenderError) -> [UInt8] {
        let sink = ByteSink()
        let surface = cairo_pdf_surface_create_for_stream({ closure, data, length in
            let sink = Unmanaged<ByteSink>.fromOpaque(closure!).takeUnretainedValue()
            sink.bytes.append(contentsOf: UnsafeBufferPointer(start: data, count: Int(length)))
            return CAIRO_STATUS_SUCCESS
        }, Unmanaged.passUnretained(sink).toOpaque(), width, height)
        guard let surface else { throw RenderError("create PDF surface", CAIRO_STATUS_NO_MEMORY) }
        try check(cairo_surface_status(surface), "create \(width)×\(height) PDF surface")
        let context = cairo_create(surface)!
        draw(drawing, on: context)
        let drawn = cairo_status(context)
        cairo_destroy(context)
        cairo_surface_finish(surface)
        let finished = cairo_surface_status(surface)
        cairo_surface_destroy(surface)
        try check(drawn, "draw the ink")
        try check(finished, "write the overlay PDF")
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

    /// A pen stroke is a filled outline: discs along a smooth curve through the points, each as
    /// wide as the pressure there, joined by the quadrilaterals between neighbours. One path,
    /// filled with the winding rule, gives their union, so overlaps never show.
    private static func drawPen(_ stroke: Stroke, on context: OpaquePointer) {
        let samples = StrokeGeometry.smoothed(stroke)
        cairo_new_path(context)
        for (index, sample) in samples.enumerated() {
            cairo_new_sub_path(context)
            cairo_arc(context, sample.x, sample.y, sample.radius, 0, 2 * Double.pi)
            if index > 0, let quad = StrokeGeometry.bridge(samples[index - 1], sample) {
                cairo_move_to(context, quad[0].x, quad[0].y)
                for corner in quad.dropFirst() { cairo_line_to(context, corner.x, corner.y) }
                cairo_close_path(context)
            }
        }
        setColor(stroke.color, on: context)
        cairo_set_fill_rule(context, CAIRO_FILL_RULE_WINDING)
        cairo_fill(context)
    }

    /// A highlighter multiplies its colour into what is below, so black text under it stays
    /// black. It is drawn opaque into a group first and multiplied once, so the parts of one
    /// stroke that cross themselves do not darken twice.
    private static func drawHighlighter(_ stroke: Stroke, on context: OpaquePointer) {
        cairo_save(context)
        cairo_push_group(context)
        let samples = StrokeGeometry.smoothed(stroke, ignoringPressure: true)
        cairo_new_path(context)
        cairo_move_to(context, samples[0].x, samples[0].y)
        for sample in samples.dropFirst() { cairo_line_to(context, sample.x, sample.y) }
        if samples.count == 1 { cairo_close_path(context) }
        cairo_set_line_width(context, stroke.width)
        cairo_set_line_cap(context, CAIRO_LINE_CAP_ROUND)
        cairo_set_line_join(context, CAIRO_LINE_JOIN_ROUND)
        setColor(stroke.color, on: context)
        cairo_stroke(context)
        cairo_pop_group_to_source(context)
        cairo_set_operator(context, CAIRO_OPERATOR_MULTIPLY)
        cairo_paint(context)
        cairo_restore(context)
    }

    /// (x, y) is the top-left corner of the first line's box; lines follow at the font's height.
    private static func drawText(_ text: TextAnnotation, on context: OpaquePointer) {
        cairo_save(context)
        cairo_select_font_face(context, fontFamily, CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL)
        cairo_set_font_size(context, text.fontSize)
        var extents = cairo_font_extents_t()
        cairo_font_extents(context, &extents)
        setColor(text.color, on: context)
        for (index, line) in text.text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            cairo_move_to(context, text.x, text.y + extents.ascent + Double(index) * extents.height)
            cairo_show_text(context, String(line))
        }
        cairo_restore(context)
    }
}

private final class ByteSink {
    var bytes: [UInt8] = []
}
