import ArgumentParser
import CanvasCore
import CFileCopy
import DocumentStore
import Foundation
import TestSupport
#if canImport(Glibc)
import Glibc
#endif

/// What a save costs against the size of the document it goes into: ten one-stroke edits of a
/// scan-sized document and of a small one, the disk the document folder takes afterwards (as
/// `du` counts it), and the floor a save cannot beat while it replaces the file whole (copying
/// the same file and flushing it), all measured in the same run.
struct SaveCostBench: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "save-cost",
                                                    abstract: "Save time and disk use of repeated one-stroke edits, big document against small, against the floor.")

    @Option(help: "One-stroke edits per document.") var edits = 10
    @Option(help: "Pause between two saves, in ms, not timed: a person's edits are seconds apart, and a save's freeing of the file it replaced (in the background) is not the next save's cost.")
    var pauseMs = 100
    @Option(help: "Rounds of the edits per document and mode, each on a fresh copy; the figures are medians over all rounds.") var rounds = 3
    @Option(help: "Revisions the store keeps (canvasd's default is 20).") var keepRevisions = 20
    @Option(help: "Resolution of the big document's page image (470 dpi: about 62 MB).") var bigDpi = 470
    @Option(help: "Resolution of the small document's page image (47 dpi: about 0.6 MB).") var smallDpi = 47
    @Option(help: "Copies of the big file timed for the floor; the figure is their median.") var floorRuns = 5
    @Option(help: "Where to build the documents (a large scratch space on the file system measured).")
    var scratch = FileManager.default.temporaryDirectory.path
    @Option(help: "The real page scanned into the documents.") var page = SourceTree.path("Tests/Fixtures/pdfjs/basicapi.pdf")
    @Option(help: "Recorded handwriting (UNIPEN) the edits draw, one stroke each.")
    var strokes = RecordedHandwriting.fixture.path

    func run() throws {
        let folder = URL(fileURLWithPath: scratch).appendingPathComponent("canvasbench-save-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let recorded = try RecordedHandwriting.strokes(from: URL(fileURLWithPath: strokes))
        guard recorded.count >= edits else { throw ValidationError("\(strokes) has \(recorded.count) strokes; \(edits) edits need one each") }

        let big = try ScannedDocument.make(from: page, dpi: bigDpi, in: folder, name: "scan-big.pdf")
        let small = try ScannedDocument.make(from: page, dpi: smallDpi, in: folder, name: "scan-small.pdf")
        print("save cost: \(edits) one-stroke edits (UNIPEN strokes of \(recorded.prefix(edits).map(\.count).min() ?? 0) to "
              + "\(recorded.prefix(edits).map(\.count).max() ?? 0) points, pen with pressure) of a one-page scan "
              + "(page 1 of \(URL(fileURLWithPath: page).lastPathComponent) at \(bigDpi) and \(smallDpi) dpi, raw RGB image stream), "
              + "store keeping \(keepRevisions) revisions; file system: \(FileSystem.type(of: folder.path))")

        let floorBefore = try Floor.measure(big, in: folder, runs: floorRuns)
        var results: [(String, SaveRun)] = []
        for mode in SaveMode.allCases {
            for label in ["big", "small"] {
                results.append(("\(label), \(mode.rawValue)", SaveRun()))
            }
        }
        // Rounds alternate the cases, so a slow spell of a shared machine falls on all of them.
        for _ in 0..<max(1, rounds) {
            var index = 0
            for mode in SaveMode.allCases {
                for document in [big, small] {
                    let run = try SaveRun.measure(document, edits: edits, strokes: recorded, keep: keepRevisions, mode: mode, pauseMs: pauseMs, in: folder)
                    results[index].1.merge(run)
                    index += 1
                }
            }
        }
        let floorAfter = try Floor.measure(big, in: folder, runs: floorRuns)
        // The flatten alone (qpdf reading the file, the ink drawn, the update made), no save.
        var flattenOnly: [String: Double] = [:]
        for (label, document) in [("big", big), ("small", small)] {
            var times: [Double] = []
            for edit in 0..<edits {
                let drawing = try RecordedStrokes.drawing(recorded[edit], shift: Double(edit) * 50)
                let start = ContinuousClock.now
                _ = try Flattener.increment(PDFLocation(path: document.path), page: 0, adding: drawing)
                times.append((ContinuousClock.now - start).seconds)
            }
            flattenOnly[label] = Stats(times).median
        }
        let floor = Floor(copy: min(floorBefore.copy, floorAfter.copy), copyFileRange: min(floorBefore.copyFileRange, floorAfter.copyFileRange))

        print("  document         size        saves 2-N median   max (all)  folder after      final + original   folder / (final + original)")
        for (label, run) in results {
            print("  \(pad(label, 16)) \(pad(megabytes(run.originalBytes), 11)) \(pad(milliseconds(run.median), 17)) "
                  + "\(pad(milliseconds(run.maximum), 10)) \(pad(megabytes(run.folderBytes), 16)) "
                  + "\(pad(megabytes(run.finalBytes + run.originalBytes), 18)) \(format(Double(run.folderBytes) / Double(run.finalBytes + run.originalBytes), 2))")
        }
        let bigRun = results[0].1, smallRun = results[1].1, bigAppend = results[2].1, smallAppend = results[3].1
        let floorTime = min(floor.copy, floor.copyFileRange)
        print("  floor: copy + fsync of the big file \(milliseconds(floor.copy)) (read/write), \(milliseconds(floor.copyFileRange)) (copy_file_range); "
              + "the floor used: \(milliseconds(floorTime))")
        print("  the flatten alone (no save): big \(milliseconds(flattenOnly["big"]!)), small \(milliseconds(flattenOnly["small"]!))")
        print("  replace: big save / (floor + small save) = \(format(bigRun.median / (floorTime + smallRun.median), 2))x (target 1.3x); "
              + "big save / small save = \(format(bigRun.median / smallRun.median, 2))x")
        print("  append: big save / small save = \(format(bigAppend.median / smallAppend.median, 2))x (target 2x); "
              + "big append / big replace = \(format(bigAppend.median / bigRun.median, 2))x")
        for (label, run) in results {
            let increment = Double(run.finalBytes - run.originalBytes) / Double(edits)
            func median(_ value: (SaveCost) -> Double) -> Double { Stats(run.costs.map(value)).median }
            print("  \(label): folder before the edits \(megabytes(run.folderBeforeBytes)); per save the file grew "
                  + "\(format(increment / 1024, 1)) KiB")
            guard !run.costs.isEmpty else { continue }
            print("    saves 2 to \(edits), medians: hashed \(format(median { Double($0.bytesHashed) } / 1024, 1)) KiB "
                  + "(\(format(median { Double($0.bytesHashed) } / increment, 2))x the increment), copied \(megabytes(Int64(median { Double($0.bytesCopied) }))) "
                  + "by \(run.costs.last!.method == .none ? "nothing" : run.costs.last!.method.rawValue), cloned \(megabytes(Int64(median { Double($0.bytesCloned) }))), "
                  + "written \(format(median { Double($0.bytesWritten) } / 1024, 1)) KiB")
            print("    where the time goes: writing (copy and append) \(milliseconds(median { $0.writing.seconds })), "
                  + "fsync \(milliseconds(median { $0.flushing.seconds })), keeping (the history's line and log flushed, rename, folder fsyncs, prune) "
                  + "\(milliseconds(median { $0.keeping.seconds })), the rest (reading the PDF, drawing the ink, locking) "
                  + "\(milliseconds(run.median - median { ($0.writing + $0.flushing + $0.keeping).seconds }))")
            print("    first save (median of the rounds): \(milliseconds(Stats(run.firsts).median)), hashed \(megabytes(run.first.bytesHashed)) "
                  + "(a document no save had kept is hashed once, whole, for its record)")
        }
    }

    private func pad(_ s: String, _ width: Int) -> String { s + String(repeating: " ", count: max(0, width - s.count)) }
    private func megabytes(_ bytes: Int64) -> String { format(Double(bytes) / 1e6, 2) + " MB" }
    private func milliseconds(_ seconds: Double) -> String { format(seconds * 1000, 1) + " ms" }
}

/// Paths in the source tree this binary was built from.
enum SourceTree {
    static func path(_ relative: String) -> String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent(relative).path
    }
}

/// The recorded strokes as the edits draw them.
enum RecordedStrokes {
    /// One recorded stroke as a pen stroke on a Letter page, three times its recorded size.
    static func drawing(_ stroke: [(x: Double, y: Double, pressure: Double)], shift: Double) throws -> Drawing {
        try Drawing(strokes: [Stroke(tool: .pen, color: InkColor("#1F3A93"), width: 2,
                                     points: stroke.map { try InkPoint(x: 60 + 3 * $0.0, y: 100 + shift + 3 * $0.1, pressure: $0.2) })])
    }
}

/// A one-page PDF whose page is a raw RGB image of a real page, rendered by pdftoppm: a scan's
/// size and shape (one large image stream), made of a page nobody here wrote.
enum ScannedDocument {
    static func make(from source: String, dpi: Int, in folder: URL, name: String) throws -> URL {
        let prefix = folder.appendingPathComponent("render-\(dpi)")
        let render = try Spawned.run("/usr/bin/pdftoppm", ["-r", String(dpi), "-f", "1", "-l", "1", "-singlefile", source, prefix.path])
        guard render.status == 0 else { throw ValidationError("pdftoppm could not render \(source) (exit \(render.status))") }
        let ppm = prefix.appendingPathExtension("ppm")
        defer { try? FileManager.default.removeItem(at: ppm) }
        let bytes = try Data(contentsOf: ppm)
        // P6 header: magic, width, height, maxval, each after whitespace, then one byte of it.
        var fields: [String] = [], index = 0, field = ""
        while fields.count < 4 && index < bytes.count {
            let byte = bytes[index]
            index += 1
            if byte == 0x20 || byte == 0x0A || byte == 0x0D || byte == 0x09 {
                if !field.isEmpty { fields.append(field); field = "" }
            } else {
                field.append(Character(UnicodeScalar(byte)))
            }
        }
        guard fields.count == 4, fields[0] == "P6", let width = Int(fields[1]), let height = Int(fields[2]) else {
            throw ValidationError("pdftoppm wrote no P6 image")
        }
        let pixels = bytes[index...]
        let url = folder.appendingPathComponent(name)
        var out = Array("%PDF-1.7\n%\u{e2}\u{e3}\u{cf}\u{d3}\n".utf8)
        var offsets: [Int] = []
        func object(_ body: String, stream: Data? = nil) {
            offsets.append(out.count)
            out += Array("\(offsets.count) 0 obj\n\(body)\n".utf8)
            if let stream { out += Array("stream\n".utf8) + Array(stream) + Array("\nendstream\n".utf8) }
            out += Array("endobj\n".utf8)
        }
        let content = "q 612 0 0 792 0 0 cm /Im0 Do Q\n"
        object("<< /Type /Catalog /Pages 2 0 R >>")
        object("<< /Type /Pages /Kids [3 0 R] /Count 1 >>")
        object("<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /XObject << /Im0 5 0 R >> >> /Contents 4 0 R >>")
        object("<< /Length \(content.utf8.count) >>", stream: Data(content.utf8))
        object("<< /Type /XObject /Subtype /Image /Width \(width) /Height \(height) /ColorSpace /DeviceRGB /BitsPerComponent 8 /Length \(pixels.count) >>",
               stream: pixels)
        let xref = out.count
        out += Array("xref\n0 \(offsets.count + 1)\n0000000000 65535 f\r\n".utf8)
        for offset in offsets { out += Array(String(format: "%010d 00000 n\r\n", offset).utf8) }
        out += Array("trailer\n<< /Size \(offsets.count + 1) /Root 1 0 R >>\nstartxref\n\(xref)\n%%EOF\n".utf8)
        try Data(out).write(to: url)
        return url
    }
}

/// Ten saves into one copy of a document, in a folder of its own.
struct SaveRun {
    var times: [Double] = []
    /// What each save after the first read and wrote (the first of a document never saved
    /// also hashes it once, whole, for its record).
    var costs: [SaveCost] = []
    var first = SaveCost()
    var originalBytes: Int64 = 0
    var finalBytes: Int64 = 0
    var folderBeforeBytes: Int64 = 0
    var folderBytes: Int64 = 0

    /// Saves 2 to N of every round (the first of each round also hashes the document whole).
    var later: [Double] = []
    var firsts: [Double] = []

    var median: Double { Stats(later).median }

    mutating func merge(_ round: SaveRun) {
        times += round.times
        later += round.times.dropFirst()
        firsts.append(round.times.first ?? .nan)
        costs += round.costs
        first = round.first
        (originalBytes, finalBytes, folderBeforeBytes, folderBytes) = (round.originalBytes, round.finalBytes, round.folderBeforeBytes, round.folderBytes)
    }
    var maximum: Double { times.max() ?? .nan }

    static func measure(_ document: URL, edits: Int, strokes: [[(x: Double, y: Double, pressure: Double)]], keep: Int, mode: SaveMode,
                        pauseMs: Int, in scratch: URL) throws -> SaveRun {
        let folder = scratch.appendingPathComponent("folder-\(document.deletingPathExtension().lastPathComponent)-\(mode.rawValue)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let name = "document.pdf"
        try FileManager.default.copyItem(at: document, to: folder.appendingPathComponent(name))
        let store = try DocumentStore(folder: folder, keepRevisions: keep, saveMode: mode)
        var run = SaveRun()
        run.originalBytes = FileSystem.size(folder.appendingPathComponent(name).path)
        run.folderBeforeBytes = TestSupport.diskUse(folder.path)
        for edit in 0..<edits {
            let drawing = try RecordedStrokes.drawing(strokes[edit], shift: Double(edit) * 50)
            if pauseMs > 0 { usleep(UInt32(pauseMs) * 1000) }
            let start = ContinuousClock.now
            _ = try store.flatten(name, page: 0, drawing: drawing)
            run.times.append((ContinuousClock.now - start).seconds)
            if edit == 0 { run.first = store.lastSaveCost } else { run.costs.append(store.lastSaveCost) }
        }
        run.finalBytes = FileSystem.size(folder.appendingPathComponent(name).path)
        run.folderBytes = TestSupport.diskUse(folder.path)
        return run
    }
}

/// What replacing a file whole cannot go below: copying it and flushing the copy.
struct Floor {
    var copy: Double
    var copyFileRange: Double

    static func measure(_ file: URL, in folder: URL, runs: Int) throws -> Floor {
        var copies: [Double] = [], ranges: [Double] = []
        for index in 0..<runs {
            copies.append(try time(file, to: folder.appendingPathComponent("floor-\(index)"), kernel: false))
            ranges.append(try time(file, to: folder.appendingPathComponent("floor-range-\(index)"), kernel: true))
        }
        return Floor(copy: Stats(copies).median, copyFileRange: Stats(ranges).median)
    }

    /// Copies `file` to `target` and flushes it; the seconds that took.
    private static func time(_ file: URL, to target: URL, kernel: Bool) throws -> Double {
        let input = open(file.path, O_RDONLY | O_CLOEXEC)
        guard input >= 0 else { throw ValidationError("open \(file.path): errno \(errno)") }
        defer { close(input) }
        let output = open(target.path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
        guard output >= 0 else { throw ValidationError("create \(target.path): errno \(errno)") }
        defer {
            close(output)
            unlink(target.path)
        }
        let start = ContinuousClock.now
        if kernel {
            var from: Int64 = 0, to: Int64 = 0
            while true {
                let copied = canvas_copy_range(input, &from, output, &to, 1 << 30)
                guard copied >= 0 else { throw ValidationError("copy_file_range: errno \(errno)") }
                if copied == 0 { break }
            }
        } else {
            var buffer = [UInt8](repeating: 0, count: 1 << 20)
            while true {
                let count = buffer.withUnsafeMutableBytes { read(input, $0.baseAddress, $0.count) }
                guard count >= 0 else { throw ValidationError("read: errno \(errno)") }
                if count == 0 { break }
                var done = 0
                while done < count {
                    let written = buffer.withUnsafeBytes { write(output, $0.baseAddress! + done, count - done) }
                    guard written > 0 else { throw ValidationError("write: errno \(errno)") }
                    done += written
                }
            }
        }
        guard fsync(output) == 0 else { throw ValidationError("fsync: errno \(errno)") }
        return (ContinuousClock.now - start).seconds
    }
}

/// A file's size as `ls` gives it, and the file system it is on (`du` is `TestSupport.diskUse`).
enum FileSystem {
    static func size(_ path: String) -> Int64 {
        var status = stat()
        return lstat(path, &status) == 0 ? Int64(status.st_size) : 0
    }

    static func type(of path: String) -> String {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return "unknown" }
        defer { close(fd) }
        let type = canvas_file_system_type(fd)
        switch UInt(bitPattern: Int(type)) {
        case 0xEF53: return "ext4"
        case 0x58465342: return "xfs"
        case 0x9123683E: return "btrfs"
        case 0x01021994: return "tmpfs"
        default: return String(format: "type 0x%lx", UInt(bitPattern: Int(type)))
        }
    }
}
