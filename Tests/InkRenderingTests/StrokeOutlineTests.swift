import CanvasCore
import CCairo
import Foundation
@testable import InkRendering
import TestSupport
import Testing

/// The outline covers what the old renderer covered: the union of a disc at every sample of
/// the smoothed centre line and the quadrilateral between each two. Both are rasterized by
/// Cairo at 8 pixels per point and compared: they may differ only within a pixel or two of the
/// edge (the curve fit's tolerance is 0.08 pt, 0.64 px here), never by a hole or a blob.
@Suite("Stroke outline")
struct StrokeOutlineTests {
    static let scale = 8.0

    /// The ink of `draw` as a mask: true where a pixel is more than half covered.
    static func mask(width: Int, height: Int, origin: (Double, Double), _ draw: (OpaquePointer) -> Void) -> [Bool] {
        let surface = cairo_image_surface_create(CAIRO_FORMAT_A8, Int32(width), Int32(height))!
        defer { cairo_surface_destroy(surface) }
        let context = cairo_create(surface)!
        cairo_scale(context, scale, scale)
        cairo_translate(context, -origin.0, -origin.1)
        cairo_set_fill_rule(context, CAIRO_FILL_RULE_WINDING)
        draw(context)
        cairo_fill(context)
        cairo_destroy(context)
        cairo_surface_flush(surface)
        let stride = Int(cairo_image_surface_get_stride(surface))
        let data = cairo_image_surface_get_data(surface)!
        var out = [Bool](repeating: false, count: width * height)
        for y in 0..<height {
            for x in 0..<width { out[y * width + x] = data[y * stride + x] > 127 }
        }
        return out
    }

    /// The old renderer's shape: discs and bridges, all wound the same way.
    static func discUnion(_ samples: [StrokeGeometry.Sample], on context: OpaquePointer) {
        for (index, sample) in samples.enumerated() {
            cairo_new_sub_path(context)
            cairo_arc(context, sample.x, sample.y, sample.radius, 0, 2 * Double.pi)
            guard index > 0 else { continue }
            let a = samples[index - 1], b = sample
            let dx = b.x - a.x, dy = b.y - a.y, length = (dx * dx + dy * dy).squareRoot()
            guard length > 1e-9 else { continue }
            let nx = -dy / length, ny = dx / length
            var quad = [(a.x + nx * a.radius, a.y + ny * a.radius), (b.x + nx * b.radius, b.y + ny * b.radius),
                        (b.x - nx * b.radius, b.y - ny * b.radius), (a.x - nx * a.radius, a.y - ny * a.radius)]
            var area = 0.0
            for k in quad.indices { area += quad[k].0 * quad[(k + 1) % 4].1 - quad[(k + 1) % 4].0 * quad[k].1 }
            if area < 0 { quad.reverse() }
            cairo_move_to(context, quad[0].0, quad[0].1)
            for corner in quad.dropFirst() { cairo_line_to(context, corner.0, corner.1) }
            cairo_close_path(context)
        }
    }


    /// Compares the two shapes of `stroke`; returns the changed pixels farther than `reach`
    /// pixels from any edge of either shape, and how many changed in all.
    static func compare(_ stroke: Stroke, reach: Int = 2) -> (away: Int, changed: Int, inked: Int) {
        let samples = StrokeGeometry.smoothed(stroke)
        let minX = samples.map { $0.x - $0.radius }.min()! - 2, minY = samples.map { $0.y - $0.radius }.min()! - 2
        let maxX = samples.map { $0.x + $0.radius }.max()! + 2, maxY = samples.map { $0.y + $0.radius }.max()! + 2
        let width = Int((maxX - minX) * scale), height = Int((maxY - minY) * scale)
        let old = mask(width: width, height: height, origin: (minX, minY)) { discUnion(samples, on: $0) }
        let new = mask(width: width, height: height, origin: (minX, minY)) { InkRenderer.add(StrokeOutline.pen(stroke), to: $0) }
        func edge(_ m: [Bool], _ x: Int, _ y: Int) -> Bool {
            for dy in -reach...reach {
                for dx in -reach...reach {
                    let nx = min(max(x + dx, 0), width - 1), ny = min(max(y + dy, 0), height - 1)
                    if m[ny * width + nx] != m[y * width + x] { return true }
                }
            }
            return false
        }
        var away = 0, changed = 0
        for y in 0..<height {
            for x in 0..<width where old[y * width + x] != new[y * width + x] {
                changed += 1
                if !edge(old, x, y) && !edge(new, x, y) { away += 1 }
            }
        }
        return (away, changed, old.filter { $0 }.count)
    }

    @Test("every pen stroke of the handwriting page covers what the discs covered, up to its edges")
    func handwriting() throws {
        for (index, stroke) in Handwriting.page().strokes.enumerated() where stroke.tool == .pen {
            let result = Self.compare(stroke)
            #expect(result.away == 0, "stroke \(index): \(result.away) pixels differ away from the edges")
            #expect(Double(result.changed) <= 0.08 * Double(result.inked), "stroke \(index): \(result)")
        }
    }

    @Test("cusps, hairpins, tight loops, a dot, pressure jumps and a scribble have no holes and no blobs")
    func hardShapes() throws {
        func stroke(_ points: [(Double, Double, Double?)], width: Double) throws -> Stroke {
            try Stroke(tool: .pen, color: InkColor("black"), width: width, points: points.map { try InkPoint(x: $0.0, y: $0.1, pressure: $0.2) })
        }
        let loop = (0..<40).map { k -> (Double, Double, Double?) in
            let a = Double(k) * 0.5
            return (20 + Double(k) * 0.3 + 2 * cos(a), 20 + 2 * sin(a), 0.9)
        }
        let shapes = [
            try stroke([(10, 10, 0.5)], width: 6),                                          // a dot
            try stroke([(10, 10, 0.2), (30, 10, 0.8), (10, 11, 0.5)], width: 4),             // a hairpin
            try stroke([(10, 10, nil), (20, 30, nil), (30, 10, nil), (40, 30, nil)], width: 3),  // zigzag cusps
            try stroke(loop, width: 5),                                                     // loops tighter than the ink
            try stroke([(10, 10, 0), (12, 10, 1), (14, 10, 0), (16, 10, 1)], width: 8),     // pressure jumps
            try stroke([(10, 10, 0.5), (10, 10, 0.5), (10.001, 10, 0.5), (25, 12, 0.5)], width: 3),  // repeated points
        ]
        // A scribble: a random walk in steps smaller than the ink is wide, pressure wandering.
        var seed: UInt64 = 7
        func next() -> Double {
            seed = seed &* 6364136223846793005 &+ 1442695040888963407
            return Double(seed >> 11) / Double(1 << 53)
        }
        var walk: [(Double, Double, Double?)] = []
        var x = 40.0, y = 40.0, heading = 0.0, pressure = 0.5
        for _ in 0..<600 {
            heading += (next() - 0.5) * 2.5
            x += 0.8 * cos(heading)
            y += 0.8 * sin(heading)
            pressure = min(1, max(0, pressure + (next() - 0.5) * 0.2))
            walk.append((x, y, pressure))
        }
        let scribble = try stroke(walk, width: 5)
        for (index, shape) in (shapes + [scribble]).enumerated() {
            let result = Self.compare(shape)
            // The scribble folds at almost every sample; where two folds meet, a sliver of a few
            // pixels here (a few hundredths of a point square) may stay.
            #expect(result.away <= (shape == scribble ? 4 : 0), "shape \(index): \(result.away) pixels differ away from the edges")
        }
    }
}
