public import CanvasCore
internal import CCairo

/// Ink as PDF, for flattening: strokes as our own content stream, texts as Cairo sets them.
extension InkRenderer {
    /// The two layers that put a drawing on a PDF page of `width` × `height` display points.
    public struct PDFLayers: Sendable {
        /// Content-stream operators for the strokes, in display points (origin top-left, y
        /// down), drawn first. A highlighter sets the graphics state `multiplyState`.
        public let strokes: [UInt8]
        /// A one-page PDF with the texts (Cairo embeds the font subset they need), drawn over
        /// the strokes; empty when there is no text.
        public let texts: [UInt8]

        /// Nothing to draw into the page's content (ink that goes into annotations instead).
        public static let none = PDFLayers(strokes: [], texts: [])
    }

    /// The name of the graphics state (`/BM /Multiply`) that highlighter strokes use.
    public static let multiplyState = "CanvasMultiply"

    /// The drawing as PDF: strokes written here as one outline each, texts set by Cairo.
    public static func pdfLayers(_ drawing: Drawing, width: Double, height: Double) throws(RenderError) -> PDFLayers {
        PDFLayers(strokes: strokeContent(drawing.strokes),
                  texts: drawing.texts.isEmpty ? [] : try textPDF(drawing.texts, width: width, height: height))
    }

    /// Every stroke in the order drawn: a pen as its filled outline (nonzero winding, so where
    /// it crosses itself it is filled once), a highlighter as its centre line stroked at its
    /// width with round ends, multiplied into the page below.
    static func strokeContent(_ strokes: [Stroke]) -> [UInt8] {
        var content = PDFContent()
        var fill: InkColor?
        for stroke in strokes {
            switch stroke.tool {
            case .pen:
                if fill != stroke.color {
                    content.color(stroke.color.red, stroke.color.green, stroke.color.blue, stroking: false)
                    fill = stroke.color
                }
                content.quantizedPath(StrokeOutline.pen(stroke))
                content.op("f Q")
            case .highlighter:
                content.op("q /\(multiplyState) gs")
                content.color(stroke.color.red, stroke.color.green, stroke.color.blue, stroking: true)
                content.number(stroke.width)
                content.op(" w 1 J 1 j")
                content.path(StrokeOutline.highlighter(stroke))
                content.op("S Q")
            }
        }
        return content.bytes
    }

    /// A one-page PDF, `width` × `height` points, with the texts in display points.
    static func textPDF(_ texts: [TextAnnotation], width: Double, height: Double) throws(RenderError) -> [UInt8] {
        try textPDF(pages: [texts], width: width, height: height)
    }

    /// A PDF of a page for each group of texts, each `width` × `height` points, the texts in
    /// display points: one font subset for all of them.
    static func textPDF(pages: [[TextAnnotation]], width: Double, height: Double) throws(RenderError) -> [UInt8] {
        let sink = ByteSink()
        let surface = cairo_pdf_surface_create_for_stream({ closure, data, length in
            let sink = Unmanaged<ByteSink>.fromOpaque(closure!).takeUnretainedValue()
            sink.bytes.append(contentsOf: UnsafeBufferPointer(start: data, count: Int(length)))
            return CAIRO_STATUS_SUCCESS
        }, Unmanaged.passUnretained(sink).toOpaque(), width, height)
        guard let surface else { throw RenderError("create PDF surface", CAIRO_STATUS_NO_MEMORY) }
        try check(cairo_surface_status(surface), "create \(width)×\(height) PDF surface")
        let context = cairo_create(surface)!
        for (index, texts) in pages.enumerated() {
            if index > 0 { cairo_show_page(context) }
            for text in texts { drawText(text, on: context) }
        }
        let drawn = cairo_status(context)
        cairo_destroy(context)
        cairo_surface_finish(surface)
        let finished = cairo_surface_status(surface)
        cairo_surface_destroy(surface)
        try check(drawn, "set the texts")
        try check(finished, "write the text overlay PDF")
        return sink.bytes
    }
}
