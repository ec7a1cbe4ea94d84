import CanvasCore
import DocumentStore
import Foundation
import InkRendering
import TestSupport
import Testing

/// The handwriting page looks as it always did. The fixture is a 72 dpi grey render of the
/// page as the renderer before outlines drew it (a disc and a bridge per sample, unrounded
/// coordinates); record it again with CANVAS_RECORD_INK_FIXTURE=1 only on purpose.
@Suite("Ink look")
struct InkLookTests {
    static let fixture = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("Fixtures/handwriting-page-72dpi.pgm.gz")

    /// The handwriting page flattened into page 2 of a 3-page text document.
    static func flattenedHandwriting(_ drawing: Drawing = Handwriting.page(), form: InkForm = .paper) throws -> (url: URL, before: Int, after: Int) {
        let folder = try freshFolder("handwriting")
        let url = folder.appendingPathComponent("notes.pdf")
        let original = Handwriting.document()
        try Data(original).write(to: url)
        _ = try DocumentStore(folder: folder).flatten("notes.pdf", page: 1, drawing: drawing, form: form)
        let after = try FileManager.default.attributesOfItem(atPath: url.path)[.size] as? Int ?? 0
        return (url, original.count, after)
    }

    @Test("the handwriting page differs from the old renderer's only along ink edges")
    func looksAsBefore() throws {
        let page = try Self.flattenedHandwriting()
        let now = try GrayRaster.render(page.url.path, page: 1, dpi: 72)
        if ProcessInfo.processInfo.environment["CANVAS_RECORD_INK_FIXTURE"] != nil {
            try FileManager.default.createDirectory(at: Self.fixture.deletingLastPathComponent(), withIntermediateDirectories: true)
            try now.save(gzipped: Self.fixture)
        }
        let then = try GrayRaster.load(gzipped: Self.fixture)
        let comparison = EdgeComparison(then, now)
        // Edges may move by the curve fit's tolerance and the 0.01 pt rounding (together under
        // 0.1 pt, a tenth of a pixel here), which changes an anti-aliased edge pixel by a few
        // of poppler's coverage steps; nothing away from an edge may change at all.
        #expect(comparison.awayFromEdges == 0, "\(comparison.awayFromEdges) pixels changed away from any ink edge")
        #expect(comparison.differing <= comparison.edgePixels / 4,
                "\(comparison.differing) pixels differ, for \(comparison.edgePixels) edge pixels")
        // The ink as a whole is as heavy as before: no stroke got wider or thinner.
        #expect(abs(comparison.inkNow - comparison.inkThen) <= 0.02 * comparison.inkThen,
                "ink coverage went from \(comparison.inkThen) to \(comparison.inkNow)")
    }
}

/// Where two grey renders of the same page differ, relative to the ink's edges.
struct EdgeComparison {
    /// How many grey levels a pixel may move without counting as changed.
    static let tolerance = 24
    /// A pixel is on an edge when the 3 × 3 square around it spans more than this, in either render.
    static let edgeContrast = 32

    var differing = 0
    var awayFromEdges = 0
    var edgePixels = 0
    var inkThen = 0.0
    var inkNow = 0.0

    init(_ then: GrayRaster, _ now: GrayRaster) {
        precondition(then.width == now.width && then.height == now.height, "renders of different sizes")
        func isEdge(_ raster: GrayRaster, _ x: Int, _ y: Int) -> Bool {
            var low = 255, high = 0
            for dy in -1...1 {
                for dx in -1...1 {
                    let nx = min(max(x + dx, 0), raster.width - 1), ny = min(max(y + dy, 0), raster.height - 1)
                    low = min(low, raster[nx, ny])
                    high = max(high, raster[nx, ny])
                }
            }
            return high - low > Self.edgeContrast
        }
        for y in 0..<then.height {
            for x in 0..<then.width {
                inkThen += Double(255 - then[x, y])
                inkNow += Double(255 - now[x, y])
                let edge = isEdge(then, x, y) || isEdge(now, x, y)
                if edge { edgePixels += 1 }
                guard abs(then[x, y] - now[x, y]) > Self.tolerance else { continue }
                differing += 1
                if !edge { awayFromEdges += 1 }
            }
        }
    }
}

@Suite("Ink size")
struct InkSizeTests {
    /// Measured on the page as a stylus reports it (each sample ±0.4 pt of noise), which costs
    /// more than the smooth page: an outline that followed the noise would be twice the size.
    /// Its numbers are put on the ink's grid (0.01 pt, 0.001 of pressure) first, as a client
    /// sends them (the web client does); a number off the grid is stored whole, 8 bytes.
    @Test("a page of jittery handwriting costs at most 24 bytes per input point with its source, the ink alone at most 12.6")
    func handwritingPage() throws {
        let page = try InkLookTests.flattenedHandwriting(InkPrecision.rounded(Handwriting.jitteryPage()))
        let increment = Array(try Data(contentsOf: page.url))[page.before...]
        let source = InkBytes.storedSource(in: Array(increment))
        let points = Double(Handwriting.inputPoints)
        print("handwriting page: \(increment.count) bytes appended, \(source) of them the stored source; "
              + "\(Double(increment.count) / points) bytes per input point, the ink alone \(Double(increment.count - source) / points)")
        #expect(source > 0, "no stored source found")
        #expect(Double(increment.count) / points <= 24)
        #expect(Double(increment.count - source) / points <= 12.6)
    }

    /// The recorded UNIPEN words (Tests/Fixtures/strokes, CC BY 4.0; recorded at the ink's grid)
    /// set on a page with generated highlighters and notes, put on the grid as a client sends
    /// them: the source at most 6 bytes a point after the PDF's deflate, the whole page's ink
    /// at most 12.6, what Xournal++'s own file costs for the same page.
    @Test("a page of recorded handwriting costs at most 12.6 bytes per input point in all, its source at most 6")
    func recordedPage() throws {
        let drawing = InkPrecision.rounded(try RecordedHandwriting.page())
        let page = try InkLookTests.flattenedHandwriting(drawing)
        let increment = Array(try Data(contentsOf: page.url))[page.before...]
        let source = InkBytes.storedSource(in: Array(increment))
        let points = Double(drawing.pointCount)
        print("recorded page: \(drawing.pointCount) points, \(increment.count) bytes appended, \(source) of them the stored source; "
              + "\(Double(increment.count) / points) bytes per point, the source \(Double(source) / points)")
        #expect(source > 0, "no stored source found")
        #expect(Double(source) / points <= 6)
        #expect(Double(increment.count) / points <= 12.6)
        #expect(try Flattener.storedDrawing(PDFLocation(path: page.url.path), page: 1) == drawing)
    }

    /// The recorded words saved as standard annotations (5.3): on top of what paper costs, each
    /// annotation's /InkList (the centre lines as numbers, which other tools edit) and its own
    /// appearance and stored drawing, which leaves out the positions the /InkList gives back
    /// (InkSource, version 3). Packed into object streams, a page written with one pen (one
    /// annotation, as Xournal++ pages mostly are) costs paper's bytes and about 3.3 a point more;
    /// the recorded page, 24 words of as many widths plus highlighters and texts, about 3.9 more:
    /// 9 annotations, a run of one tool and colour being one whatever its widths. With each
    /// drawing's positions stored as well, 4.8 and 5.6 more; split by width as well (30
    /// annotations), 7.9 more; plain objects, each text with a font of its own, 13.6 and 21.7.
    @Test("saved as annotations, recorded words cost paper's bytes and at most 4.5 a point more",
          arguments: [("one pen", 4.5), ("recorded page", 4.5)])
    func recordedPageAsAnnotations(_ label: String, _ margin: Double) throws {
        let recorded = InkPrecision.rounded(try RecordedHandwriting.page())
        let drawing = label == "one pen"
            ? Drawing(strokes: try recorded.strokes.filter { $0.tool == .pen }.map { try Stroke(tool: .pen, color: InkColor("black"), width: 2, points: $0.points) })
            : recorded
        let points = Double(drawing.pointCount)
        let paper = try InkLookTests.flattenedHandwriting(drawing, form: .paper)
        let annotated = try InkLookTests.flattenedHandwriting(drawing, form: .annotations)
        let paperCost = Double(paper.after - paper.before) / points, annotationCost = Double(annotated.after - annotated.before) / points
        print("\(label), \(drawing.pointCount) points: paper \(paperCost) bytes a point, annotations \(annotationCost)")
        #expect(annotationCost <= paperCost + margin)
        #expect(try run("/usr/bin/qpdf", ["--check", annotated.url.path]).status == 0)
        #expect(try Flattener.storedDrawing(PDFLocation(path: annotated.url.path), page: 1) == drawing)
    }
}
