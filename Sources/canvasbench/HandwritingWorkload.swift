import ArgumentParser
import CanvasCore
import DocumentStore
import Foundation
import InkRendering
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
        // tapers at its ends (Handwriting.jitteryPage). Put on the ink's grid as a client sends
        // it (the web client does): a number off it is stored whole, 8 bytes.
        let drawing = InkPrecision.rounded(Handwriting.jitteryPage())
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

        try recordedPage(in: folder, store: store)
        try longDocument(in: folder, store: store)
        if memoryDocumentMegabytes > 0 { try memory(drawing, in: folder) }
    }

    /// What the recorded page (RecordedHandwriting, on the ink's grid) costs on page 2 of the
    /// 3-page PDF: the bytes appended, and the stored drawing's share of them.
    private func recordedPage(in folder: URL, store: DocumentStore) throws {
        let drawing = InkPrecision.rounded(try RecordedHandwriting.page())
        let before = Handwriting.document()
        try Data(before).write(to: folder.appendingPathComponent("recorded.pdf"))
        _ = try store.flatten("recorded.pdf", page: 1, drawing: drawing)
        let appended = Array(try Data(contentsOf: folder.appendingPathComponent("recorded.pdf")))[before.count...]
        let source = Double(InkBytes.storedSource(in: Array(appended))), points = Double(drawing.pointCount)
        print("  the recorded page (\(drawing.pointCount) points) into page 2 of that PDF: \(format(Double(appended.count) / points)) bytes per point "
              + "(the ink form \(format((Double(appended.count) - source) / points)), the stored drawing \(format(source / points)))")
    }

    /// The recorded handwriting page (RecordedHandwriting: 24 words people wrote, 110 to 589
    /// pressure samples each) into page 1000 of a 2000-page text PDF, three ways in turn each
    /// run: the document store's flatten (the flatten and the save that copies, hashes and
    /// flushes the file), the flatten alone (the increment made and written to a scratch file),
    /// and the qpdf command line overlaying a one-page PDF of the same ink on the same page.
    private func longDocument(in folder: URL, store: DocumentStore) throws {
        let drawing = try RecordedHandwriting.page()
        let pristine = folder.appendingPathComponent("text-2000.bin")
        try BenchDocuments.write(to: pristine, pages: 2000, scanned: false, imageSide: imageSide)
        let overlay = try OverlayPDF.write(drawing, width: 612, height: 792, to: folder.appendingPathComponent("handwriting-overlay.pdf"))
        let name = "text-2000.pdf", document = folder.appendingPathComponent(name)
        let scratch = folder.appendingPathComponent("increment.bin"), out = folder.appendingPathComponent("qpdf-out.pdf")
        var saved: [Double] = [], flattened: [Double] = [], qpdf: [Double] = []
        // One of each first, not counted: the page cache and the libraries warm.
        for run in -1..<max(runs, 5) {
            try? FileManager.default.removeItem(at: document)
            try FileManager.default.copyItem(at: pristine, to: document)
            var start = ContinuousClock.now
            _ = try store.flatten(name, page: 999, drawing: drawing)
            let save = (ContinuousClock.now - start).seconds
            start = ContinuousClock.now
            let increment = try Flattener.increment(PDFLocation(path: pristine.path), page: 999, adding: drawing)
            try Data(increment).write(to: scratch)
            let flatten = (ContinuousClock.now - start).seconds
            let theirs = try Spawned.run("/usr/bin/qpdf", [pristine.path, "--overlay", overlay.path, "--to=1000", "--from=1", "--", out.path])
            guard theirs.status == 0 || theirs.status == 3 else { throw ValidationError("qpdf exited \(theirs.status)") }
            try? FileManager.default.removeItem(at: out)
            guard run >= 0 else { continue }
            saved.append(save)
            flattened.append(flatten)
            qpdf.append(theirs.seconds)
        }
        try? FileManager.default.removeItem(at: document)
        try FileManager.default.copyItem(at: pristine, to: document)
        let peak = try Spawned.run(Sibling.path("canvasbench"), ["flatten-one", "--folder", folder.path, "--name", name, "--page", "999", "--recorded"])
        let bytes = (try FileManager.default.attributesOfItem(atPath: pristine.path)[.size] as? NSNumber)?.doubleValue ?? 0
        print("  recorded handwriting (\(drawing.strokes.count) strokes, \(drawing.pointCount) points, \(drawing.texts.count) texts) into page 1000 "
              + "of a 2000-page text PDF (\(format(bytes / 1e6)) MB), \(saved.count) runs, median [min-max]:")
        print("    qpdf --overlay (the command line)          \(spread(qpdf))")
        print("    canvas bridge, document store's flatten     \(spread(saved))   \(format(Stats(saved).median / Stats(qpdf).median, 2))x qpdf's time "
              + "(pairwise \(pairwise(saved, qpdf)))")
        print("    canvas bridge, the flatten alone            \(spread(flattened))   \(format(Stats(flattened).median / Stats(qpdf).median, 2))x qpdf's time "
              + "(pairwise \(pairwise(flattened, qpdf))); the save's copy, hash and flushes: the difference")
        print("    peak RSS of the store's flatten in its own process: \(format(peak.peakMegabytes)) MB")
        for url in [pristine, document, overlay, scratch] { try? FileManager.default.removeItem(at: url) }
        try? FileManager.default.removeItem(at: folder.appendingPathComponent(".canvas-revisions"))
    }

    /// "median [min-max]" in milliseconds.
    private func spread(_ samples: [Double]) -> String {
        let stats = Stats(samples)
        return "\(format(stats.median * 1000)) ms [\(format(stats.sorted.first! * 1000))-\(format(stats.sorted.last! * 1000))]"
    }

    /// The median and range of the ratios of samples taken in the same run.
    private func pairwise(_ ours: [Double], _ theirs: [Double]) -> String {
        let ratios = Stats(zip(ours, theirs).map { $0 / $1 })
        return "\(format(ratios.median, 2))x [\(format(ratios.sorted.first!, 2))-\(format(ratios.sorted.last!, 2))]"
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
        try strokeOnScans(large: url, pages: pages, in: folder)
        try? FileManager.default.removeItem(at: url)
        try? FileManager.default.removeItem(at: folder.appendingPathComponent(".canvas-revisions"))
    }

    /// One pen stroke (40 points with pressure) flattened alone, the increment written to a
    /// scratch file: into the middle page of the large scan, and into a one-page scan of 1 MB
    /// (a 1000 × 1000 grey image), in turn each run.
    private func strokeOnScans(large: URL, pages: Int, in folder: URL) throws {
        let small = folder.appendingPathComponent("scanned-1mb.pdf"), scratch = folder.appendingPathComponent("increment.bin")
        try BenchDocuments.write(to: small, pages: 1, scanned: true, imageSide: 1000)
        let stroke = try Drawing(strokes: [Stroke(tool: .pen, color: InkColor("red"), width: 3, points: (0..<40).map { step in
            try InkPoint(x: 100 + Double(step) * 4, y: 300 + 12 * sin(Double(step) / 4), pressure: 0.3 + 0.4 * Double(step % 10) / 10)
        })])
        func flatten(_ url: URL, page: Int) throws -> Double {
            let start = ContinuousClock.now
            let increment = try Flattener.increment(PDFLocation(path: url.path), page: page, adding: stroke)
            try Data(increment).write(to: scratch)
            return (ContinuousClock.now - start).seconds
        }
        var onLarge: [Double] = [], onSmall: [Double] = []
        for run in -1..<max(runs, 5) {
            let large = try flatten(large, page: pages / 2), small = try flatten(small, page: 0)
            guard run >= 0 else { continue }
            onLarge.append(large)
            onSmall.append(small)
        }
        let bytes = { (url: URL) in (try? FileManager.default.attributesOfItem(atPath: url.path)[.size] as? NSNumber)?.doubleValue ?? 0 }
        print("  one pen stroke, the flatten alone, \(onLarge.count) runs: into the \(format(bytes(large) / 1e6)) MB scan \(spread(onLarge)), "
              + "into a one-page \(format(bytes(small) / 1e6)) MB scan \(spread(onSmall)): \(format(Stats(onLarge).median / Stats(onSmall).median, 2))x "
              + "(pairwise \(pairwise(onLarge, onSmall)))")
        for url in [small, scratch] { try? FileManager.default.removeItem(at: url) }
    }
}
