import CanvasCore
import DocumentStore
import Foundation
import PDFSurgery
import TestSupport
import Testing

/// Ink lands where it was drawn: dots drawn at known display points are found, after
/// flattening, at those points of a 72 dpi render of the visible box, and nothing else moves.
@Suite("Placement")
struct PlacementTests {
    static let folder: URL = {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("placement-\(UUID().uuidString)")
        try! FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }()

    /// Red dots, 6 points across, at fractions of the page's display size.
    static func dots(width: Double, height: Double) throws -> (Drawing, [(Double, Double)]) {
        let spots = [(0.2, 0.15), (0.8, 0.22), (0.3, 0.85), (0.55, 0.5)].map { ($0.0 * width, $0.1 * height) }
        let strokes = try spots.map { spot in
            try Stroke(tool: .pen, color: InkColor("#FF0000"), width: 6, points: [try InkPoint(x: spot.0, y: spot.1)])
        }
        return (Drawing(strokes: strokes), spots)
    }

    /// Flattens dots onto `page` of the PDF at `source`; checks where they land and that
    /// nothing else changed. Returns the flattened file.
    @discardableResult
    static func checkDots(_ source: URL, page: Int, sourceLocation: SourceLocation = #_sourceLocation) throws -> URL {
        let geometry = try PDFFile(path: source.path).page(page)
        let (drawing, spots) = try dots(width: geometry.width, height: geometry.height)
        let increment = try Flattener.increment(PDFLocation(path: source.path), page: page, adding: drawing)
        let output = folder.appendingPathComponent("flat-\(UUID().uuidString).pdf")
        try Data(Array(try Data(contentsOf: source)) + increment).write(to: output)

        // A viewer honours UserUnit; pdftoppm does not, so render at 72 dpi per user unit.
        let dpi = 72 * geometry.userUnit
        let before = try Raster.render(source.path, page: page, dpi: dpi)
        let after = try Raster.render(output.path, page: page, dpi: dpi)
        #expect(abs(Double(after.width) - geometry.width) <= 1 && abs(Double(after.height) - geometry.height) <= 1,
                "render \(after.width)×\(after.height) for a \(geometry.width)×\(geometry.height) page", sourceLocation: sourceLocation)
        let difference = Difference(before, after)
        #expect(difference.blobs.count == spots.count, "\(difference.blobs.count) changed regions, expected \(spots.count): \(difference.blobs)",
                sourceLocation: sourceLocation)
        for spot in spots {
            let nearest = difference.blobs.min { hypot($0.x - spot.0, $0.y - spot.1) < hypot($1.x - spot.0, $1.y - spot.1) }
            let distance = nearest.map { hypot($0.x - spot.0, $0.y - spot.1) } ?? .infinity
            #expect(distance <= 1, "dot drawn at \(spot) found \(distance) px away (\(String(describing: nearest)))", sourceLocation: sourceLocation)
        }
        // Only the dots changed: 4 discs of radius 3 are about 113 pixels.
        #expect(difference.changed <= spots.count * 40, "\(difference.changed) pixels changed", sourceLocation: sourceLocation)
        return output
    }

    static func fixture(_ page: PDFFixtures.Page, name: String) throws -> URL {
        var page = page
        if page.content.isEmpty { page.content = PDFFixtures.busyContent(page.mediaBox) }
        let url = folder.appendingPathComponent(name)
        try Data(PDFFixtures.pdf([page])).write(to: url)
        return url
    }

    @Test("every rotation, an offset CropBox inside an offset MediaBox", arguments: [0, 90, 180, 270, -90, 450])
    func rotations(_ rotation: Int) throws {
        let page = PDFFixtures.Page(mediaBox: [-40, -25, 572, 767], cropBox: [60, 90, 460, 700], rotate: rotation)
        let geometry = try PDFFile(path: try Self.fixture(page, name: "rot\(rotation).pdf").path).page(0)
        let sideways = ((rotation % 360) + 360) % 180 == 90
        #expect(geometry.width == (sideways ? 610 : 400) && geometry.height == (sideways ? 400 : 610))
        try Self.checkDots(try Self.fixture(page, name: "rot\(rotation).pdf"), page: 0)
    }

    @Test("UserUnit 2, with rotation and a CropBox partly outside the MediaBox", arguments: [0, 90])
    func userUnit(_ rotation: Int) throws {
        // (Not taller than the MediaBox: poppler, unlike the spec and other viewers, then
        // ignores the CropBox's height altogether instead of intersecting.)
        let page = PDFFixtures.Page(mediaBox: [0, 0, 300, 400], cropBox: [20, -50, 250, 330], rotate: rotation, userUnit: 2)
        let url = try Self.fixture(page, name: "uu\(rotation).pdf")
        let geometry = try PDFFile(path: url.path).page(0)
        #expect(geometry.box == (20, 0, 250, 330))
        #expect(geometry.width == (rotation == 0 ? 460 : 660))
        try Self.checkDots(url, page: 0)
    }
}

/// The same check on pages nobody here made: the corpus's rotated pages and UserUnit pages.
@Suite("Placement on corpus pages")
struct CorpusPlacementTests {
    @Test("dots land where drawn", arguments: [
        ("hello_world_rotated.pdf", 0), ("hello_world_rotated.pdf", 4), ("issue8125.pdf", 0), ("pr20043.pdf", 0),
        ("rotation.pdf", 1), ("rotated_freetexts.pdf", 0), ("bug1947248_text.pdf", 0), ("issue19176.pdf", 0),
        ("labelled_pages.pdf", 10), ("annotation-highlight.pdf", 0), ("blendmode.pdf", 0),
    ])
    func corpusPage(_ name: String, _ page: Int) throws {
        let copy = PlacementTests.folder.appendingPathComponent("corpus-\(UUID().uuidString)-\(name)")
        try FileManager.default.copyItem(at: LiveCorpus.folder.appendingPathComponent(name), to: copy)
        try PlacementTests.checkDots(copy, page: page)
    }
}
