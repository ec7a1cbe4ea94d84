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


private func history(_ folder: URL, _ name: String) throws -> [String] { try historyNames(folder, name) }

/// The files of a history that hold bytes (its lines, `data.<L>`).
private func files(_ folder: URL, _ name: String) throws -> [String] { try lineFiles(folder, name) }

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
        // One line, one file: the original copied once, each save's increment appended to it.
        #expect(try files(folder, "scan.pdf") == ["data.1"])
        #expect(try historyFileSize(folder, "scan.pdf", "data.1") == final)
        #expect(try !historySharesTheDocument(folder, "scan.pdf"))
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

    @Test("a history the old store wrote (a whole file per revision) is migrated at its first read: every revision keeps its number, bytes and sha256")
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
        let mark = "3.madeby.\(key).1.\(DocumentStore.sha256(v3))"
        #expect(FileManager.default.createFile(atPath: revisions.appendingPathComponent(mark).path, contents: nil))

        let store = try DocumentStore(folder: folder)
        #expect(try store.summary("d.pdf").revision == 3)
        #expect(try store.revisions("d.pdf").map(\.sha256) == [v1, v2, v3].map(DocumentStore.sha256))
        for (revision, bytes) in [(1, v1), (2, v2), (3, v3)] { #expect(try whole(store, "d.pdf", revision).bytes == bytes) }
        // The first read migrated it, under the lock: the log and one line per whole file, no
        // name of the old layout left, and no file of the history is the document's.
        #expect(try history(folder, "d.pdf") == ["data.1", "data.2", "data.3", "history.log", "lock"])
        #expect(try !historySharesTheDocument(folder, "d.pdf"))
        #expect(try Data(contentsOf: url) == Data(v3), "the document is as it was")
        let state = try historyState(folder, "d.pdf")
        #expect(state.kept.map(\.revision) == [1, 2, 3] && state.next == 4 && state.current?.revision == 3)
        #expect(state.kept.map(\.sha256) == [v1, v2, v3].map(DocumentStore.sha256))
        #expect(state.kept.map(\.madeBy) == [nil, nil, key] && state.kept.last?.pageCount == 1)
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
        // Revision 4 continues revision 3's line; 1 and 2 stay as they were until pruned.
        #expect(try files(folder, "d.pdf") == ["data.1", "data.2", "data.3"])
        #expect(try historyState(folder, "d.pdf").kept.map(\.line) == [1, 2, 3, 3])
        #expect(try historyFileSize(folder, "d.pdf", "data.3") == Int64(v4.count))
        #expect(try store.restore("d.pdf", revision: 2).sha256 == DocumentStore.sha256(v2))
        #expect(try Data(contentsOf: url) == Data(v2))
        #expect(try !historySharesTheDocument(folder, "d.pdf"))
    }

    @Test("a restore names the restored revision's kept bytes; the save after it starts a line of its own; pruning frees only what no kept revision needs")
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
        // Revision 4 is the first bytes of line 1, as revision 1 is: no copy kept of it.
        let record = try historyState(folder, "d.pdf").revisions[4]
        #expect(record?.line == 1 && record?.length == Int64(smallPDF().count))
        #expect(try files(folder, "d.pdf") == ["data.1"])
        #expect(try !historySharesTheDocument(folder, "d.pdf"))
        _ = try store.flatten("d.pdf", page: 0, drawing: stroke(2))
        let six = try store.flatten("d.pdf", page: 0, drawing: stroke(3))
        #expect(try store.revisions("d.pdf").map(\.revision) == [1, 5, 6])
        // Revision 1 still needs line 1, cut to its length; revisions 5 and 6 are lengths of line 5.
        #expect(try files(folder, "d.pdf") == ["data.1", "data.5"])
        #expect(try historyFileSize(folder, "d.pdf", "data.1") == Int64(smallPDF().count))
        #expect(try historyState(folder, "d.pdf").kept.map(\.line) == [1, 5, 5])
        #expect(try whole(store, "d.pdf", 1).bytes == smallPDF())
        #expect(try whole(store, "d.pdf").sha256 == six.sha256)
        #expect(throws: DocumentError.revisionNotFound(name: "d.pdf", revision: 3)) { try store.restore("d.pdf", revision: 3) }
    }

    @Test(".yianazip saves keep a line each (the metadata in front changes), pruned as before")
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
        #expect(try files(folder, "m.yianazip") == ["data.1", "data.5", "data.6"])
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

    /// Appends `bytes` to a file, as a writer that extends it does.
    func append(_ bytes: [UInt8], to url: URL) throws {
        let handle = try FileHandle(forWritingTo: url)
        try handle.seekToEnd()
        try handle.write(contentsOf: Data(bytes))
        try handle.close()
    }

    @Test("killed after keeping its bytes, before its commit record: the old revision is current, the next save takes the number and cuts the tail")
    func beforeCommit() throws {
        var (store, folder, bytes) = try saved("killed-before-commit", saves: 3)
        let url = folder.appendingPathComponent("d.pdf"), history = historyFolder(folder, "d.pdf")
        // Revision 5's new file written, and its increment appended to line 1, which it extends
        // (announced first, as a save does).
        let made = try withUpdate(url, stroke(8))
        try Data(made).write(to: history.appendingPathComponent(".tmp.99999.5"))
        let writer = try historyWriter(store, "d.pdf")
        try writer.append([.extending(5, line: 1, from: Int64(bytes[4]!.count))], durable: true)
        writer.close()
        try append(Array(made[bytes[4]!.count...]), to: history.appendingPathComponent("data.1"))
        try check(store, bytes, current: 4)
        let saved = try store.flatten("d.pdf", page: 0, drawing: stroke(9))
        #expect(saved.revision == 5)
        bytes[5] = Array(try Data(contentsOf: url))
        #expect(DocumentStore.sha256(bytes[5]!) == saved.sha256 && bytes[5] != made)
        try check(store, bytes, current: 5)
        #expect(try historyNames(folder, "d.pdf") == ["data.1", "history.log", "lock"])
        #expect(try Data(contentsOf: history.appendingPathComponent("data.1")) == Data(bytes[5]!), "the uncommitted tail was not cut")
        store = try DocumentStore(folder: folder)
        try check(store, bytes, current: 5)
    }

    @Test("killed after its commit record, before the rename: readers see the old revision until a writer or a restart finishes the save")
    func beforeRename() throws {
        var (store, folder, bytes) = try saved("killed-before-rename", saves: 3)
        let url = folder.appendingPathComponent("d.pdf")
        let made = try withUpdate(url, stroke(8))
        #expect(try commitWithoutRename(store, folder, "d.pdf", bytes: made) == 5)
        try check(store, bytes, current: 4)
        #expect(throws: DocumentError.revisionNotFound(name: "d.pdf", revision: 5)) { try whole(store, "d.pdf", 5) }
        // A restart finishes the rename: the committed revision is the document.
        let restarted = try DocumentStore(folder: folder)
        bytes[5] = made
        #expect(try Data(contentsOf: url) == Data(made))
        try check(restarted, bytes, current: 5)
        try check(store, bytes, current: 5)
        #expect(try !history(folder, "d.pdf").contains { $0.hasPrefix(".tmp.") })
        let saved = try store.flatten("d.pdf", page: 0, drawing: stroke(9))
        #expect(saved.revision == 6)
        bytes[6] = Array(try Data(contentsOf: url))
        #expect(DocumentStore.sha256(bytes[6]!) == saved.sha256)
        try check(store, bytes, current: 6)
        store = try DocumentStore(folder: folder)
        try check(store, bytes, current: 6)
    }

    @Test("killed after its commit record, its new file gone: the revision is abandoned, its number never handed out again")
    func abandoned() throws {
        let (store, folder, bytes) = try saved("killed-abandoned", saves: 3)
        let url = folder.appendingPathComponent("d.pdf")
        #expect(try commitWithoutRename(store, folder, "d.pdf", bytes: try withUpdate(url, stroke(8)), temporary: ".tmp.99999.5") == 5)
        try FileManager.default.removeItem(at: historyFolder(folder, "d.pdf").appendingPathComponent(".tmp.99999.5"))
        try check(store, bytes, current: 4)
        let saved = try store.flatten("d.pdf", page: 0, drawing: stroke(9))
        #expect(saved.revision == 6)
        var all = bytes
        all[6] = Array(try Data(contentsOf: url))
        #expect(DocumentStore.sha256(all[6]!) == saved.sha256)
        #expect(try store.revisions("d.pdf").map(\.revision) == [1, 2, 3, 4, 6])
        for (revision, expected) in all {
            let kept = try whole(store, "d.pdf", revision)
            #expect(kept.bytes == expected && kept.sha256 == DocumentStore.sha256(kept.bytes), "revision \(revision)")
        }
        #expect(throws: DocumentError.revisionNotFound(name: "d.pdf", revision: 5)) { try whole(store, "d.pdf", 5) }
        #expect(throws: DocumentError.revisionNotFound(name: "d.pdf", revision: 5)) { try store.restore("d.pdf", revision: 5) }
        #expect(try history(folder, "d.pdf") == ["data.1", "history.log", "lock"], "the abandoned revision's line is not gone")
        #expect(try DocumentStore(folder: folder).flatten("d.pdf", page: 0, drawing: stroke(10)).revision == 7)
    }

    @Test("killed after the rename, before its identity record and pruning: the document is the committed revision, every revision reads the same")
    func afterRename() throws {
        let (store, folder, bytes) = try saved("killed-after-rename", saves: 3)
        let url = folder.appendingPathComponent("d.pdf")
        let made = try withUpdate(url, stroke(8))
        #expect(try commitWithoutRename(store, folder, "d.pdf", bytes: made) == 5)
        #expect(rename(historyFolder(folder, "d.pdf").appendingPathComponent(".tmp.99999.1").path, url.path) == 0)
        var all = bytes
        all[5] = made
        try check(store, all, current: 5)
        #expect(try historyState(folder, "d.pdf").pending == nil)
        let saved = try store.flatten("d.pdf", page: 0, drawing: stroke(9))
        all[6] = Array(try Data(contentsOf: url))
        #expect(saved.revision == 6 && saved.sha256 == DocumentStore.sha256(all[6]!))
        try check(store, all, current: 6)
        #expect(try !historySharesTheDocument(folder, "d.pdf"))
    }

    @Test("killed while pruning, after its record, before the files were cut: those revisions are pruned, every other reads the same, the next save cuts the file")
    func midPrune() throws {
        var (store, folder, bytes) = try saved("killed-mid-prune", saves: 3)
        // Revision 5 restores 1 (the first bytes of line 1), and 6 starts line 5.
        #expect(try store.restore("d.pdf", revision: 1).revision == 5)
        bytes[5] = bytes[1]
        #expect(try store.flatten("d.pdf", page: 0, drawing: stroke(7)).revision == 6)
        bytes[6] = Array(try Data(contentsOf: folder.appendingPathComponent("d.pdf")))
        #expect(try lineFiles(folder, "d.pdf") == ["data.1", "data.6"])
        // Revisions 2 to 4 pruned, and killed before line 1 was cut to what revision 1 needs.
        let writer = try historyWriter(store, "d.pdf")
        try writer.append([.pruned([2, 3, 4])], durable: true)
        writer.close()
        #expect(try store.revisions("d.pdf").map(\.revision) == [1, 5, 6])
        for revision in [1, 5, 6] {
            let kept = try whole(store, "d.pdf", revision)
            #expect(kept.bytes == bytes[revision] && kept.sha256 == DocumentStore.sha256(kept.bytes), "revision \(revision)")
        }
        for revision in [2, 3, 4] {
            #expect(throws: DocumentError.revisionNotFound(name: "d.pdf", revision: revision)) { try whole(store, "d.pdf", revision) }
        }
        // Readers cut nothing: the bytes stay until the next writer.
        #expect(try historyFileSize(folder, "d.pdf", "data.1") == Int64(bytes[4]!.count))
        #expect(throws: DocumentError.revisionNotFound(name: "d.pdf", revision: 2)) { try store.restore("d.pdf", revision: 2) }
        #expect(try store.flatten("d.pdf", page: 0, drawing: stroke(8)).revision == 7)
        #expect(try lineFiles(folder, "d.pdf") == ["data.1", "data.6"])
        #expect(try historyFileSize(folder, "d.pdf", "data.1") == Int64(bytes[1]!.count), "line 1 was not cut to what revision 1 needs")
        store = try DocumentStore(folder: folder)
        #expect(try whole(store, "d.pdf", 1).bytes == bytes[1])
        #expect(try whole(store, "d.pdf", 6).bytes == bytes[6])
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

    @Test("ten appended saves copy nothing but the original once, write their increments, keep one file, and every revision reads back with its hash")
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
            // The first save keeps the original once, a copy into the history; the others copy nothing.
            #expect(cost.bytesCopied + cost.bytesCloned == (edit == 0 ? Int64(original.count) : 0))
            #expect(cost.bytesWritten == Int64(after.count - before))
            if edit > 0 { #expect(cost.bytesHashed <= 2 * Int64(after.count - before)) }
            var status = stat()
            #expect(lstat(folder.appendingPathComponent("d.pdf").path, &status) == 0)
            if edit == 0 { identity = status.st_ino } else { #expect(status.st_ino == identity, "the document was replaced, not appended to") }
        }
        #expect(try files(folder, "d.pdf") == ["data.1"])
        #expect(try historyState(folder, "d.pdf").intent == nil, "an intent outlived its save")
        #expect(try !historySharesTheDocument(folder, "d.pdf"))
        #expect(try store.revisions("d.pdf").map(\.revision) == Array(1...11))
        for summary in try store.revisions("d.pdf") {
            let kept = try whole(store, "d.pdf", summary.revision)
            #expect(kept.bytes == answered[summary.revision] && kept.sha256 == DocumentStore.sha256(kept.bytes), "revision \(summary.revision)")
        }
        #expect(try whole(store, "d.pdf").revision == 11)
    }

    /// What an append killed after its intent record and (part of) its update leaves: the intent
    /// in the log, `tail` at the end of the document, and with `inLine` at the end of the line too.
    func killedAppend(_ store: DocumentStore, _ folder: URL, tail: [UInt8], inLine: Bool = false) throws {
        let url = folder.appendingPathComponent("d.pdf")
        let writer = try historyWriter(store, "d.pdf")
        let current = try #require(writer.state.current.flatMap { writer.state.revisions[$0.revision] })
        #expect(current.length == Int64(try self.current(folder).count))
        try writer.append([.intent(writer.state.next, from: current.length, document: try fileSnapshot(url), line: current.line)], durable: true)
        writer.close()
        for target in [url] + (inLine ? [historyFolder(folder, "d.pdf").appendingPathComponent(RevisionHistory.lineName(current.line))] : []) {
            let handle = try FileHandle(forWritingTo: target)
            try handle.seekToEnd()
            try handle.write(contentsOf: Data(tail))
            try handle.close()
        }
    }

    @Test("a killed append's tail is no revision: a reader serves the committed one and, with no writer alive, cuts the tail under the lock")
    func killedTail() throws {
        let (store, folder) = try setUp("append-killed")
        _ = try store.flatten("d.pdf", page: 0, drawing: stroke(0))
        let committed = try store.flatten("d.pdf", page: 0, drawing: stroke(1))
        let bytes = try current(folder)
        try killedAppend(store, folder, tail: Array("1 0 obj\n<< /Half an upd".utf8))
        let summary = try store.summary("d.pdf")
        #expect(summary.revision == 3 && summary.sha256 == committed.sha256)
        #expect(try current(folder) == bytes, "the tail was not cut")
        #expect(try whole(store, "d.pdf").bytes == bytes)
        #expect(try historyState(folder, "d.pdf").intent == nil)
        let next = try store.flatten("d.pdf", page: 0, drawing: stroke(2))
        let after = try current(folder)
        #expect(next.revision == 4 && Array(after.prefix(bytes.count)) == bytes && next.sha256 == DocumentStore.sha256(after))
        #expect(try historyState(folder, "d.pdf").intent == nil)
        #expect(try store.revisions("d.pdf").map(\.revision) == [1, 2, 3, 4])
    }

    @Test("the next writer cuts a killed append's tail, in the document and in its line, before it saves")
    func writerCutsTail() throws {
        let (store, folder) = try setUp("append-writer-cuts")
        _ = try store.flatten("d.pdf", page: 0, drawing: stroke(0))
        let bytes = try current(folder)
        try killedAppend(store, folder, tail: Array(repeating: 0x41, count: 5000), inLine: true)
        let saved = try store.flatten("d.pdf", page: 0, drawing: stroke(1))
        let after = try current(folder)
        #expect(saved.revision == 3 && Array(after.prefix(bytes.count)) == bytes)
        #expect(!after[bytes.count...].starts(with: repeatElement(UInt8(0x41), count: 100)), "the tail was not cut")
        #expect(saved.sha256 == DocumentStore.sha256(after))
        #expect(try Data(contentsOf: historyFolder(folder, "d.pdf").appendingPathComponent("data.1")) == Data(after))
        for summary in try store.revisions("d.pdf") {
            let kept = try whole(store, "d.pdf", summary.revision)
            #expect(kept.sha256 == summary.sha256 && DocumentStore.sha256(kept.bytes) == summary.sha256, "revision \(summary.revision)")
        }
    }

    @Test("a second store's start-up cuts a killed append's tail when no writer holds the lock")
    func startUpCutsTail() throws {
        let (store, folder) = try setUp("append-start-cuts")
        _ = try store.flatten("d.pdf", page: 0, drawing: stroke(0))
        let bytes = try current(folder)
        try killedAppend(store, folder, tail: Array(repeating: 0x41, count: 5000), inLine: true)
        _ = try DocumentStore(folder: folder, saveMode: .append)
        #expect(try current(folder) == bytes, "the tail is still on the document")
    }

    @Test("bytes appended by another program (no intent) are never cut: the file is the next revision, with its real sha256")
    func foreignTail() throws {
        let (store, folder) = try setUp("append-foreign")
        let second = try store.flatten("d.pdf", page: 0, drawing: stroke(0))
        let handle = try FileHandle(forWritingTo: folder.appendingPathComponent("d.pdf"))
        try handle.seekToEnd()
        try handle.write(contentsOf: Data("% appended by another tool\n".utf8))
        try handle.close()
        let changed = try current(folder)
        let summary = try store.summary("d.pdf")
        #expect(summary.revision == 3 && summary.sha256 == DocumentStore.sha256(changed))
        #expect(try current(folder) == changed)
        #expect(try store.revisions("d.pdf").map(\.revision) == [1, 2, 3])
        let two = try whole(store, "d.pdf", 2)
        #expect(two.sha256 == second.sha256 && DocumentStore.sha256(two.bytes) == second.sha256)
        // The next save appends after the other program's bytes.
        let next = try store.flatten("d.pdf", page: 0, drawing: stroke(1))
        let after = try current(folder)
        #expect(next.revision == 4 && Array(after.prefix(changed.count)) == changed && next.sha256 == DocumentStore.sha256(after))
        #expect(try whole(store, "d.pdf", 3).bytes == changed)
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
        // Revision 5 (the restore) is the first bytes of line 1, which 6, 7 and 8 extended; its record is pruned.
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
