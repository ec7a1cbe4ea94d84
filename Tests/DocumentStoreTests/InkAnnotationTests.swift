import CanvasCore
import DocumentStore
import Foundation
import InkRendering
import TestSupport
import Testing

/// Ink saved as standard annotations: drawn by poppler and MuPDF exactly as the same ink
/// flattened into the page, reopened bit for bit, replaced, and, changed by another program
/// (MuPDF's `mutool run`), reopened from what that program left.
@Suite("Ink annotations", .serialized)
struct InkAnnotationTests {
    /// Recorded UNIPEN words (Tests/Fixtures/strokes, CC BY 4.0), two highlighters and a note.
    static func drawing() throws -> Drawing {
        let page = InkPrecision.rounded(try RecordedHandwriting.page())
        let words = Array(page.strokes.filter { $0.tool == .pen }.prefix(12)), highlighters = page.strokes.filter { $0.tool == .highlighter }
        // Last, a stroke far wider than the word before it, in its pen and colour, below the
        // words: the same run (5.3), whose appearance's box must reach as far as its ink does.
        let last = words[words.count - 1], bottom = words.flatMap { $0.points.map(\.y) }.max()!
        let left = last.points.map(\.x).min()!
        let wide = try Stroke(tool: last.tool, color: last.color, width: 24,
                              points: (0...10).map { step in try InkPoint(x: left + Double(step) * 15, y: bottom + 30, pressure: 1) })
        return Drawing(strokes: Array(highlighters.prefix(2)) + words + [wide],
                       texts: [try TextAnnotation(text: "annotated ✓\nsecond line", x: 300, y: 90, fontSize: 14, color: InkColor("#1F3A93"))])
    }

    /// `document` copied into a fresh folder, `drawing` saved on `page` in `form`.
    static func saved(_ document: [UInt8], page: Int, _ drawing: Drawing, form: InkForm, _ label: String) throws -> (DocumentStore, URL) {
        let folder = try freshFolder(label)
        let url = folder.appendingPathComponent("doc.pdf")
        try Data(document).write(to: url)
        let store = try DocumentStore(folder: folder)
        _ = try store.flatten("doc.pdf", page: page, drawing: drawing, form: form)
        return (store, url)
    }

    /// MuPDF's rendering of one page in grey (mupdf-tools' `mutool draw`).
    static func mupdf(_ path: String, page: Int, dpi: Int) throws -> GrayRaster {
        let out = FileManager.default.temporaryDirectory.appendingPathComponent("mupdf-\(UUID().uuidString).pgm")
        defer { try? FileManager.default.removeItem(at: out) }
        let result = try run("/usr/bin/mutool", ["draw", "-q", "-r", String(dpi), "-c", "gray", "-o", out.path, path, String(page + 1)])
        guard result.status == 0 else { throw Raster.RenderFailure(message: "mutool draw exited \(result.status): \(result.output)") }
        return try GrayRaster.parse(Array(Data(contentsOf: out)))
    }

    static func differing(_ a: GrayRaster, _ b: GrayRaster) -> Double {
        precondition(a.width == b.width && a.height == b.height, "renders of different sizes")
        return Double(zip(a.pixels, b.pixels).count { abs(Int($0) - Int($1)) > 16 }) / Double(a.pixels.count)
    }

    @Test("poppler and MuPDF draw the annotations as the flattened ink, within 0.1% of pixels at 150 dpi, upright and rotated",
          arguments: [("notes", 1), ("rotated", 0)])
    func looksFlattened(_ fixture: String, _ page: Int) throws {
        let document = fixture == "notes" ? Handwriting.document()
            : Array(try Data(contentsOf: LiveCorpus.folder.appendingPathComponent("hello_world_rotated.pdf")))
        let drawing = try Self.drawing()
        let (_, paper) = try Self.saved(document, page: page, drawing, form: .paper, "paper")
        let (_, annotated) = try Self.saved(document, page: page, drawing, form: .annotations, "annotated")
        #expect(try run("/usr/bin/qpdf", ["--check", annotated.path]).status == 0)
        #expect(try everyStreamDecodes(paper.path) && everyStreamDecodes(annotated.path))
        for (renderer, render) in [("poppler", { (path: String) in try GrayRaster.render(path, page: page, dpi: 150) }),
                                   ("MuPDF", { (path: String) in try Self.mupdf(path, page: page, dpi: 150) })] {
            let a = try render(paper.path), b = try render(annotated.path)
            let share = Self.differing(a, b)
            print("\(fixture) page \(page), \(renderer): \(share * 100)% of pixels differ between the annotations and the flattened ink")
            #expect(share <= 0.001, "\(renderer): \(share * 100)% differ")
        }
        // The annotations do draw: the page is not as it was.
        let original = FileManager.default.temporaryDirectory.appendingPathComponent("original-\(UUID().uuidString).pdf")
        try Data(document).write(to: original)
        #expect(Self.differing(try GrayRaster.render(original.path, page: page, dpi: 150), try GrayRaster.render(annotated.path, page: page, dpi: 150)) > 0.002)
        // The page's content is untouched: the ink is all in annotations.
        #expect(try InkStructure(annotated.path).inkDraws == 0)
    }

    @Test("annotations reopen bit for bit, one edit per /Ink and /FreeText; a replace takes off the erased stroke's annotation")
    func reopenAndReplace() throws {
        let drawing = try Self.drawing()
        let (store, url) = try Self.saved(Handwriting.document(), page: 1, drawing, form: .annotations, "annotations-reopen")
        let ink = try store.pageInk("doc.pdf", 1).ink
        #expect(ink.drawing == drawing)
        #expect(ink.edits.allSatisfy { !$0.changedElsewhere })
        // Runs of one tool and colour, whatever the widths: the highlighters apart, the words by line colour.
        #expect(ink.edits.count == InkAnnotationRuns.count(drawing) + drawing.texts.count)

        var strokes = ink.drawing.strokes
        strokes.remove(at: 5)
        let kept = Drawing(strokes: strokes, texts: drawing.texts)
        _ = try store.flatten("doc.pdf", page: 1, drawing: kept, form: .annotations, replacing: ink.edits.map(\.digest))
        #expect(try run("/usr/bin/qpdf", ["--check", url.path]).status == 0 && everyStreamDecodes(url.path))
        #expect(try store.pageInk("doc.pdf", 1).ink.drawing == kept)
        let (_, alone) = try Self.saved(Handwriting.document(), page: 1, kept, form: .annotations, "annotations-alone")
        // Pixel for pixel the kept drawing saved alone: nothing of the erased stroke is left.
        #expect(Self.differing(try GrayRaster.render(url.path, page: 1, dpi: 150), try GrayRaster.render(alone.path, page: 1, dpi: 150)) == 0)
    }

    /// A drawing whose strokes take their positions from the /InkList (version 3) cannot be
    /// read once the /InkList has a point or a stroke fewer; what else it says (the colour by
    /// name, the width) comes from its own bytes all the same, as it did when it held them.
    @Test("an /Ink with a point and a stroke taken off elsewhere reopens from its /InkList, its colour still named")
    func pointTakenOff() throws {
        let words = try Self.drawing().strokes.filter { $0.tool == .pen }.prefix(3)
        let drawing = Drawing(strokes: try words.map { try Stroke(tool: .pen, color: InkColor("blue"), width: 2.5, points: $0.points) })
        let (store, url) = try Self.saved(Handwriting.document(), page: 1, drawing, form: .annotations, "annotations-shorter")
        let before = try store.pageInk("doc.pdf", 1).ink
        #expect(before.edits.count == 1)
        guard case .annotation(let position) = before.edits[0].place else { Issue.record("not an annotation"); return }
        let script = url.deletingLastPathComponent().appendingPathComponent("shorten.js")
        try """
        var doc = new PDFDocument(scriptArgs[0]);
        var annot = doc.findPage(1).Annots[\(position)];
        var ink = annot.InkList;
        var first = [];
        for (var j = 0; j < ink[0].length - 2; j++) first.push(ink[0][j]);
        var lines = [first];
        for (var i = 1; i < ink.length - 1; i++) lines.push(ink[i]);
        annot.InkList = lines;
        doc.save(scriptArgs[0], "incremental");
        """.write(to: script, atomically: true, encoding: .utf8)
        let result = try run("/usr/bin/mutool", ["run", script.path, url.path])
        #expect(result.status == 0, "\(result.output)")
        let after = try DocumentStore(folder: url.deletingLastPathComponent()).pageInk("doc.pdf", 1).ink
        #expect(after.edits.count == 1 && after.edits[0].changedElsewhere)
        let strokes = after.drawing.strokes
        #expect(strokes.count == 2 && strokes[0].points.count == drawing.strokes[0].points.count - 1)
        #expect(strokes[1].points.count == drawing.strokes[1].points.count)
        let blue = try InkColor("blue")
        #expect(strokes.allSatisfy { $0.color == blue && $0.points.allSatisfy { $0.pressure == nil } })
    }

    /// One run (one /Ink) whose strokes the /InkList gives back exactly or not: a stroke on the
    /// grid takes its positions from there (InkSource, version 3), one with Xournal++'s five
    /// decimals or a -0 keeps its own; every number comes back bit for bit all the same.
    @Test("numbers on the grid, off it, -0 and pressure 0.5555 in one /Ink reopen bit for bit, upright and rotated",
          arguments: [("notes", 1), ("rotated", 0)])
    func exactNumbers(_ fixture: String, _ page: Int) throws {
        let document = fixture == "notes" ? Handwriting.document()
            : Array(try Data(contentsOf: LiveCorpus.folder.appendingPathComponent("hello_world_rotated.pdf")))
        let words = try Self.drawing().strokes.filter { $0.tool == .pen }
        let xournal: [(Double, Double)] = [(210.17715, 200.96557), (210.2447, 200.61938), (210.39482, 200.16732), (210.52, 199.87)]
        let off = try Stroke(tool: .pen, color: words[0].color, width: 2.26, points: xournal.map { try InkPoint(x: $0.0, y: $0.1, pressure: 0.5555) })
        let awkward = try Stroke(tool: .pen, color: words[0].color, width: 3.3333333333333335,
                                 points: [try InkPoint(x: -0.0, y: 50, pressure: 0.5555), try InkPoint(x: 42.176144743080584, y: 60, pressure: nil),
                                          try InkPoint(x: 45, y: -0.0)])
        let drawing = Drawing(strokes: [words[0], off, words[1], awkward, words[2]])
        #expect(InkAnnotationRuns.count(drawing) == 1)
        let (store, url) = try Self.saved(document, page: page, drawing, form: .annotations, "annotations-exact")
        #expect(try run("/usr/bin/qpdf", ["--check", url.path]).status == 0)
        let ink = try store.pageInk("doc.pdf", page).ink
        #expect(ink.drawing == drawing && ink.edits.allSatisfy { !$0.changedElsewhere })
        let back = ink.drawing.strokes.flatMap(\.points), sent = drawing.strokes.flatMap(\.points)
        #expect(back.count == sent.count && zip(back, sent).allSatisfy {
            $0.x.bitPattern == $1.x.bitPattern && $0.y.bitPattern == $1.y.bitPattern && $0.pressure?.bitPattern == $1.pressure?.bitPattern
        })
        #expect(ink.drawing.strokes.map(\.width.bitPattern) == drawing.strokes.map(\.width.bitPattern))
        // The words did take their positions from the /InkList: the drawing is a version 3 one.
        let plain = url.deletingLastPathComponent().appendingPathComponent("plain.pdf")
        #expect(try run("/usr/bin/qpdf", ["--stream-data=uncompress", "--object-streams=disable", url.path, plain.path]).status == 0)
        let bytes = Array(try Data(contentsOf: plain))
        let versions = (0..<(bytes.count - 3)).filter { bytes[$0] == 0x43 && bytes[$0 + 1] == 0x42 && bytes[$0 + 2] == 0x49 }.map { bytes[$0 + 3] }
        #expect(versions == [3])
    }

    @Test("annotations flattened later (reopened, saved as paper) render as the ink saved as paper at once, and leave no annotation")
    func flattenedLater() throws {
        let drawing = try Self.drawing()
        let (store, url) = try Self.saved(Handwriting.document(), page: 1, drawing, form: .annotations, "annotations-later")
        let ink = try store.pageInk("doc.pdf", 1).ink
        _ = try store.flatten("doc.pdf", page: 1, drawing: ink.drawing, form: .paper, replacing: ink.edits.map(\.digest))
        let (_, paper) = try Self.saved(Handwriting.document(), page: 1, drawing, form: .paper, "paper-at-once")
        #expect(Self.differing(try GrayRaster.render(url.path, page: 1, dpi: 150), try GrayRaster.render(paper.path, page: 1, dpi: 150)) == 0)
        let after = try store.pageInk("doc.pdf", 1).ink
        #expect(after.edits.count == 1 && after.edits.allSatisfy { if case .form = $0.place { true } else { false } })
        #expect(try everyStreamDecodes(url.path))
    }

    @Test("an /Ink moved by another program (mutool run) reopens from its /InkList, without pressure; the rest from the stored drawing")
    func changedElsewhere() throws {
        let drawing = try Self.drawing()
        let (store, url) = try Self.saved(Handwriting.document(), page: 1, drawing, form: .annotations, "annotations-changed")
        let before = try store.pageInk("doc.pdf", 1).ink
        // MuPDF's scripting: move every point of the first pen annotation 20 pt to the right
        // (user space), and save incrementally, as an editor would.
        let penIndex = before.edits.firstIndex { $0.drawing.strokes.first?.tool == .pen }!
        guard case .annotation(let position) = before.edits[penIndex].place else { Issue.record("not an annotation"); return }
        let script = url.deletingLastPathComponent().appendingPathComponent("move.js")
        try """
        var doc = new PDFDocument(scriptArgs[0]);
        var page = doc.findPage(1);
        var annot = page.Annots[\(position)];
        var ink = annot.InkList;
        var moved = [];
        for (var i = 0; i < ink.length; i++) {
            var line = [];
            for (var j = 0; j < ink[i].length; j++) line.push(j % 2 == 0 ? ink[i][j] + 20 : ink[i][j]);
            moved.push(line);
        }
        annot.InkList = moved;
        doc.save(scriptArgs[0], "incremental");
        """.write(to: script, atomically: true, encoding: .utf8)
        let result = try run("/usr/bin/mutool", ["run", script.path, url.path])
        #expect(result.status == 0, "\(result.output)")
        let after = try DocumentStore(folder: url.deletingLastPathComponent()).pageInk("doc.pdf", 1).ink
        #expect(after.edits.count == before.edits.count)
        for (index, (old, new)) in zip(before.edits, after.edits).enumerated() {
            if index == penIndex {
                #expect(new.changedElsewhere && new.digest != old.digest)
                let was = old.drawing.strokes.flatMap(\.points), now = new.drawing.strokes.flatMap(\.points)
                #expect(was.count == now.count)
                #expect(zip(was, now).allSatisfy { abs($1.x - $0.x - 20) < 0.02 && abs($1.y - $0.y) < 0.02 && $1.pressure == nil })
                #expect(new.drawing.strokes.map(\.color) == old.drawing.strokes.map(\.color))
            } else {
                #expect(!new.changedElsewhere && new.drawing == old.drawing && new.digest == old.digest)
            }
        }
        // A replace made from the reopen before the change is refused, not written over it.
        #expect(throws: DocumentError.inkChanged(name: "doc.pdf", page: 1)) {
            _ = try store.flatten("doc.pdf", page: 1, drawing: .empty, form: .annotations, replacing: before.edits.map(\.digest))
        }
    }

    /// Annotations are packed into object streams, listed by a cross-reference stream (PDF 1.5),
    /// whatever the document's own sections are. A PDF 1.4 file (pdf.js's
    /// hello_world_rotated.pdf, with a cross-reference table) says 1.5 in its catalog from that
    /// update on; its bytes before the update stay as they were, and paper saves into it stay
    /// plain, as before.
    @Test("an annotation save into a PDF 1.4 file packs its objects and says 1.5 in the catalog; the file's own bytes stay")
    func olderFile() throws {
        let original = Array(try Data(contentsOf: LiveCorpus.folder.appendingPathComponent("hello_world_rotated.pdf")))
        #expect(original.starts(with: Array("%PDF-1.4".utf8)))
        let drawing = try Self.drawing()
        let (store, url) = try Self.saved(original, page: 0, drawing, form: .annotations, "older-file")
        let saved = Array(try Data(contentsOf: url))
        #expect(saved.starts(with: original))
        let update = String(decoding: saved[original.count...], as: UTF8.self)
        #expect(update.contains("/Type /ObjStm") && update.contains("/Type /XRef") && !update.contains("\nxref\n"))
        let root = try #require(PDFEdits.show(url, "trailer").firstMatch(of: /\/Root ([0-9]+) 0 R/)).1
        #expect(try PDFEdits.show(url, String(root)).contains("/Version /1.5"))
        #expect(try run("/usr/bin/qpdf", ["--check", url.path]).status == 0)
        #expect(try store.pageInk("doc.pdf", 0).ink.drawing == drawing)
        let (_, paper) = try Self.saved(original, page: 0, drawing, form: .paper, "older-file-paper")
        let paperUpdate = String(decoding: Array(try Data(contentsOf: paper))[original.count...], as: UTF8.self)
        #expect(paperUpdate.contains("\nxref\n") && !paperUpdate.contains("/ObjStm") && !paperUpdate.contains("/Version"))
    }
}

/// How many `/Ink` annotations a drawing's strokes make: runs of one tool, colour and width.
enum InkAnnotationRuns {
    static func count(_ drawing: Drawing) -> Int {
        var count = 0
        var last: Stroke?
        for stroke in drawing.strokes {
            if let last, last.tool == stroke.tool, last.color == stroke.color { continue }
            count += 1
            last = stroke
        }
        return count
    }
}
