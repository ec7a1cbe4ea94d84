import CanvasCore
@testable import DocumentStore
import Foundation
import TestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// A one-page scan-like PDF: a grey image of `imageBytes` bytes of noise, hex-encoded so the
/// fixture writer can take it as text (the file is about twice that).
private func scanPDF(imageBytes: Int, seed: UInt64 = 5) -> [UInt8] {
    var state = seed
    var hex = ""
    hex.reserveCapacity(imageBytes * 2 + 1)
    let digits = Array("0123456789abcdef")
    for _ in 0..<imageBytes {
        state = state &* 6364136223846793005 &+ 1442695040888963407
        let byte = Int(state >> 56)
        hex.append(digits[byte >> 4])
        hex.append(digits[byte & 15])
    }
    let side = Int(Double(imageBytes).squareRoot())
    let content = "q 612 0 0 792 0 0 cm /Im0 Do Q"
    return PDFFixtures.assemble([
        "<< /Type /Catalog /Pages 2 0 R >>",
        "<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /XObject << /Im0 5 0 R >> >> /Contents 4 0 R >>",
        "<< /Length \(content.utf8.count) >>\nstream\n\(content)\nendstream",
        "<< /Type /XObject /Subtype /Image /Width \(side) /Height \(side) /ColorSpace /DeviceGray /BitsPerComponent 8 /Filter /ASCIIHexDecode /Length \(side * side * 2 + 1) >>\nstream\n\(hex.prefix(side * side * 2))>\nendstream",
    ])
}

private func smallPDF() -> [UInt8] { PDFFixtures.pdf([.init(content: "0 g 10 10 50 50 re f")]) }


private func history(_ folder: URL, _ name: String) throws -> [String] {
    try FileManager.default.contentsOfDirectory(atPath: folder.appendingPathComponent(".canvas-revisions/\(name)").path).sorted()
}

/// The files of a history that hold bytes (not records or marks).
private func files(_ folder: URL, _ name: String) throws -> [String] {
    try history(folder, name).filter { !$0.contains(".rev.") && !$0.contains(".madeby.") }
}

private func whole(_ store: DocumentStore, _ name: String, _ revision: Int? = nil) throws -> DocumentBytes {
    try store.bytes(name, revision: revision, offset: 0, length: 1 << 30)
}

private func stroke(_ index: Int) throws -> Drawing {
    Drawing(strokes: [try Stroke(tool: .pen, color: InkColor("blue"), width: 2,
                                 points: (0..<40).map { try InkPoint(x: 40 + Double($0) * 4, y: 60 + Double(index) * 30 + Double($0 % 5), pressure: 0.5) })])
}

@Suite("Revisions that share their bytes", .serialized)
struct SharedRevisionsTests {
    @Test("ten one-stroke edits of a scan take the final file and the original on disk, not ten copies")
    func diskUseOfTenEdits() throws {
        let folder = try freshFolder("shared-disk")
        let original = scanPDF(imageBytes: 2 << 20)
        try Data(original).write(to: folder.appendingPathComponent("scan.pdf"))
        let store = try DocumentStore(folder: folder)
        for edit in 0..<10 { _ = try store.flatten("scan.pdf", page: 0, drawing: stroke(edit)) }
        let final = Int64(try Data(contentsOf: folder.appendingPathComponent("scan.pdf")).count)
        let used = diskUse(folder.path)
        #expect(Double(used) <= 1.05 * Double(final + Int64(original.count)),
                "the folder takes \(used) bytes for a final file of \(final) and an original of \(original.count)")
        // One line, one file: the document itself.
        #expect(try files(folder, "scan.pdf") == ["11-1.pdf"])
        #expect(try store.revisions("scan.pdf").map(\.revision) == Array(1...11))
    }

    @Test("every kept revision reads back byte-identical, a prefix of the current file, with the hash its save answered")
    func revisionsArePrefixes() throws {
        let folder = try freshFolder("shared-prefix")
        let original = smallPDF()
        try Data(original).write(to: folder.appendingPathComponent("d.pdf"))
        let store = try DocumentStore(folder: folder)
        var answered = [1: DocumentStore.sha256(original)]
        for edit in 0..<8 {
            let saved = try store.flatten("d.pdf", page: 0, drawing: stroke(edit))
            answered[saved.revision] = saved.sha256
        }
        let current = Array(try Data(contentsOf: folder.appendingPathComponent("d.pdf")))
        var previous = 0
        for summary in try store.revisions("d.pdf") {
            let kept = try whole(store, "d.pdf", summary.revision)
            #expect(kept.sha256 == answered[summary.revision] && summary.sha256 == kept.sha256, "revision \(summary.revision)")
            #expect(DocumentStore.sha256(kept.bytes) == kept.sha256, "revision \(summary.revision)")
            #expect(Array(current.prefix(kept.bytes.count)) == kept.bytes, "revision \(summary.revision) is not a prefix")
            #expect(kept.bytes.count > previous && summary.bytes == Int64(kept.bytes.count))
            previous = kept.bytes.count
        }
        #expect(try whole(store, "d.pdf", 1).bytes == original)
    }

    @Test("a save hashes at most twice its increment and copies only the bytes it shares")
    func hashedPerSave() throws {
        let folder = try freshFolder("shared-hash")
        try Data(scanPDF(imageBytes: 1 << 20)).write(to: folder.appendingPathComponent("scan.pdf"))
        let store = try DocumentStore(folder: folder)
        // The first save of a document never saved hashes it once, whole, for its record.
        _ = try store.flatten("scan.pdf", page: 0, drawing: stroke(0))
        for edit in 1..<6 {
            let before = Int64(try Data(contentsOf: folder.appendingPathComponent("scan.pdf")).count)
            _ = try store.flatten("scan.pdf", page: 0, drawing: stroke(edit))
            let after = Int64(try Data(contentsOf: folder.appendingPathComponent("scan.pdf")).count)
            let cost = store.lastSaveCost
            #expect(cost.bytesHashed <= 2 * (after - before), "hashed \(cost.bytesHashed) for an increment of \(after - before)")
            #expect(cost.bytesCopied + cost.bytesCloned == before)
            #expect(cost.bytesWritten == after - before)
            #expect(cost.method != .none)
        }
    }

    @Test("the first save of a document read before (its hash remembered) does not hash it again")
    func firstSaveAfterRead() throws {
        let folder = try freshFolder("shared-first-save")
        try Data(scanPDF(imageBytes: 512 << 10)).write(to: folder.appendingPathComponent("scan.pdf"))
        // Only a file unchanged for some seconds is remembered (see ContentHashes).
        sleep(3)
        let store = try DocumentStore(folder: folder)
        let before = Int64(try store.summary("scan.pdf").revision == 1 ? Data(contentsOf: folder.appendingPathComponent("scan.pdf")).count : 0)
        _ = try store.flatten("scan.pdf", page: 0, drawing: stroke(0))
        let after = Int64(try Data(contentsOf: folder.appendingPathComponent("scan.pdf")).count)
        #expect(store.lastSaveCost.bytesHashed <= 2 * (after - before), "hashed \(store.lastSaveCost.bytesHashed)")
    }

    @Test("SHA-256 continued from a saved state equals the hash of the whole, at every cut around a block")
    func hashContinuation() {
        var random = SystemRandomNumberGenerator()
        let bytes = (0..<700).map { _ in UInt8.random(in: 0...255, using: &random) }
        let expected = DocumentStore.sha256(bytes)
        for cut in [0, 1, 63, 64, 65, 127, 128, 129, 500, 699, 700] {
            var first = SHA256Hasher()
            first.update(Array(bytes[..<cut]))
            let state = first.midstate
            #expect(state.length == Int64(cut - cut % 64))
            let parsed = SHA256Midstate(hex: Substring(state.hex), coveringAtMost: Int64(cut))
            #expect(parsed == state)
            var resumed = SHA256Hasher(resuming: parsed!)
            resumed.update(Array(bytes[Int(state.length)...]))
            #expect(resumed.bytesFed == Int64(bytes.count) - state.length)
            #expect(resumed.finish() == expected, "cut at \(cut)")
        }
    }

    @Test("a history the old store wrote (a whole file per revision) is read as it is; the first save migrates only the current one")
    func oldHistory() throws {
        let folder = try freshFolder("shared-legacy")
        let url = folder.appendingPathComponent("d.pdf")
        // What the old store left after two saves: 1.pdf and 2.pdf whole, 3.pdf a link to the document.
        let v1 = smallPDF()
        try Data(v1).write(to: url)
        let v2 = v1 + (try Flattener.increment(PDFLocation(path: url.path), page: 0, adding: stroke(0)))
        try Data(v2).write(to: url)
        let v3 = v2 + (try Flattener.increment(PDFLocation(path: url.path), page: 0, adding: stroke(1)))
        let revisions = folder.appendingPathComponent(".canvas-revisions/d.pdf")
        try FileManager.default.createDirectory(at: revisions, withIntermediateDirectories: true)
        try Data(v1).write(to: revisions.appendingPathComponent("1.pdf"))
        try Data(v2).write(to: revisions.appendingPathComponent("2.pdf"))
        try Data(v3).write(to: url)
        #expect(link(url.path, revisions.appendingPathComponent("3.pdf").path) == 0)
        let key = String(repeating: "ab", count: 8)
        let mark = RevisionHistory.Mark(revision: 3, key: key, pageCount: 1, sha256: DocumentStore.sha256(v3))
        #expect(FileManager.default.createFile(atPath: revisions.appendingPathComponent(mark.name).path, contents: nil))

        let store = try DocumentStore(folder: folder)
        #expect(try store.summary("d.pdf").revision == 3)
        #expect(try store.revisions("d.pdf").map(\.sha256) == [v1, v2, v3].map(DocumentStore.sha256))
        for (revision, bytes) in [(1, v1), (2, v2), (3, v3)] { #expect(try whole(store, "d.pdf", revision).bytes == bytes) }
        // Reading changed nothing.
        #expect(try history(folder, "d.pdf") == ["1.pdf", "2.pdf", "3.madeby.\(key).1.\(DocumentStore.sha256(v3))", "3.pdf"])
        // The old store's mark still answers its request.
        #expect(try store.flatten("d.pdf", page: 0, drawing: stroke(1), madeBy: key).revision == 3)

        let saved = try store.flatten("d.pdf", page: 0, drawing: stroke(2))
        #expect(saved.revision == 4)
        let v4 = Array(try Data(contentsOf: url))
        #expect(Array(v4.prefix(v3.count)) == v3 && saved.sha256 == DocumentStore.sha256(v4))
        for (revision, bytes) in [(1, v1), (2, v2), (3, v3), (4, v4)] {
            let kept = try whole(store, "d.pdf", revision)
            #expect(kept.bytes == bytes && kept.sha256 == DocumentStore.sha256(bytes), "revision \(revision)")
        }
        // 3.pdf is now the beginning of 4-3.pdf; 1.pdf and 2.pdf stay as they were until pruned.
        #expect(try files(folder, "d.pdf") == ["1.pdf", "2.pdf", "4-3.pdf"])
        #expect(try history(folder, "d.pdf").compactMap { RevisionHistory.Record(name: $0)?.revision }.sorted() == [3, 4])
        #expect(try store.restore("d.pdf", revision: 2).sha256 == DocumentStore.sha256(v2))
        #expect(try Data(contentsOf: url) == Data(v2))
    }

    @Test("a restore starts a line of its own; pruning frees only files no kept revision needs")
    func restoreAndPrune() throws {
        let folder = try freshFolder("shared-restore")
        let url = folder.appendingPathComponent("d.pdf")
        try Data(smallPDF()).write(to: url)
        let store = try DocumentStore(folder: folder, keepRevisions: 3)
        _ = try store.flatten("d.pdf", page: 0, drawing: stroke(0))
        _ = try store.flatten("d.pdf", page: 0, drawing: stroke(1))
        let restored = try store.restore("d.pdf", revision: 1)
        let first = try store.revisions("d.pdf").first?.sha256
        #expect(restored.revision == 4 && restored.sha256 == first)
        #expect(try Data(contentsOf: url) == Data(smallPDF()))
        // Revision 1 lives in 3-1.pdf (its line's file), revision 4 in its own.
        #expect(try files(folder, "d.pdf") == ["3-1.pdf", "4.pdf"])
        _ = try store.flatten("d.pdf", page: 0, drawing: stroke(2))
        let six = try store.flatten("d.pdf", page: 0, drawing: stroke(3))
        #expect(try store.revisions("d.pdf").map(\.revision) == [1, 5, 6])
        // Revision 1 still needs line 1's file; revisions 5 and 6 are lengths of 6-4.pdf.
        #expect(try files(folder, "d.pdf") == ["3-1.pdf", "6-4.pdf"])
        #expect(try whole(store, "d.pdf", 1).bytes == smallPDF())
        #expect(try whole(store, "d.pdf").sha256 == six.sha256)
        #expect(throws: DocumentError.revisionNotFound(name: "d.pdf", revision: 3)) { try store.restore("d.pdf", revision: 3) }
    }

    @Test(".yianazip saves keep a whole file each (the metadata in front changes), pruned as before")
    func containers() throws {
        let folder = try freshFolder("shared-yianazip")
        let metadata = #"{"title": "T", "created": 0, "modified": 0, "page_count": 1, "tags": [], "ocr_completed": false, "full_text": ""}"#
        let original = Array(metadata.utf8) + YianaContainer.separator + smallPDF()
        try Data(original).write(to: folder.appendingPathComponent("m.yianazip"))
        let store = try DocumentStore(folder: folder, keepRevisions: 3)
        var answered: [Int: String] = [1: DocumentStore.sha256(original)]
        for edit in 0..<5 {
            let saved = try store.flatten("m.yianazip", page: 0, drawing: stroke(edit))
            answered[saved.revision] = saved.sha256
        }
        #expect(try files(folder, "m.yianazip") == ["1.yianazip", "5.yianazip", "6.yianazip"])
        for summary in try store.revisions("m.yianazip") {
            let kept = try whole(store, "m.yianazip", summary.revision)
            #expect(DocumentStore.sha256(kept.bytes) == answered[summary.revision])
        }
        #expect(try whole(store, "m.yianazip", 1).bytes == original)
    }
}

@Suite("Copies and readers of the folder", .serialized)
struct FolderReaderTests {
    @Test("a reader of the folder reading the document while saves replace it sees the old file or a new one, never a torn one")
    func noTornFile() throws {
        let folder = try freshFolder("shared-torn")
        let url = folder.appendingPathComponent("scan.pdf")
        let original = scanPDF(imageBytes: 512 << 10)
        try Data(original).write(to: url)
        let store = try DocumentStore(folder: folder)
        // A thread of its own: the tests' cooperative pool may be busy with other suites.
        let seen = SeenHashes()
        let reader = Thread {
            while !seen.stopped {
                if let data = try? Data(contentsOf: url) { seen.add(DocumentStore.sha256(Array(data))) }
            }
        }
        reader.start()
        while seen.count == 0 { usleep(1_000) }
        var known: Set<String> = [DocumentStore.sha256(original)]
        for edit in 0..<20 { known.insert(try store.flatten("scan.pdf", page: 0, drawing: stroke(edit)).sha256) }
        seen.stop()
        while !reader.isFinished { usleep(1_000) }
        let all = seen.all
        #expect(all.count > 1)
        #expect(all.allSatisfy(known.contains), "a read saw bytes that were no revision")
    }

    @Test("a prefix copied by the least the file system allows has exactly the source's bytes, and the copy's end is where the caller appends")
    func copyPrefix() throws {
        let folder = try freshFolder("shared-copy")
        let bytes = (0..<300_000).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ $0 >> 8) }
        try Data(bytes).write(to: folder.appendingPathComponent("source"))
        let directory = try Directory.open(folder.path)
        let source = try directory.openForReading("source")
        defer { try? source.close() }
        for length in [0, 1, 4095, 4096, 200_001, 300_000] {
            let out = try directory.create("out-\(length)", readable: true)
            defer { try? out.close() }
            var cost = SaveCost()
            try FileCopy.copyPrefix(source, length: Int64(length), to: out, &cost)
            _ = try out.writeAll(Array("tail".utf8))
            #expect(try Data(contentsOf: folder.appendingPathComponent("out-\(length)")) == Data(bytes.prefix(length) + Array("tail".utf8)))
            #expect(cost.bytesCopied + cost.bytesCloned == Int64(length))
        }
    }
}

/// The states a save killed at each of its steps leaves, made by hand, then read and saved over.
@Suite("Killed saves of shared revisions", .serialized)
struct KilledSharedSaveTests {
    /// A document saved `saves` times, and each revision's bytes.
    func saved(_ label: String, saves: Int) throws -> (DocumentStore, URL, [Int: [UInt8]]) {
        let folder = try freshFolder(label)
        try Data(smallPDF()).write(to: folder.appendingPathComponent("d.pdf"))
        let store = try DocumentStore(folder: folder)
        var bytes = [1: smallPDF()]
        for edit in 0..<saves {
            let summary = try store.flatten("d.pdf", page: 0, drawing: stroke(edit))
            bytes[summary.revision] = Array(try Data(contentsOf: folder.appendingPathComponent("d.pdf")))
        }
        return (store, folder, bytes)
    }

    func check(_ store: DocumentStore, _ bytes: [Int: [UInt8]], current: Int) throws {
        #expect(try store.summary("d.pdf").revision == current)
        #expect(try store.revisions("d.pdf").map(\.revision) == Array(1...current))
        for revision in 1...current {
            let kept = try whole(store, "d.pdf", revision)
            #expect(kept.bytes == bytes[revision] && kept.sha256 == DocumentStore.sha256(kept.bytes), "revision \(revision)")
        }
    }

    /// Puts a revision's bytes back as the document, linked as `entry` in the history.
    func putBack(_ folder: URL, _ entry: String, _ bytes: [UInt8]) throws {
        let spare = folder.appendingPathComponent(".canvas-revisions/d.pdf/.spare")
        try Data(bytes).write(to: spare)
        #expect(link(spare.path, folder.appendingPathComponent(".canvas-revisions/d.pdf/\(entry)").path) == 0)
        #expect(rename(spare.path, folder.appendingPathComponent("d.pdf").path) == 0)
    }

    @Test("killed after keeping its file and record, before the rename: the old revision is current, the next save takes the number")
    func beforeRename() throws {
        var (store, folder, bytes) = try saved("killed-before-rename", saves: 3)
        // Revision 4 was kept (4.pdf and its record) but the document is still revision 3.
        try FileManager.default.removeItem(at: folder.appendingPathComponent(".canvas-revisions/d.pdf/4-1.pdf"))
        try putBack(folder, "3-1.pdf", bytes[3]!)
        try Data(bytes[4]!).write(to: folder.appendingPathComponent(".canvas-revisions/d.pdf/4-1.pdf"))
        bytes[4] = nil
        try check(store, bytes, current: 3)
        let saved = try store.flatten("d.pdf", page: 0, drawing: stroke(9))
        #expect(saved.revision == 4)
        bytes[4] = Array(try Data(contentsOf: folder.appendingPathComponent("d.pdf")))
        #expect(DocumentStore.sha256(bytes[4]!) == saved.sha256)
        try check(store, bytes, current: 4)
        #expect(try files(folder, "d.pdf") == ["4-1.pdf"])
        store = try DocumentStore(folder: folder)
        try check(store, bytes, current: 4)
    }

    @Test("killed after the rename, before pruning: the extended file stays until the next save, every revision reads the same")
    func beforePrune() throws {
        let (store, folder, bytes) = try saved("killed-before-prune", saves: 3)
        let spare = folder.appendingPathComponent(".canvas-revisions/d.pdf/3-1.pdf")
        try Data(bytes[3]!).write(to: spare)
        try check(store, bytes, current: 4)
        var all = bytes
        let saved = try store.flatten("d.pdf", page: 0, drawing: stroke(9))
        all[5] = Array(try Data(contentsOf: folder.appendingPathComponent("d.pdf")))
        #expect(saved.revision == 5 && saved.sha256 == DocumentStore.sha256(all[5]!))
        try check(store, all, current: 5)
        #expect(try files(folder, "d.pdf") == ["5-1.pdf"])
    }

    @Test("killed while pruning, a record gone before its file: that revision is pruned, every other reads the same, the next save removes the file")
    func midPrune() throws {
        var (store, folder, bytes) = try saved("killed-mid-prune", saves: 3)
        let history = folder.appendingPathComponent(".canvas-revisions/d.pdf")
        // Revision 2's file back, its record gone: what a pruning of 2 killed half-way leaves.
        try Data(bytes[2]!).write(to: history.appendingPathComponent("2-1.pdf"))
        let record = try FileManager.default.contentsOfDirectory(atPath: history.path).first { RevisionHistory.Record(name: $0)?.revision == 2 }!
        try FileManager.default.removeItem(at: history.appendingPathComponent(record))
        #expect(try store.revisions("d.pdf").map(\.revision) == [1, 3, 4])
        bytes[2] = nil
        for revision in [1, 3, 4] {
            let kept = try whole(store, "d.pdf", revision)
            #expect(kept.bytes == bytes[revision] && kept.sha256 == DocumentStore.sha256(kept.bytes), "revision \(revision)")
        }
        #expect(throws: DocumentError.revisionNotFound(name: "d.pdf", revision: 2)) { try store.restore("d.pdf", revision: 2) }
        _ = try store.flatten("d.pdf", page: 0, drawing: stroke(7))
        #expect(try files(folder, "d.pdf") == ["5-1.pdf"])
    }

    @Test("a half-written save's temporary file is never read, and the next writer removes it")
    func temporary() throws {
        let (store, folder, bytes) = try saved("killed-temporary", saves: 2)
        let temporary = folder.appendingPathComponent(".canvas-revisions/d.pdf/.tmp.99999.7")
        try Data(bytes[3]!.prefix(100)).write(to: temporary)
        try check(store, bytes, current: 3)
        _ = try store.flatten("d.pdf", page: 0, drawing: stroke(5))
        #expect(!FileManager.default.fileExists(atPath: temporary.path))
    }
}

/// Saves that append the update in place (`SaveMode.append`), and what a killed one leaves.
@Suite("Saves appended in place", .serialized)
struct AppendInPlaceTests {
    func setUp(_ label: String, _ original: [UInt8] = smallPDF()) throws -> (DocumentStore, URL) {
        let folder = try freshFolder(label)
        try Data(original).write(to: folder.appendingPathComponent("d.pdf"))
        return (try DocumentStore(folder: folder, saveMode: .append), folder)
    }

    func current(_ folder: URL) throws -> [UInt8] { Array(try Data(contentsOf: folder.appendingPathComponent("d.pdf"))) }

    @Test("ten appended saves copy nothing, write their increments, keep one file, and every revision reads back with its hash")
    func appended() throws {
        let original = scanPDF(imageBytes: 1 << 20)
        let (store, folder) = try setUp("append-saves", original)
        var answered: [Int: [UInt8]] = [1: original]
        var identity: ino_t = 0
        for edit in 0..<10 {
            let before = try current(folder).count
            let saved = try store.flatten("d.pdf", page: 0, drawing: stroke(edit))
            let after = try current(folder)
            answered[saved.revision] = after
            #expect(saved.sha256 == DocumentStore.sha256(after))
            let cost = store.lastSaveCost
            #expect(cost.bytesCopied == 0 && cost.bytesCloned == 0 && cost.bytesWritten == Int64(after.count - before))
            if edit > 0 { #expect(cost.bytesHashed <= 2 * Int64(after.count - before)) }
            var status = stat()
            #expect(lstat(folder.appendingPathComponent("d.pdf").path, &status) == 0)
            if edit == 0 { identity = status.st_ino } else { #expect(status.st_ino == identity, "the document was replaced, not appended to") }
        }
        #expect(try files(folder, "d.pdf") == ["1.pdf"])
        #expect(!(try history(folder, "d.pdf")).contains { $0.contains(".append.") }, "an intent outlived its save")
        #expect(try store.revisions("d.pdf").map(\.revision) == Array(1...11))
        for summary in try store.revisions("d.pdf") {
            let kept = try whole(store, "d.pdf", summary.revision)
            #expect(kept.bytes == answered[summary.revision] && kept.sha256 == DocumentStore.sha256(kept.bytes), "revision \(summary.revision)")
        }
        #expect(try whole(store, "d.pdf").revision == 11)
    }

    @Test("a killed append's tail is no revision: a reader serves the committed one and, with no writer alive, cuts the tail under the lock")
    func killedTail() throws {
        let (store, folder) = try setUp("append-killed")
        _ = try store.flatten("d.pdf", page: 0, drawing: stroke(0))
        let committed = try store.flatten("d.pdf", page: 0, drawing: stroke(1))
        let bytes = try current(folder)
        // What a save killed after writing (part of) its update and before its record leaves.
        let intent = RevisionHistory.Intent(revision: 4, line: 1, from: Int64(bytes.count))
        #expect(FileManager.default.createFile(atPath: folder.appendingPathComponent(".canvas-revisions/d.pdf/\(intent.name)").path, contents: nil))
        let handle = try FileHandle(forWritingTo: folder.appendingPathComponent("d.pdf"))
        try handle.seekToEnd()
        try handle.write(contentsOf: Data("1 0 obj\n<< /Half an upd".utf8))
        try handle.close()
        let summary = try store.summary("d.pdf")
        #expect(summary.revision == 3 && summary.sha256 == committed.sha256)
        #expect(try current(folder) == bytes, "the tail was not cut")
        #expect(try whole(store, "d.pdf").bytes == bytes)
        let next = try store.flatten("d.pdf", page: 0, drawing: stroke(2))
        let after = try current(folder)
        #expect(next.revision == 4 && Array(after.prefix(bytes.count)) == bytes)
        #expect(!(try history(folder, "d.pdf")).contains { $0.contains(".append.") })
    }

    @Test("the next writer cuts a killed append's tail before it saves, and a second store's start-up does when no writer holds the lock")
    func writerCutsTail() throws {
        let (store, folder) = try setUp("append-writer-cuts")
        _ = try store.flatten("d.pdf", page: 0, drawing: stroke(0))
        let bytes = try current(folder)
        for round in 0..<2 {
            let revision = 3 + round
            let intent = RevisionHistory.Intent(revision: revision, line: 1, from: Int64(try current(folder).count))
            #expect(FileManager.default.createFile(atPath: folder.appendingPathComponent(".canvas-revisions/d.pdf/\(intent.name)").path, contents: nil))
            let handle = try FileHandle(forWritingTo: folder.appendingPathComponent("d.pdf"))
            try handle.seekToEnd()
            try handle.write(contentsOf: Data(repeating: 0x41, count: 5000))
            try handle.close()
            if round == 0 {
                let saved = try store.flatten("d.pdf", page: 0, drawing: stroke(1))
                let after = try current(folder)
                #expect(saved.revision == 3 && Array(after.prefix(bytes.count)) == bytes)
                #expect(saved.sha256 == DocumentStore.sha256(try current(folder)))
            } else {
                let before = try current(folder).count - 5000
                _ = try DocumentStore(folder: folder, saveMode: .append)
                #expect(try current(folder).count == before)
            }
        }
    }

    @Test("bytes past the last revision with no intent (the file changed from outside) are never cut: the file is another document")
    func foreignTail() throws {
        let (store, folder) = try setUp("append-foreign")
        _ = try store.flatten("d.pdf", page: 0, drawing: stroke(0))
        let handle = try FileHandle(forWritingTo: folder.appendingPathComponent("d.pdf"))
        try handle.seekToEnd()
        try handle.write(contentsOf: Data("% appended by another tool\n".utf8))
        try handle.close()
        let changed = try current(folder)
        #expect(try store.summary("d.pdf").revision == 1)
        #expect(try current(folder) == changed)
    }

    @Test("with two revisions kept, a pruned revision whose file holds later ones (appended in place) is not served as that file")
    func prunedInAppendedFile() throws {
        let folder = try freshFolder("append-pruned")
        try Data(smallPDF()).write(to: folder.appendingPathComponent("d.pdf"))
        let store = try DocumentStore(folder: folder, keepRevisions: 2, saveMode: .append)
        var answered: [Int: String] = [1: DocumentStore.sha256(smallPDF())]
        for edit in 0..<3 { let saved = try store.flatten("d.pdf", page: 0, drawing: stroke(edit)); answered[saved.revision] = saved.sha256 }
        let restored = try store.restore("d.pdf", revision: 1)
        answered[restored.revision] = restored.sha256
        for edit in 3..<6 { let saved = try store.flatten("d.pdf", page: 0, drawing: stroke(edit)); answered[saved.revision] = saved.sha256 }
        let listed = try store.revisions("d.pdf")
        #expect(listed.map(\.revision) == [1, 8])
        for summary in listed {
            let kept = try whole(store, "d.pdf", summary.revision)
            #expect(summary.sha256 == answered[summary.revision] && DocumentStore.sha256(kept.bytes) == summary.sha256, "revision \(summary.revision)")
        }
        // Revision 5 (the restore) started the file 5.pdf that now holds 6, 7 and 8; its record is pruned.
        #expect(throws: DocumentError.revisionNotFound(name: "d.pdf", revision: 5)) { try store.bytes("d.pdf", revision: 5, offset: 0, length: 10) }
    }

    @Test("two writers at once, one appending and one replacing: no number handed out twice, every revision what was acknowledged")
    func concurrentModes() throws {
        let (_, folder) = try setUp("append-concurrent")
        let appending = try DocumentStore(folder: folder, keepRevisions: 200, saveMode: .append)
        let replacing = try DocumentStore(folder: folder, keepRevisions: 200, saveMode: .replace)
        let acknowledged = Acknowledged()
        let threads = [appending, replacing].enumerated().map { index, store in
            Thread {
                for edit in 0..<25 {
                    if let saved = try? store.flatten("d.pdf", page: 0, drawing: stroke(edit % 20 + index)) { acknowledged.add(saved) }
                }
                acknowledged.finish()
            }
        }
        threads.forEach { $0.start() }
        while acknowledged.finished < 2 { usleep(1_000) }
        let saves = acknowledged.all
        #expect(saves.count == 50)
        #expect(Set(saves.map(\.revision)).count == saves.count, "a revision number was handed out twice")
        let kept = Dictionary(uniqueKeysWithValues: try replacing.revisions("d.pdf").map { ($0.revision, $0.sha256) })
        for saved in saves {
            #expect(kept[saved.revision] == saved.sha256, "revision \(saved.revision)")
            let bytes = try whole(replacing, "d.pdf", saved.revision)
            #expect(DocumentStore.sha256(bytes.bytes) == saved.sha256)
        }
    }

    @Test("append and replace saves mix on one document (two servers in different modes): every revision reads the same")
    func mixedModes() throws {
        let (appending, folder) = try setUp("append-mixed")
        let replacing = try DocumentStore(folder: folder, keepRevisions: 30)
        var answered: [Int: [UInt8]] = [1: smallPDF()]
        for edit in 0..<8 {
            let store = edit % 3 == 1 ? replacing : appending
            let saved = try store.flatten("d.pdf", page: 0, drawing: stroke(edit))
            answered[saved.revision] = try current(folder)
        }
        let restored = try appending.restore("d.pdf", revision: 3)
        answered[restored.revision] = answered[3]
        _ = try appending.flatten("d.pdf", page: 0, drawing: stroke(9)).revision
        answered[11] = try current(folder)
        for summary in try replacing.revisions("d.pdf") {
            let kept = try whole(replacing, "d.pdf", summary.revision)
            #expect(kept.bytes == answered[summary.revision] && kept.sha256 == DocumentStore.sha256(kept.bytes), "revision \(summary.revision)")
        }
    }
}

/// Hashes a reader thread saw, and the flag that stops it.
private final class SeenHashes: @unchecked Sendable {
    // @unchecked: every field is touched only under `lock`.
    private let lock = NSLock()
    private var hashes: [String] = []
    private var stopFlag = false
    var stopped: Bool { lock.withLock { stopFlag } }
    var count: Int { lock.withLock { hashes.count } }
    var all: [String] { lock.withLock { hashes } }
    func add(_ hash: String) { lock.withLock { hashes.append(hash) } }
    func stop() { lock.withLock { stopFlag = true } }
}

/// Saves acknowledged by writer threads.
private final class Acknowledged: @unchecked Sendable {
    // @unchecked: every field is touched only under `lock`.
    private let lock = NSLock()
    private var saves: [DocumentSummary] = []
    private var done = 0
    var all: [DocumentSummary] { lock.withLock { saves } }
    var finished: Int { lock.withLock { done } }
    func add(_ save: DocumentSummary) { lock.withLock { saves.append(save) } }
    func finish() { lock.withLock { done += 1 } }
}
