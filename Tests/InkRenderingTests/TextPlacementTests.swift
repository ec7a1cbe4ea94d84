import CanvasCore
import CCairo
import Foundation
@testable import InkRendering
import Testing

/// A text sits where spec §4 says: line n's baseline at y + (A + n × L) × fontSize. The PNG
/// result image and the flattened PDF are rendered and the ink boxes of a capital H (DejaVu
/// Sans: flat on the baseline, 1493/2048 em tall) compared with the rule and with each other.
@Suite("Text placement")
struct TextPlacementTests {
    static let capHeight = 1493.0 / 2048
    static let text = try! TextAnnotation(text: "H\nH", x: 20, y: 30, fontSize: 40, color: InkColor("black"))

    /// Rows (top, bottom edge) of each run of inked rows, top to bottom, in pixels = points.
    static func inkedRows(width: Int, height: Int, _ inked: (Int, Int) -> Bool) -> [(Int, Int)] {
        var runs: [(Int, Int)] = [], start: Int?
        for y in 0..<height {
            let any = (0..<width).contains { inked($0, y) }
            if any, start == nil { start = y }
            if !any, let s = start {
                runs.append((s, y))
                start = nil
            }
        }
        if let s = start { runs.append((s, height)) }
        return runs
    }

    /// Where the rule puts each line's H: from baseline − cap height to the baseline.
    static var expected: [(Double, Double)] {
        (0..<2).map { n in
            let baseline = TextLayout.baseline(of: text, line: n)
            return (baseline - capHeight * text.fontSize, baseline)
        }
    }

    @Test("the PNG result image puts each line on the spec's baseline")
    func png() throws {
        let bytes = try InkRenderer.png(Drawing(texts: [Self.text]), width: 120, height: 160)
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("text-\(UUID().uuidString).png")
        try Data(bytes).write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        let surface = cairo_image_surface_create_from_png(file.path)!
        defer { cairo_surface_destroy(surface) }
        let stride = Int(cairo_image_surface_get_stride(surface)), data = cairo_image_surface_get_data(surface)!
        // ARGB32, little-endian: alpha is the fourth byte of each pixel.
        let rows = Self.inkedRows(width: 120, height: 160) { x, y in data[y * stride + 4 * x + 3] > 127 }
        try Self.check(rows, "PNG")
    }

    @Test("the flattened PDF puts each line on the spec's baseline, as the PNG does")
    func pdf() throws {
        let layers = try InkRenderer.pdfLayers(Drawing(texts: [Self.text]), width: 120, height: 160)
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("text-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        try Data(layers.texts).write(to: folder.appendingPathComponent("text.pdf"))
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/pdftoppm")
        process.arguments = ["-r", "72", "-gray", "-singlefile", folder.appendingPathComponent("text.pdf").path, folder.appendingPathComponent("text").path]
        try process.run()
        process.waitUntilExit()
        #expect(process.terminationStatus == 0)
        let bytes = Array(try Data(contentsOf: folder.appendingPathComponent("text.pgm")))
        // "P5\n120 160\n255\n" then a byte per pixel.
        let header = Array("P5\n120 160\n255\n".utf8)
        #expect(Array(bytes.prefix(header.count)) == header)
        let rows = Self.inkedRows(width: 120, height: 160) { x, y in bytes[header.count + y * 120 + x] < 128 }
        try Self.check(rows, "PDF")
    }

    static func check(_ rows: [(Int, Int)], _ label: String) throws {
        try #require(rows.count == 2, "\(label): \(rows.count) lines of ink, expected 2: \(rows)")
        for (found, want) in zip(rows, expected) {
            // Within a pixel: the edge pixel of an anti-aliased glyph.
            #expect(abs(Double(found.0) - want.0) <= 1, "\(label): the H's top at \(found.0), the rule says \(want.0)")
            #expect(abs(Double(found.1) - want.1) <= 1, "\(label): the H's baseline at \(found.1), the rule says \(want.1)")
        }
    }
}
