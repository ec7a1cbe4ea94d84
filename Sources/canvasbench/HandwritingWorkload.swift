import ArgumentParser
import CanvasCore
import DocumentStore
import Foundation
import TestSupport

/// A page of real-looking handwriting (TestSupport's `Handwriting`): what it costs in bytes,
/// how a page edited again and again grows, and how a flatten into a long document compares
/// with the qpdf command line placing the same ink, all measured in this run.
struct HandwritingWorkload {
    let runs: Int
    let edits: Int
    let memoryDocumentMegabytes: Int
    let imageSide: Int

    func run(in folder: URL) throws {
        // A stylus's samples, not a formula's: every pen sample carries ±0.4 pt of noise in x
        // and y and ±0.04 of pressure noise on a pressure that drifts along the stroke and
        // tapers at its ends (Handwriting.jitteryPage).
        let drawing = Handwriting.jitteryPage()
        let points = Double(Handwriting.inputPoints)
        print("handwriting page: \(Handwriting.penStrokes) pen strokes of \(Handwriting.pointsPerStroke) points with pressure, "
              + "\(Handwriting.highlighterStrokes) highlighter strokes, \(Handwriting.texts) texts: \(Handwriting.inputPoints) input points; "
              + "each pen sample with a stylus's jitter (uniform ±\(format(Handwriting.jitter)) pt in x and y, ±0.04 pressure)")
        let store = try DocumentStore(folder: folder, keepRevisions: 2)
        // Fonts and Cairo are loaded once per process; do that before anything is timed.
        try Data(Handwriting.document()).write(to: folder.appendingPathComponent("warm-up.pdf"))
        _ = try store.flatten("warm-up.pdf", page: 0, drawing: drawing)

        // The same page edited `edits` times, in `runs` fresh sessions; medians per edit.
        var times = [[Double]](repeating: [], count: edits)
        var growth: [Int] = []
        var sourceBytes = 0
        for session in 0..<runs {
            let name = "notes-\(session).pdf"
            let url = folder.appendingPathComponent(name)
            var previous = Handwriting.document()
            try Data(previous).write(to: url)
            for edit in 0..<edits {
                let start = ContinuousClock.now
                _ = try store.flatten(name, page: 1, drawing: drawing)
                times[edit].append((ContinuousClock.now - start).seconds)
                let now = Array(try Data(contentsOf: url))
                if session == 0 {
                    growth.append(now.count - previous.count)
                    if edit == 0 { sourceBytes = InkBytes.storedSource(in: Array(now[previous.count...])) }
                }
                previous = now
            }
        }
        let first = Double(growth[0])
        print("  one edit into page 2 of a 3-page text PDF: \(format(first / 1000)) KB appended, \(format(first / points)) bytes per input point "
              + "(the ink form \(format((first - Double(sourceBytes)) / points)), the stored drawing \(format(Double(sourceBytes) / points)))")
        let firstTime = Stats(times[0]).median, lastTime = Stats(times[edits - 1]).median
        print("  \(edits) edits of that page: growth \(format(Double(growth.reduce(0, +)) / (Double(edits) * first), 2))x \(edits) times the first edit's; "
              + "edit \(edits) took \(format(lastTime * 1000)) ms, edit 1 \(format(firstTime * 1000)) ms: \(format(lastTime / firstTime, 2))x (medians of \(runs) sessions)")

        try longDocument(drawing, in: folder, store: store)
        if memoryDocumentMegabytes > 0 { try memory(drawing, in: folder) }
    }

    /// Page 1000 of a 2000-page text PDF: canvas bridge, and qpdf overlaying a one-page PDF of
    /// the same ink.
    private func longDocument(_ drawing: Drawing, in folder: URL, store: DocumentStore) throws {
        let pristine = folder.appendingPathComponent("text-2000.bin")
        try BenchDocuments.write(to: pristine, pages: 2000, scanned: false, imageSide: imageSide)
        let overlay = try OverlayPDF.write(drawing, width: 612, height: 792, to: folder.appendingPathComponent("handwriting-overlay.pdf"))
        let name = "text-2000.pdf", document = folder.appendingPathComponent(name)
        var ours: [Double] = [], theirs: [Double] = []
        for _ in 0..<runs {
            try? FileManager.default.removeItem(at: document)
            try FileManager.default.copyItem(at: pristine, to: document)
            let start = ContinuousClock.now
            _ = try store.flatten(name, page: 999, drawing: drawing)
            ours.append((ContinuousClock.now - start).seconds)
            let out = folder.appendingPathComponent("qpdf-out.pdf")
            let qpdf = try Spawned.run("/usr/bin/qpdf", [pristine.path, "--overlay", overlay.path, "--to=1000", "--from=1", "--", out.path])
            guard qpdf.status == 0 || qpdf.status == 3 else { throw ValidationError("qpdf exited \(qpdf.status)") }
            theirs.append(qpdf.seconds)
            try? FileManager.default.removeItem(at: out)
        }
        try? FileManager.default.removeItem(at: document)
        try FileManager.default.copyItem(at: pristine, to: document)
        let peak = try Spawned.run(Sibling.path("canvasbench"), ["flatten-one", "--folder", folder.path, "--name", name, "--page", "999", "--handwriting"])
        let mine = Stats(ours).median, qpdf = Stats(theirs).median
        print("  into page 1000 of a 2000-page text PDF: canvas bridge \(format(mine * 1000)) ms, qpdf --overlay \(format(qpdf * 1000)) ms: "
              + "\(format(mine / qpdf, 2))x qpdf's time (medians of \(runs)); peak RSS \(format(peak.peakMegabytes)) MB")
        for url in [pristine, document, overlay] { try? FileManager.default.removeItem(at: url) }
        try? FileManager.default.removeItem(at: folder.appendingPathComponent(".canvas-revisions"))
    }

    /// The handwriting page into the middle of a scanned document of about
    /// `memoryDocumentMegabytes`, in a process of its own: its peak resident memory.
    private func memory(_ drawing: Drawing, in folder: URL) throws {
        // A scanned page is its grey image (a byte per pixel) and a few hundred bytes more.
        let pageBytes = Double(imageSide * imageSide) + 400
        let pages = max(2, Int(Double(memoryDocumentMegabytes) * 1e6 / pageBytes))
        let name = "scanned-large.pdf", url = folder.appendingPathComponent(name)
        try BenchDocuments.write(to: url, pages: pages, scanned: true, imageSide: imageSide)
        let bytes = (try FileManager.default.attributesOfItem(atPath: url.path)[.size] as? NSNumber)?.doubleValue ?? 0
        let peak = try Spawned.run(Sibling.path("canvasbench"), ["flatten-one", "--folder", folder.path, "--name", name, "--page", String(pages / 2), "--handwriting"])
        guard peak.status == 0 else { throw ValidationError("flatten-one exited \(peak.status)") }
        print("  into page \(pages / 2 + 1) of a \(format(bytes / 1e6)) MB scanned PDF (\(pages) pages): peak RSS \(format(peak.peakMegabytes)) MB")
        try? FileManager.default.removeItem(at: url)
        try? FileManager.default.removeItem(at: folder.appendingPathComponent(".canvas-revisions"))
    }
}
