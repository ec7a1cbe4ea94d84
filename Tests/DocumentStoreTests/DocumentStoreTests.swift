import CanvasCore
import CanvasProtocol
import DocumentStore
import Foundation
import PDFSurgery
import TestSupport
import Testing

/// Runs a command and returns its standard output; fails the test on a non-zero exit.
func run(_ executable: String, _ arguments: [String]) throws -> (status: Int32, output: String) {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: executable)
    process.arguments = arguments
    let pipe = Pipe()
    process.standardOutput = pipe
    process.standardError = FileHandle.nullDevice
    try process.run()
    let data = pipe.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return (process.terminationStatus, String(decoding: data, as: UTF8.self))
}

/// Whether every stream of the PDF decodes: `qpdf --check` passes a stream whose compressed
/// bytes are garbage, which a viewer then fails to read (a font that does not load).
func everyStreamDecodes(_ path: String) throws -> Bool {
    let out = FileManager.default.temporaryDirectory.appendingPathComponent("decoded-\(UUID().uuidString).pdf")
    defer { try? FileManager.default.removeItem(at: out) }
    return try run("/usr/bin/qpdf", ["--stream-data=uncompress", "--decode-level=all", path, out.path]).status == 0
}

func freshFolder(_ label: String) throws -> URL {
    let url = FileManager.default.temporaryDirectory.appendingPathComponent("\(label)-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    return url
}

func dot(_ x: Double, _ y: Double, color: String = "#FF0000", width: Double = 6) throws -> Stroke {
    try Stroke(tool: .pen, color: InkColor(color), width: width, points: [InkPoint(x: x, y: y)])
}

@Suite("Document store", .serialized)
struct DocumentStoreTests {
    @Test("a yellow highlighter over black keeps it black, and does not darken where it crosses itself")
    func highlighter() throws {
        let folder = try freshFolder("highlight")
        // A black band across the bottom of a white page (display y 140 to 180).
        try Data(PDFFixtures.pdf([.init(mediaBox: [0, 0, 300, 200], content: "0 g 0 20 300 40 re f")])).write(to: folder.appendingPathComponent("h.pdf"))
        let store = try DocumentStore(folder: folder)
        let path = try [InkPoint(x: 20, y: 100), InkPoint(x: 280, y: 100), InkPoint(x: 150, y: 60), InkPoint(x: 150, y: 150)]
        let stroke = try Stroke(tool: .highlighter, color: InkColor("yellow"), width: 20, points: path)
        _ = try store.flatten("h.pdf", page: 0, drawing: Drawing(strokes: [stroke]))
        let page = try Raster.render(folder.appendingPathComponent("h.pdf").path, page: 0)
        let onBlack = page.rgb(150, 146), onWhite = page.rgb(60, 100), crossing = page.rgb(150, 100)
        #expect(onBlack.0 < 30 && onBlack.1 < 30 && onBlack.2 < 30, "black under the highlighter became \(onBlack)")
        #expect(onWhite.0 > 230 && onWhite.1 > 180 && onWhite.2 < 40, "white under yellow should be yellow, is \(onWhite)")
        // (150, 100) is covered by both legs of the stroke, over white.
        #expect(crossing == onWhite, "the crossing is \(crossing), the single layer \(onWhite)")
        #expect(try run("/usr/bin/qpdf", ["--check", folder.appendingPathComponent("h.pdf").path]).status == 0)
    }

    @Test("first, middle and last page of a 200-page document: count, order and every other page unchanged")
    func longDocument() throws {
        let folder = try freshFolder("long")
        let pages = (0..<200).map { index in
            PDFFixtures.Page(content: "0 g \(20 + index % 50 * 10) 700 40 20 re f BT /F1 18 Tf 72 400 Td (Page \(index + 1)) Tj ET")
        }
        let url = folder.appendingPathComponent("long.pdf")
        try Data(PDFFixtures.pdf(pages)).write(to: url)
        let original = folder.appendingPathComponent("original.pdf.bak")
        try FileManager.default.copyItem(at: url, to: original)
        let store = try DocumentStore(folder: folder)
        var revision = 1
        for page in [0, 100, 199] {
            let summary = try store.flatten("long.pdf", page: page, drawing: Drawing(strokes: [try dot(300, 300)]), expectedRevision: revision)
            revision += 1
            #expect(summary.revision == revision && summary.pageCount == 200)
        }
        #expect(try PDFFile(path: url.path).pageCount == 200)
        for page in [0, 1, 50, 99, 100, 101, 198, 199] {
            let text = try run("/usr/bin/pdftotext", ["-f", "\(page + 1)", "-l", "\(page + 1)", url.path, "-"]).output
            #expect(text.contains("Page \(page + 1)"), "page \(page) reads \(text.debugDescription)")
        }
        for page in [1, 2, 99, 101, 150, 198] {
            #expect(try Raster.render(url.path, page: page) == Raster.render(original.path, page: page), "page \(page) changed")
        }
        for page in [0, 100, 199] {
            #expect(try Raster.render(url.path, page: page) != Raster.render(original.path, page: page), "page \(page) has no ink")
        }
        #expect(try run("/usr/bin/qpdf", ["--check", url.path]).status == 0)
    }

    @Test("five edits of one page: no drift, no nesting, a font per edit with text, the original content stream untouched")
    func repeatedEdits() throws {
        let folder = try freshFolder("repeat")
        let page = PDFFixtures.Page(mediaBox: [0, 0, 400, 500], cropBox: [30, 40, 380, 470], rotate: 90,
                                    content: PDFFixtures.busyContent([0, 0, 400, 500]))
        let url = folder.appendingPathComponent("r.pdf")
        try Data(PDFFixtures.pdf([page])).write(to: url)
        let before = try Raster.render(url.path, page: 0)
        let originalContent = try run("/usr/bin/qpdf", ["--show-object=5", "--raw-stream-data", url.path]).output
        let store = try DocumentStore(folder: folder)
        var spots: [(Double, Double)] = []
        for edit in 0..<5 {
            let spot = (60.0 + 70 * Double(edit), 50.0 + 60 * Double(edit))
            spots.append(spot)
            _ = try store.flatten("r.pdf", page: 0, drawing: Drawing(strokes: [try dot(spot.0, spot.1)],
                                                                      texts: [try TextAnnotation(text: "edit \(edit)", x: spot.0, y: spot.1 + 10, fontSize: 12, color: InkColor("blue"))]))
        }
        // Every dot of every edit where it was drawn.
        let after = try Raster.render(url.path, page: 0)
        let blobs = Difference(before, after).blobs
        for spot in spots {
            let distance = blobs.map { hypot($0.x - spot.0, $0.y - spot.1) }.min() ?? .infinity
            #expect(distance <= 1, "the dot drawn at \(spot) is \(distance) px away")
        }
        // Each edit embeds the glyphs its own text needs, once; its form is drawn from the page.
        let structure = try InkStructure(url.path)
        #expect(structure.fontFiles <= 5, "\(structure.fontFiles) fonts embedded for 5 edits")
        #expect(structure.inkDraws == 5 && structure.nestedForms == 0, "\(structure)")
        #expect(try Flattener.storedDrawing(PDFLocation(path: url.path), page: 0).texts.map(\.text) == (0..<5).map { "edit \($0)" })
        // The page's own content stream is still object 5, byte for byte, inside the new contents.
        #expect(try run("/usr/bin/qpdf", ["--show-object=5", "--raw-stream-data", url.path]).output == originalContent)
        let contents = try run("/usr/bin/qpdf", ["--show-object=4", url.path]).output
        #expect(contents.contains("5 0 R"), "the original content is no longer on the page: \(contents)")
        #expect(try run("/usr/bin/qpdf", ["--check", url.path]).status == 0)
    }

    @Test(".yianazip: metadata updated, unknown fields kept, the PDF after FF FF FF FF")
    func yianazip() throws {
        let folder = try freshFolder("yiana")
        let metadata: JSONValue = [
            "title": "Notes", "created": 700000000.5, "modified": 700000000.5, "page_count": 2, "tags": ["a"],
            "ocr_completed": false, "full_text": "x", "custom": ["kept": true],
        ]
        let pdf = PDFFixtures.pdf([.init(content: "0 g 10 10 50 50 re f"), .init(rotate: 180, content: "0 g 10 10 50 50 re f")])
        try Data(JSONCodec.serialize(metadata) + YianaContainer.separator + pdf).write(to: folder.appendingPathComponent("n.yianazip"))
        let store = try DocumentStore(folder: folder)
        #expect(try store.info("n.yianazip").pages.map(\.rotation) == [0, 180])
        let summary = try store.flatten("n.yianazip", page: 1, drawing: Drawing(strokes: [try dot(100, 100)]))
        #expect(summary.revision == 2 && summary.pageCount == 2)
        let saved = try #require(try store.info("n.yianazip").metadata)
        #expect(saved["custom"] == ["kept": true] && saved["title"] == "Notes" && saved["tags"] == ["a"])
        #expect(saved["page_count"] == 2)
        #expect((saved["modified"]?.doubleValue ?? 0) > 700000000.5, "modified keeps its number form and moves on")
        #expect(saved["markup"]?["has_markup"] == true && saved["markup"]?["markup_count"] == 1)
        _ = try store.flatten("n.yianazip", page: 0, drawing: Drawing(strokes: [try dot(50, 50)]))
        #expect(try store.info("n.yianazip").metadata?["markup"]?["markup_count"] == 2)
        // The PDF part alone passes qpdf's check.
        let bytes = Array(try Data(contentsOf: folder.appendingPathComponent("n.yianazip")))
        let separator = (0..<bytes.count - 3).first { (i: Int) -> Bool in
            bytes[i] == 0xFF && bytes[i + 1] == 0xFF && bytes[i + 2] == 0xFF && bytes[i + 3] == 0xFF
        }
        let start = try #require(separator)
        let extracted = folder.appendingPathComponent("extracted.bin")
        try Data(bytes[(start + 4)...]).write(to: extracted)
        #expect(try run("/usr/bin/qpdf", ["--check", extracted.path]).status == 0)
    }

    @Test("revisions: the original and the latest are always kept; restore makes a new revision")
    func revisions() throws {
        let folder = try freshFolder("revisions")
        try Data(PDFFixtures.pdf([.init(content: "0 g 10 10 50 50 re f")])).write(to: folder.appendingPathComponent("d.pdf"))
        let original = try Data(contentsOf: folder.appendingPathComponent("d.pdf"))
        let store = try DocumentStore(folder: folder, keepRevisions: 3)
        for edit in 0..<5 { _ = try store.flatten("d.pdf", page: 0, drawing: Drawing(strokes: [try dot(20 + 30 * Double(edit), 100)])) }
        #expect(try store.revisions("d.pdf").map(\.revision) == [1, 5, 6])
        #expect(throws: DocumentError.conflict(name: "d.pdf", expected: 5, current: 6)) {
            try store.flatten("d.pdf", page: 0, drawing: Drawing(strokes: [try dot(1, 1)]), expectedRevision: 5)
        }
        #expect(throws: DocumentError.revisionNotFound(name: "d.pdf", revision: 3)) { try store.restore("d.pdf", revision: 3) }
        #expect(try store.restore("d.pdf", revision: 1).revision == 7)
        #expect(try Data(contentsOf: folder.appendingPathComponent("d.pdf")) == original)
        #expect(try store.revisions("d.pdf").map(\.revision) == [1, 6, 7])
    }

    @Test("names that leave the folder, hidden files and other types are refused")
    func names() throws {
        let folder = try freshFolder("names")
        let outside = try freshFolder("outside")
        try Data(PDFFixtures.pdf([.init()])).write(to: outside.appendingPathComponent("secret.pdf"))
        try FileManager.default.createSymbolicLink(at: folder.appendingPathComponent("link.pdf"), withDestinationURL: outside.appendingPathComponent("secret.pdf"))
        let store = try DocumentStore(folder: folder)
        for name in ["../outside/secret.pdf", "/etc/passwd", ".hidden.pdf", "notes.txt", "", "a/b.pdf", "link.pdf"] {
            #expect(throws: DocumentError.self, "\(name) was accepted") { try store.summary(name) }
        }
        // The link is listed, so a client sees why it is not served, and never read.
        let listed = try store.list()
        #expect(listed.map(\.name) == ["link.pdf"])
        guard case .failure(.unreadable(_, "notRegularFile", _))? = listed.first?.summary else {
            Issue.record("link.pdf listed as \(listed)")
            return
        }
    }

    @Test("a PDF that needs a password is refused as encrypted, and left as it was")
    func passwordProtected() throws {
        let folder = try freshFolder("locked")
        let plain = folder.appendingPathComponent("plain.bin")
        try Data(PDFFixtures.pdf([.init(content: "0 g 10 10 50 50 re f")])).write(to: plain)
        let locked = folder.appendingPathComponent("locked.pdf")
        #expect(try run("/usr/bin/qpdf", ["--encrypt", "user-secret", "owner-secret", "256", "--", plain.path, locked.path]).status == 0)
        let before = try Data(contentsOf: locked)
        let store = try DocumentStore(folder: folder)
        #expect(throws: DocumentError.self) { try store.flatten("locked.pdf", page: 0, drawing: Drawing(strokes: [try dot(5, 5)])) }
        do {
            _ = try store.summary("locked.pdf")
            Issue.record("a locked PDF was read")
        } catch {
            guard case .unreadable(_, let reason, _) = error else { Issue.record("\(error)"); return }
            #expect(reason == "encrypted")
        }
        #expect(try Data(contentsOf: locked) == before)
    }

    @Test("every corpus file either flattens and passes qpdf --check, or is refused with a reason, untouched")
    func corpus() throws {
        let corpus = LiveCorpus.folder
        let folder = try freshFolder("corpus")
        let names = try FileManager.default.contentsOfDirectory(atPath: corpus.path).filter { $0.hasSuffix(".pdf") }.sorted()
        #expect(names.count >= 18)
        for name in names { try FileManager.default.copyItem(at: corpus.appendingPathComponent(name), to: folder.appendingPathComponent(name)) }
        let store = try DocumentStore(folder: folder)
        var flattened = 0
        for name in names {
            let url = folder.appendingPathComponent(name)
            let before = try Data(contentsOf: url)
            do {
                let count = try store.summary(name).pageCount
                let page = count / 2
                let geometry = try store.page(name, page)
                _ = try store.flatten(name, page: page, drawing: Drawing(strokes: [try dot(geometry.width / 2, geometry.height / 2)]))
                let check = try run("/usr/bin/qpdf", ["--check", url.path])
                // qpdf exits 3 for warnings; a file that already warns (a bad xref entry the
                // reader skips) keeps that warning, nothing worse.
                let originalCheck = try run("/usr/bin/qpdf", ["--check", corpus.appendingPathComponent(name).path])
                #expect(check.status == 0 || check.status == originalCheck.status, "\(name): qpdf --check exits \(check.status)")
                #expect(try store.summary(name).pageCount == count)
                flattened += 1
            } catch let error as DocumentError {
                guard case .unreadable(_, let reason, _) = error else {
                    Issue.record("\(name): \(error)")
                    continue
                }
                #expect(reason == "damaged" || reason == "encrypted")
                #expect(try Data(contentsOf: url) == before, "\(name) was changed by a refused flatten")
            }
        }
        #expect(flattened >= 16)
    }
}

/// pdf.js's test PDFs, kept in the repository (Tests/Fixtures/pdfjs/README.md says where from).
enum LiveCorpus {
    static let folder = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Fixtures/pdfjs")
}
