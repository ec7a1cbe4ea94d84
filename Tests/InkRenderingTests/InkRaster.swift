import CanvasCore
import CCairo
import Foundation
@testable import InkRendering

/// Ink as pixels, and how far each inked pixel is from the line the stroke's points describe.
/// The distances are computed here from the points alone, not with the renderer's envelope.
struct InkRaster {
    /// Pixels per point: 288 dpi.
    static let scale = 4.0

    let width: Int
    let height: Int
    /// Display point at the top-left corner of pixel (0, 0).
    let originX: Double
    let originY: Double
    /// Coverage, 0 (none) to 255 (full).
    let coverage: [UInt8]

    subscript(x: Int, y: Int) -> Int { Int(coverage[y * width + x]) }

    /// The area around `strokes` that their ink can reach, with a margin of 4 pt.
    static func bounds(_ strokes: [Stroke]) -> (x: Double, y: Double, width: Int, height: Int) {
        var minX = Double.infinity, minY = Double.infinity, maxX = -Double.infinity, maxY = -Double.infinity
        for stroke in strokes {
            let reach = stroke.width * PenProfile.maximumFactor / 2 + 4
            for p in stroke.points {
                minX = min(minX, p.x - reach)
                minY = min(minY, p.y - reach)
                maxX = max(maxX, p.x + reach)
                maxY = max(maxY, p.y + reach)
            }
        }
        let x = (minX * scale).rounded(.down) / scale, y = (minY * scale).rounded(.down) / scale
        return (x, y, Int(((maxX - x) * scale).rounded(.up)), Int(((maxY - y) * scale).rounded(.up)))
    }

    /// The strokes drawn by Cairo as the renderer's paths (what the PNG shows, and the same
    /// outlines the PDF gets), anti-aliased.
    static func cairo(_ strokes: [Stroke]) -> InkRaster {
        let box = bounds(strokes)
        let surface = cairo_image_surface_create(CAIRO_FORMAT_A8, Int32(box.width), Int32(box.height))!
        defer { cairo_surface_destroy(surface) }
        let context = cairo_create(surface)!
        cairo_scale(context, scale, scale)
        cairo_translate(context, -box.x, -box.y)
        for stroke in strokes {
            cairo_new_path(context)
            switch stroke.tool {
            case .pen:
                InkRenderer.add(StrokeOutline.pen(stroke), to: context)
                cairo_set_fill_rule(context, CAIRO_FILL_RULE_WINDING)
                cairo_fill(context)
            case .highlighter:
                InkRenderer.add(StrokeOutline.highlighter(stroke), to: context)
                cairo_set_line_width(context, stroke.width)
                cairo_set_line_cap(context, CAIRO_LINE_CAP_ROUND)
                cairo_set_line_join(context, CAIRO_LINE_JOIN_ROUND)
                cairo_stroke(context)
            }
        }
        cairo_destroy(context)
        cairo_surface_flush(surface)
        let stride = Int(cairo_image_surface_get_stride(surface))
        let data = cairo_image_surface_get_data(surface)!
        var coverage = [UInt8](repeating: 0, count: box.width * box.height)
        for y in 0..<box.height {
            for x in 0..<box.width { coverage[y * box.width + x] = data[y * stride + x] }
        }
        return InkRaster(width: box.width, height: box.height, originX: box.x, originY: box.y, coverage: coverage)
    }

    /// The strokes flattened as the PDF layer the flattener puts on a page, rendered by
    /// poppler's pdftoppm at 288 dpi, in grey: coverage is how much darker than white a
    /// pixel is.
    static func pdf(_ strokes: [Stroke]) throws -> InkRaster {
        let box = bounds(strokes)
        let pageWidth = Double(box.width) / scale, pageHeight = Double(box.height) / scale
        let layers = try InkRenderer.pdfLayers(Drawing(strokes: strokes), width: pageWidth, height: pageHeight)
        // Display points of the box to PDF space: y down, origin at the box's corner.
        let content = Array("1 0 0 -1 \(-box.x) \(pageHeight + box.y) cm\n".utf8) + layers.strokes
        var pdf = Array("%PDF-1.7\n".utf8)
        var offsets: [Int] = []
        func object(_ body: [UInt8]) {
            offsets.append(pdf.count)
            pdf += Array("\(offsets.count) 0 obj\n".utf8) + body + Array("\nendobj\n".utf8)
        }
        object(Array("<< /Type /Catalog /Pages 2 0 R >>".utf8))
        object(Array("<< /Type /Pages /Kids [3 0 R] /Count 1 >>".utf8))
        object(Array(("<< /Type /Page /Parent 2 0 R /MediaBox [0 0 \(pageWidth) \(pageHeight)] /Contents 4 0 R "
                      + "/Resources << /ExtGState << /\(InkRenderer.multiplyState) << /BM /Multiply >> >> >> >>").utf8))
        object(Array("<< /Length \(content.count) >>\nstream\n".utf8) + content + Array("\nendstream".utf8))
        let xref = pdf.count
        pdf += Array("xref\n0 \(offsets.count + 1)\n0000000000 65535 f \n".utf8)
        for offset in offsets { pdf += Array(String(format: "%010d 00000 n \n", offset).utf8) }
        pdf += Array("trailer\n<< /Size \(offsets.count + 1) /Root 1 0 R >>\nstartxref\n\(xref)\n%%EOF\n".utf8)

        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("ink-raster-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let input = folder.appendingPathComponent("ink.pdf")
        try Data(pdf).write(to: input)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/pdftoppm")
        process.arguments = ["-r", "288", "-gray", "-singlefile", input.path, folder.appendingPathComponent("ink").path]
        try process.run()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else { throw RenderFailure(message: "pdftoppm exited \(process.terminationStatus)") }
        let bytes = Array(try Data(contentsOf: folder.appendingPathComponent("ink.pgm")))
        // P5 <width> <height> 255, one whitespace, then a byte per pixel.
        var fields: [String] = [], index = 0
        while fields.count < 4 {
            while bytes[index] == 0x20 || bytes[index] == 0x0A { index += 1 }
            var field = ""
            while bytes[index] != 0x20 && bytes[index] != 0x0A {
                field.append(Character(UnicodeScalar(bytes[index])))
                index += 1
            }
            fields.append(field)
        }
        guard fields[0] == "P5", let width = Int(fields[1]), let height = Int(fields[2]) else { throw RenderFailure(message: "not a PGM") }
        let grey = bytes[(index + 1)...]
        return InkRaster(width: width, height: height, originX: box.x, originY: box.y, coverage: grey.map { 255 - $0 })
    }

    struct RenderFailure: Error { let message: String }

    /// Where the centre of pixel (x, y) is, in display points.
    func point(_ x: Int, _ y: Int) -> (Double, Double) {
        (originX + (Double(x) + 0.5) / Self.scale, originY + (Double(y) + 0.5) / Self.scale)
    }
}

/// The envelope of a stroke as the spec words it, computed from its points alone: a disc of
/// radius `reach` around each point (the pressure's radius plus 0.5 pt, at most 0.85 × width;
/// a highlighter reaches half its width plus 0.35 × width, at most 0.5 pt more), and the
/// discs of the radii between, along each segment.
struct SpecEnvelope {
    let points: [(x: Double, y: Double, reach: Double)]
    let widest: Double
    /// Segment indices by 4 pt cell, so a pixel looks only at the segments near it.
    private var cells: [Int64: [Int]] = [:]
    private static let cell = 4.0

    init(_ stroke: Stroke) {
        let w = stroke.width
        points = stroke.points.map { p in
            let reach: Double
            switch stroke.tool {
            case .pen: reach = min(0.85 * w, w * PenProfile.factor(pressure: p.pressure) / 2 + 0.5)
            case .highlighter: reach = w / 2 + min(0.35 * w, 0.5)
            }
            return (p.x, p.y, reach)
        }
        widest = 0.85 * w
        for k in 0..<max(points.count - 1, 1) {
            let a = points[k], b = points[min(k + 1, points.count - 1)]
            // Far enough for the slack the tests allow, and for 0.85 × width.
            let reach = max(a.reach, b.reach, widest) + 2
            for gx in Self.index(min(a.x, b.x) - reach)...Self.index(max(a.x, b.x) + reach) {
                for gy in Self.index(min(a.y, b.y) - reach)...Self.index(max(a.y, b.y) + reach) {
                    cells[gx &* 1_000_003 &+ gy, default: []].append(k)
                }
            }
        }
    }

    private static func index(_ v: Double) -> Int64 { Int64((v / cell).rounded(.down)) }

    /// How far (x, y) is outside the envelope (0 when inside), and how far it is from the
    /// polyline beyond 0.85 × width (the measure; 0 when inside the envelope, which
    /// never reaches past it); infinity when no segment is near.
    func excess(_ x: Double, _ y: Double) -> (envelope: Double, widest: Double) {
        var envelope = Double.infinity, nearest = Double.infinity
        let near = cells[Self.index(x) &* 1_000_003 &+ Self.index(y)] ?? []
        // First the cheap test against every segment near (inside the disc at the nearest
        // point), which settles most inked pixels; the search below only for the rest. A stroke
        // of hundreds of points in one cell made every pixel search every segment: minutes.
        for k in near {
            let a = points[k], b = points[min(k + 1, points.count - 1)]
            let dx = b.x - a.x, dy = b.y - a.y, length2 = dx * dx + dy * dy
            let t = length2 > 0 ? min(max(((x - a.x) * dx + (y - a.y) * dy) / length2, 0), 1) : 0
            let qx = a.x + t * dx - x, qy = a.y + t * dy - y
            if (qx * qx + qy * qy).squareRoot() <= a.reach + (b.reach - a.reach) * t { return (0, 0) }
        }
        for k in near {
            let a = points[k], b = points[min(k + 1, points.count - 1)]
            let dx = b.x - a.x, dy = b.y - a.y, length2 = dx * dx + dy * dy
            func distance(_ t: Double) -> Double {
                let qx = a.x + t * dx - x, qy = a.y + t * dy - y
                return (qx * qx + qy * qy).squareRoot()
            }
            let t0 = length2 > 0 ? min(max(((x - a.x) * dx + (y - a.y) * dy) / length2, 0), 1) : 0
            let d0 = distance(t0)
            // Inside the disc at the nearest point: inside, no need to look further.
            if d0 <= a.reach + (b.reach - a.reach) * t0 { return (0, 0) }
            nearest = min(nearest, d0)
            // Outside the disc at t, minimized over t: convex in t, so a ternary search finds it.
            func outside(_ t: Double) -> Double { distance(t) - (a.reach + (b.reach - a.reach) * t) }
            var low = 0.0, high = 1.0
            for _ in 0..<60 {
                let m1 = low + (high - low) / 3, m2 = high - (high - low) / 3
                if outside(m1) <= outside(m2) { high = m2 } else { low = m1 }
            }
            envelope = min(envelope, outside(0), outside(1), outside((low + high) / 2))
            if envelope <= 0 { return (0, 0) }
        }
        return (envelope, nearest - widest)
    }
}

extension InkRaster {
    /// The inked pixels (any coverage) past the envelope by more than `slack` points, the
    /// worst excess over the envelope, and the worst over 0.85 × width, of `stroke`.
    /// `widestPixels` counts those past 0.85 × width + `slack` from the polyline: the issue's
    /// own measure, which ignores pressure.
    func beyond(_ stroke: Stroke, slack: Double = 0.5) -> (pixels: Int, envelope: Double, widest: Double, widestPixels: Int) {
        let envelope = SpecEnvelope(stroke)
        var pixels = 0, widestPixels = 0, worst = -Double.infinity, worstWidest = -Double.infinity
        for y in 0..<height {
            for x in 0..<width where self[x, y] > 0 {
                let (px, py) = point(x, y)
                let excess = envelope.excess(px, py)
                worst = max(worst, excess.envelope)
                worstWidest = max(worstWidest, excess.widest)
                if excess.envelope > slack { pixels += 1 }
                if excess.widest > slack { widestPixels += 1 }
            }
        }
        return (pixels, worst, worstWidest, widestPixels)
    }

    /// Input points with no ink within a pixel of them: ink missing where the pen was.
    ///
    /// A point whose own ink is narrower than a pixel (a 0.3 pt pen at pressure 0.05 inks a dot
    /// 0.03 pt across) can fall between pixel centres and leave no pixel inked enough to count
    /// at this resolution: such points are not counted. A generated one-point stroke found it.
    func uncovered(_ stroke: Stroke) -> Int {
        stroke.points.filter { p in
            let radius = stroke.tool == .pen ? StrokeGeometry.radius(p, of: stroke) : stroke.width / 2
            guard radius * Self.scale >= 0.5 else { return false }
            let cx = Int(((p.x - originX) * Self.scale).rounded(.down)), cy = Int(((p.y - originY) * Self.scale).rounded(.down))
            for y in max(cy - 1, 0)...min(cy + 1, height - 1) {
                for x in max(cx - 1, 0)...min(cx + 1, width - 1) where self[x, y] > 40 { return false }
            }
            return true
        }.count
    }

    /// The area inked, in square points (coverage counted as a fraction of a pixel).
    var area: Double { Double(coverage.reduce(0) { $0 + Int($1) }) / 255 / (Self.scale * Self.scale) }
}
