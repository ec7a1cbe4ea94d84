public import CanvasCore
internal import CCairo

/// Why rendering failed: what was being done and Cairo's own status, or that its deadline
/// passed first (`pastDeadline`: the image is left out, not broken).
public struct RenderError: Error, Sendable, CustomStringConvertible {
    public let operation: String
    public let status: String
    public let pastDeadline: Bool
    public var description: String {
        pastDeadline ? "\(operation): stopped, past the render's deadline" : "\(operation): cairo says \(status)"
    }

    init(_ operation: String, _ status: cairo_status_t) {
        self.operation = operation
        self.status = String(cString: cairo_status_to_string(status))
        pastDeadline = false
    }

    init(pastDeadline operation: String) {
        self.operation = operation
        status = "deadline passed"
        pastDeadline = true
    }
}

/// Draws a `Drawing`: with Cairo into a PNG for `imageData`, or as the layers of PDF that
/// flattening puts on a page.
public enum InkRenderer {
    /// The font every text is set in; Debian's fonts-dejavu-core provides it.
    public static let fontFamily = "DejaVu Sans"

    /// A PNG of the drawing on a transparent background, `width` × `height` display points at
    /// one pixel per point; past `deadline` the work stops and it throws (`pastDeadline`).
    public static func png(_ drawing: Drawing, width: Int, height: Int, deadline: RenderDeadline = .none) throws(RenderError) -> [UInt8] {
        guard let surface = cairo_image_surface_create(CAIRO_FORMAT_ARGB32, Int32(width), Int32(height)) else {
            throw RenderError("create image surface", CAIRO_STATUS_NO_MEMORY)
        }
        defer { cairo_surface_destroy(surface) }
        try check(cairo_surface_status(surface), "create \(width)×\(height) image surface")
        let context = cairo_create(surface)!
        defer { cairo_destroy(context) }
        try draw(drawing, on: context, deadline: deadline)
        try check(cairo_status(context), "draw the ink")
        cairo_surface_flush(surface)

        // Encoding an 8192-pixel square takes about a second: libpng hands over its output a
        // piece at a time, and a write refused past the deadline ends the encoding there.
        let sink = ByteSink(deadline: deadline)
        let status = cairo_surface_write_to_png_stream(surface, { closure, data, length in
            let sink = Unmanaged<ByteSink>.fromOpaque(closure!).takeUnretainedValue()
            if sink.deadline.passed {
                sink.pastDeadline = true
                return CAIRO_STATUS_WRITE_ERROR
            }
            sink.bytes.append(contentsOf: UnsafeBufferPointer(start: data, count: Int(length)))
            return CAIRO_STATUS_SUCCESS
        }, Unmanaged.passUnretained(sink).toOpaque())
        if sink.pastDeadline { throw RenderError(pastDeadline: "encode the \(width)×\(height) PNG") }
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

    /// Draws everything in the order it was made, in display points with y down. Cairo's own
    /// fill of one stroke cannot be stopped: the deadline is checked before each, and along
    /// the making of its outline.
    static func draw(_ drawing: Drawing, on context: OpaquePointer, deadline: RenderDeadline) throws(RenderError) {
        let count = drawing.strokes.count
        for (index, stroke) in drawing.strokes.enumerated() {
            try deadline.check("draw stroke \(index + 1) of \(count)")
            switch stroke.tool {
            case .pen: try drawPen(stroke, on: context, deadline: deadline)
            case .highlighter: try drawHighlighter(stroke, on: context, deadline: deadline)
            }
        }
        for text in drawing.texts {
            try deadline.check("draw the texts")
            drawText(text, on: context)
        }
    }

    private static func setColor(_ color: InkColor, on context: OpaquePointer) {
        cairo_set_source_rgb(context, Double(color.red) / 255, Double(color.green) / 255, Double(color.blue) / 255)
    }

    /// A pen stroke is its outline, filled with the winding rule (see `StrokeOutline`).
    private static func drawPen(_ stroke: Stroke, on context: OpaquePointer, deadline: RenderDeadline) throws(RenderError) {
        let outline = try StrokeOutline.pen(stroke, deadline: deadline)
        setColor(stroke.color, on: context)
        cairo_set_fill_rule(context, CAIRO_FILL_RULE_WINDING)
        try paint(outline, reach: 0, on: context, deadline: deadline) { cairo_fill($0) }
    }

    /// A highlighter multiplies its colour into what is below, so black text under it stays
    /// black. Its centre line is one stroke, painted once, so the parts of it that cross
    /// themselves do not darken twice.
    private static func drawHighlighter(_ stroke: Stroke, on context: OpaquePointer, deadline: RenderDeadline) throws(RenderError) {
        let line = try StrokeOutline.highlighter(stroke, deadline: deadline)
        cairo_save(context)
        defer { cairo_restore(context) }
        cairo_set_line_width(context, stroke.width)
        cairo_set_line_cap(context, CAIRO_LINE_CAP_ROUND)
        cairo_set_line_join(context, CAIRO_LINE_JOIN_ROUND)
        setColor(stroke.color, on: context)
        cairo_set_operator(context, CAIRO_OPERATOR_MULTIPLY)
        try paint(line, reach: stroke.width, on: context, deadline: deadline) { cairo_stroke($0) }
    }

    /// Paths of more elements than this may be painted in bands.
    static let bandedElements = 1_000

    /// Paints `path` with `operation` (a fill or a stroke, in the context's current state).
    /// One Cairo fill of a long stroke whose points lie far apart (lines across the page) can
    /// take many seconds, and cannot be stopped: with a deadline, a path that large is
    /// painted in bands of whole pixel rows, each clipped to its rows, the deadline checked
    /// before each. A clip on pixel boundaries leaves each pixel's coverage as it was, and
    /// each pixel is painted once, so the image is the same. `reach`: how far the paint goes
    /// past the path's points (half a stroke's width, and its caps).
    static func paint(_ path: InkPath, reach: Double, on context: OpaquePointer, deadline: RenderDeadline,
                      _ operation: (OpaquePointer) -> Void) throws(RenderError) {
        let target = cairo_get_target(context)
        let width = Double(cairo_image_surface_get_width(target)), height = Double(cairo_image_surface_get_height(target))
        var top = Double.infinity, bottom = -Double.infinity
        for element in path.elements {
            switch element {
            case .move(let p), .line(let p): top = min(top, p.y); bottom = max(bottom, p.y)
            case .curve(let c1, let c2, let p): top = min(top, c1.y, c2.y, p.y); bottom = max(bottom, c1.y, c2.y, p.y)
            case .close: break
            }
        }
        top = max(0, (top - reach - 1).rounded(.down))
        bottom = min(height, (bottom + reach + 1).rounded(.up))
        // Each band costs a pass over the whole path as well as its rows: fewer of them the
        // shorter the path.
        let rows = max(32, (4_000_000 / Double(max(path.elements.count, 1))).rounded(.up))
        guard deadline.instant != nil, path.elements.count > bandedElements, bottom - top > rows else {
            cairo_new_path(context)
            add(path, to: context)
            operation(context)
            return
        }
        var y = top
        while y < bottom {
            try deadline.check("paint rows \(Int(y)) to \(Int(min(y + rows, bottom))) of a path of \(path.elements.count) elements")
            cairo_save(context)
            cairo_new_path(context)
            cairo_rectangle(context, -1, y, width + 2, min(rows, bottom - y))
            cairo_clip(context)
            add(path, to: context)
            operation(context)
            cairo_restore(context)
            y += rows
        }
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

/// What Cairo writes to a stream, collected until the deadline passes.
final class ByteSink {
    var bytes: [UInt8] = []
    let deadline: RenderDeadline
    var pastDeadline = false

    init(deadline: RenderDeadline = .none) {
        self.deadline = deadline
    }
}
