import ArgumentParser
import CanvasCore
import DocumentStore
import Foundation
import InkRendering
import TestSupport
#if canImport(Glibc)
import Glibc
#endif

/// Flattening one page of large documents in-process, next to the qpdf command line placing
/// the same overlay on the same page of the same file, in the same run.
struct FlattenBench: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "flatten", abstract: "Flatten one page: canvas bridge against qpdf --overlay.")

    @Option(help: "Timed runs per case; the figures are medians.") var runs = 3
    @Option(help: "Page counts to try.") var pages: [Int] = [200, 2000]
    @Option(help: "Side of each scanned page's grey image, in pixels (bytes per page: about side x side).") var imageSide = 500
    @Option(help: "Where to build the documents (a large scratch space).") var scratch = FileManager.default.temporaryDirectory.path
    @Option(help: "Edits of one page in the repeated-edit workload.") var edits = 10
    @Option(help: "Size of the scanned document whose flatten's peak memory is measured, in MB (0: skip).") var memoryDocument = 500
    @Flag(help: "Skip the table of documents by size: only the handwriting workload.") var handwritingOnly = false

    func run() throws {
        let folder = URL(fileURLWithPath: scratch).appendingPathComponent("canvasbench-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let drawing = try Drawing(strokes: [Stroke(tool: .pen, color: InkColor("red"), width: 4,
                                                    points: [InkPoint(x: 100, y: 100, pressure: 0.4), InkPoint(x: 300, y: 180, pressure: 0.9)])],
                                  texts: [TextAnnotation(text: "Checked ✓", x: 80, y: 60, fontSize: 14, color: InkColor("blue"))])
        let overlay = try OverlayPDF.write(drawing, width: 612, height: 792, to: folder.appendingPathComponent("overlay.pdf"))

        if !handwritingOnly { try table(drawing, overlay: overlay, in: folder) }
        try HandwritingWorkload(runs: runs, edits: edits, memoryDocumentMegabytes: memoryDocument, imageSide: imageSide).run(in: folder)
    }

    /// Each document of `pages` pages, text and scanned: one flatten by canvas bridge and by qpdf.
    private func table(_ drawing: Drawing, overlay: URL, in folder: URL) throws {
        print("flatten one page (the middle one), \(runs) runs each, medians; peak resident memory of one flatten in its own process")
        print("  document                       size      canvas bridge    qpdf --overlay   ratio   peak RSS ours / qpdf")
        for kind in ["text", "scanned"] {
            for count in pages {
                let name = "\(kind)-\(count).pdf"
                let document = folder.appendingPathComponent(name)
                try BenchDocuments.write(to: document, pages: count, scanned: kind == "scanned", imageSide: imageSide)
                let bytes = (try FileManager.default.attributesOfItem(atPath: document.path)[.size] as? NSNumber)?.int64Value ?? 0
                let store = try DocumentStore(folder: folder, keepRevisions: 2)
                var ours: [Double] = [], theirs: [Double] = []
                for index in 0..<runs {
                    // A different page each run, so no run re-draws another's ink.
                    let page = count / 2 + index
                    let start = ContinuousClock.now
                    _ = try store.flatten(name, page: page, drawing: drawing)
                    ours.append((ContinuousClock.now - start).seconds)
                    let out = folder.appendingPathComponent("qpdf-out.pdf")
                    let qpdf = try Spawned.run("/usr/bin/qpdf", [document.path, "--overlay", overlay.path, "--to=\(page + 1)", "--from=1", "--", out.path])
                    guard qpdf.status == 0 || qpdf.status == 3 else { throw ValidationError("qpdf exited \(qpdf.status)") }
                    theirs.append(qpdf.seconds)
                    try? FileManager.default.removeItem(at: out)
                }
                let oursMemory = try Spawned.run(Sibling.path("canvasbench"), ["flatten-one", "--folder", folder.path, "--name", name, "--page", String(count / 2 - 1)])
                let out = folder.appendingPathComponent("qpdf-out.pdf")
                let theirMemory = try Spawned.run("/usr/bin/qpdf", [document.path, "--overlay", overlay.path, "--to=\(count / 2)", "--from=1", "--", out.path])
                try? FileManager.default.removeItem(at: out)
                let mine = Stats(ours).median, qpdf = Stats(theirs).median
                print("  \(pad(name, 28)) \(pad(format(Double(bytes) / 1e6) + " MB", 9)) \(pad(format(mine * 1000) + " ms", 16)) \(pad(format(qpdf * 1000) + " ms", 16)) \(pad(format(qpdf / mine, 1) + "x", 6))   \(format(oursMemory.peakMegabytes)) MB / \(format(theirMemory.peakMegabytes)) MB")
                try? FileManager.default.removeItem(at: document)
                try? FileManager.default.removeItem(at: folder.appendingPathComponent(".canvas-revisions"))
            }
        }
        print("ratio = qpdf / canvas bridge (above 1: canvas bridge is faster)")
        print("")
    }

    private func pad(_ s: String, _ width: Int) -> String { s + String(repeating: " ", count: max(0, width - s.count)) }
}

/// One flatten in its own process, so its peak memory can be read on its own, or so a whole
/// process can be timed against the qpdf command line.
struct FlattenOne: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "flatten-one", abstract: "Flatten one page once (for memory measurements).",
                                                    shouldDisplay: false)
    @Option var folder: String
    @Option var name: String
    @Option var page: Int
    @Flag(help: "Flatten the handwriting page instead of one dot.") var handwriting = false
    @Flag(help: "Flatten the recorded handwriting page (UNIPEN words) instead of one dot.") var recorded = false
    @Option(help: "Only flatten, without the document store: write the increment to this file.") var increment: String?

    func run() throws {
        let drawing = try recorded ? RecordedHandwriting.page() : handwriting ? Handwriting.jitteryPage()
            : Drawing(strokes: [Stroke(tool: .pen, color: InkColor("red"), width: 4, points: [InkPoint(x: 100, y: 100)])])
        let document = URL(fileURLWithPath: folder).appendingPathComponent(name)
        if let increment {
            let bytes = try Flattener.increment(PDFLocation(path: document.path), page: page, adding: drawing)
            try Data(bytes).write(to: URL(fileURLWithPath: increment))
            return
        }
        let store = try DocumentStore(folder: URL(fileURLWithPath: folder), keepRevisions: 2)
        _ = try store.flatten(name, page: page, drawing: drawing)
    }
}

/// Writes a benchmark document, and the one-page overlay PDF qpdf places for a drawing, so
/// whole commands can be timed against each other outside this program.
struct BenchDocument: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "bench-document", abstract: "Write a benchmark document.",
                                                    shouldDisplay: false)
    @Option var pages = 2000
    @Flag var scanned = false
    @Option var imageSide = 500
    @Option var output: String
    @Option(help: "Also write the recorded handwriting page as a one-page PDF here (qpdf's overlay).") var overlay: String?

    func run() throws {
        try BenchDocuments.write(to: URL(fileURLWithPath: output), pages: pages, scanned: scanned, imageSide: imageSide)
        if let overlay {
            _ = try OverlayPDF.write(RecordedHandwriting.page(), width: 612, height: 792, to: URL(fileURLWithPath: overlay))
        }
    }
}

/// A child process with its wall time and peak resident memory (from wait4).
enum Spawned {
    struct Outcome {
        var status: Int32
        var seconds: Double
        var peakMegabytes: Double
    }

    static func run(_ executable: String, _ arguments: [String]) throws -> Outcome {
        var pid: pid_t = 0
        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
        let start = ContinuousClock.now
        guard posix_spawn(&pid, executable, &actions, nil, argv, environ) == 0 else {
            throw ValidationError("cannot start \(executable)")
        }
        // ru_maxrss is no use here: Linux carries the parent's high-water mark into a child
        // started with vfork. The child's own VmHWM, read while it runs, is its peak.
        var status: Int32 = 0
        var peakMegabytes = 0.0
        while true {
            let peak = Memory.of(pid).peak
            if !peak.isNaN { peakMegabytes = max(peakMegabytes, peak) }
            let done = waitpid(pid, &status, WNOHANG)
            if done == pid { break }
            if done < 0 && errno != EINTR { break }
            usleep(1_000)
        }
        let elapsed = ContinuousClock.now - start
        let exit = (status & 0x7F) == 0 ? (status >> 8) & 0xFF : 128 + (status & 0x7F)
        return Outcome(status: exit, seconds: elapsed.seconds, peakMegabytes: peakMegabytes)
    }
}

/// Documents for the benchmark: text pages, or pages that each carry one large grey image.
enum BenchDocuments {
    static func write(to url: URL, pages: Int, scanned: Bool, imageSide: Int) throws {
        _ = FileManager.default.createFile(atPath: url.path, contents: nil)
        let handle = try FileHandle(forWritingTo: url)
        defer { try? handle.close() }
        var offset = 0
        var offsets: [Int] = []
        func emit(_ bytes: [UInt8]) throws {
            try handle.write(contentsOf: bytes)
            offset += bytes.count
        }
        func object(_ body: String, stream: [UInt8]? = nil) throws {
            offsets.append(offset)
            var bytes = Array("\(offsets.count) 0 obj\n\(body)\n".utf8)
            if let stream { bytes += Array("stream\n".utf8) + stream + Array("\nendstream\n".utf8) }
            bytes += Array("endobj\n".utf8)
            try emit(bytes)
        }
        try emit(Array("%PDF-1.7\n".utf8))
        // 1 catalog, 2 pages, 3 font; then per page: page, contents, and an image when scanned.
        let perPage = scanned ? 3 : 2
        try object("<< /Type /Catalog /Pages 2 0 R >>")
        let kids = (0..<pages).map { "\(4 + perPage * $0) 0 R" }.joined(separator: " ")
        try object("<< /Type /Pages /Kids [\(kids)] /Count \(pages) >>")
        try object("<< /Type /Font /Subtype /Type1 /BaseFont /Times-Roman >>")
        var random = SystemRandomNumberGenerator()
        var pixels = [UInt8](repeating: 0, count: imageSide * imageSide)
        for page in 0..<pages {
            let first = 4 + perPage * page
            let xobject = scanned ? " /XObject << /Im0 \(first + 2) 0 R >>" : ""
            try object("<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >>\(xobject) >> /Contents \(first + 1) 0 R >>")
            var content = scanned ? "q 612 0 0 792 0 0 cm /Im0 Do Q\n" : ""
            content += "BT /F1 11 Tf 72 740 Td 14 TL\n"
            for line in 0..<(scanned ? 2 : 45) { content += "(Page \(page + 1), line \(line + 1): the quick brown fox jumps over the lazy dog.) '\n" }
            content += "ET\n"
            try object("<< /Length \(content.utf8.count) >>", stream: Array(content.utf8))
            if scanned {
                // Noise, so the image is as large on disk as a real scan's grey data.
                for index in stride(from: 0, to: pixels.count, by: 8) {
                    let value = random.next()
                    withUnsafeBytes(of: value) { word in
                        for k in 0..<min(8, pixels.count - index) { pixels[index + k] = word[k] }
                    }
                }
                try object("<< /Type /XObject /Subtype /Image /Width \(imageSide) /Height \(imageSide) /ColorSpace /DeviceGray /BitsPerComponent 8 /Length \(pixels.count) >>",
                           stream: pixels)
            }
        }
        let xref = offset
        var table = "xref\n0 \(offsets.count + 1)\n0000000000 65535 f\r\n"
        for entry in offsets { table += String(format: "%010d 00000 n\r\n", entry) }
        table += "trailer\n<< /Size \(offsets.count + 1) /Root 1 0 R >>\nstartxref\n\(xref)\n%%EOF\n"
        try emit(Array(table.utf8))
    }
}

/// The overlay qpdf places: a one-page PDF with the same ink, made by flattening the drawing
/// onto a blank page.
enum OverlayPDF {
    static func write(_ drawing: Drawing, width: Double, height: Double, to url: URL) throws -> URL {
        let blank = PDFFixtures.pdf([PDFFixtures.Page(mediaBox: [0, 0, width, height])])
        try Data(blank).write(to: url)
        let increment = try Flattener.increment(PDFLocation(path: url.path), page: 0, adding: drawing)
        try Data(blank + increment).write(to: url)
        return url
    }
}
