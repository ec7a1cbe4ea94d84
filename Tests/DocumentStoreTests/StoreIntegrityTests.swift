import CanvasCore
@testable import DocumentStore
import Foundation
import TestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

private func sha256(_ url: URL) throws -> String {
    String(try run("/usr/bin/sha256sum", [url.path]).output.prefix(64))
}

private func onePagePDF(_ content: String = "0 g 10 10 50 50 re f") -> Data {
    Data(PDFFixtures.pdf([.init(content: content)]))
}

private func revisionsFolder(_ folder: URL, _ name: String) -> URL {
    folder.appendingPathComponent(".canvas-revisions").appendingPathComponent(name)
}

/// The store's promises, tried as users and attackers would: numbers handed out once, the
/// original never lost, links never followed, every valid name saved, readers changing nothing.
@Suite("Store integrity", .serialized)
struct StoreIntegrityTests {
    @Test("with two revisions kept, every save still gets a new number, and revision 1 stays the original")
    func fewRevisionsKept() throws {
        let folder = try freshFolder("keep2")
        let url = folder.appendingPathComponent("d.pdf")
        try onePagePDF().write(to: url)
        let original = try sha256(url)
        let store = try DocumentStore(folder: folder, keepRevisions: 2)
        var answered: [Int] = []
        for edit in 0..<6 {
            answered.append(try store.flatten("d.pdf", page: 0, drawing: Drawing(strokes: [try dot(20 + 10 * Double(edit), 50)])).revision)
        }
        #expect(answered == [2, 3, 4, 5, 6, 7])
        let revisions = try store.revisions("d.pdf")
        #expect(revisions.map(\.revision) == [1, 7])
        #expect(revisions.first?.sha256 == original)
        #expect(revisions.last?.sha256 == (try sha256(url)))
        // A new store on the same folder (a restart) continues the numbering.
        #expect(try DocumentStore(folder: folder, keepRevisions: 2).summary("d.pdf").revision == 7)
    }

    @Test("restoring the current revision changes nothing; a pruned one is not found")
    func restoreCurrent() throws {
        let folder = try freshFolder("restore")
        try onePagePDF().write(to: folder.appendingPathComponent("d.pdf"))
        let store = try DocumentStore(folder: folder, keepRevisions: 3)
        for edit in 0..<3 { _ = try store.flatten("d.pdf", page: 0, drawing: Drawing(strokes: [try dot(20 + 10 * Double(edit), 50)])) }
        let before = try store.summary("d.pdf")
        #expect(before.revision == 4)
        #expect(try store.restore("d.pdf", revision: 4) == before)
        #expect(try store.summary("d.pdf") == before)
        #expect(throws: DocumentError.revisionNotFound(name: "d.pdf", revision: 2)) { try store.restore("d.pdf", revision: 2) }
        #expect(throws: DocumentError.revisionNotFound(name: "d.pdf", revision: 9)) { try store.restore("d.pdf", revision: 9) }
        let restored = try store.restore("d.pdf", revision: 1)
        #expect(restored.revision == 5)
        #expect(restored.sha256 == (try store.revisions("d.pdf").first?.sha256))
    }

    @Test("a symbolic link to another document is listed with a reason, never read or written, and the other is untouched")
    func linkToAnotherDocument() throws {
        let folder = try freshFolder("links")
        let b = folder.appendingPathComponent("b.pdf")
        try onePagePDF().write(to: b)
        try FileManager.default.createSymbolicLink(atPath: folder.appendingPathComponent("a.pdf").path, withDestinationPath: "b.pdf")
        let before = try sha256(b)
        let store = try DocumentStore(folder: folder)
        for attempt in [{ _ = try store.flatten("a.pdf", page: 0, drawing: Drawing(strokes: [try dot(5, 5)])) },
                        { _ = try store.info("a.pdf") }, { _ = try store.revisions("a.pdf") },
                        { _ = try store.restore("a.pdf", revision: 1) }] {
            do {
                try attempt()
                Issue.record("a.pdf was served")
            } catch let error as DocumentError {
                guard case .unreadable(_, "notRegularFile", _) = error else { Issue.record("\(error)"); continue }
            }
        }
        #expect(try sha256(b) == before)
        #expect(!FileManager.default.fileExists(atPath: revisionsFolder(folder, "a.pdf").path))
        let listed = try store.list()
        #expect(listed.map(\.name) == ["a.pdf", "b.pdf"])
        #expect(try store.summary("b.pdf").revision == 1)
    }

    @Test("a directory or a FIFO with a document's name is refused with a reason, at once")
    func otherFileTypes() throws {
        let folder = try freshFolder("types")
        try FileManager.default.createDirectory(at: folder.appendingPathComponent("z.yianazip"), withIntermediateDirectories: false)
        #expect(mkfifo(folder.appendingPathComponent("x.pdf").path, 0o644) == 0)
        let store = try DocumentStore(folder: folder)
        for name in ["z.yianazip", "x.pdf"] {
            #expect(throws: DocumentError.self) { try store.info(name) }
            do {
                _ = try store.flatten(name, page: 0, drawing: Drawing(strokes: [try dot(5, 5)]))
            } catch let error as DocumentError {
                guard case .unreadable(_, "notRegularFile", let message) = error else { Issue.record("\(name): \(error)"); continue }
                #expect(message.contains(name == "x.pdf" ? "FIFO" : "directory"))
            }
        }
        #expect(try store.list().count == 2)
    }

    @Test("a name swapped for a link to a file outside, while requests run, never reads the outside file")
    func swappedLink() async throws {
        let folder = try freshFolder("swap")
        let outside = try freshFolder("swap-outside")
        // The outside file has three pages, the document one: a read of it shows.
        let secret = outside.appendingPathComponent("secret.pdf")
        try Data(PDFFixtures.pdf([.init(), .init(), .init()])).write(to: secret)
        let document = folder.appendingPathComponent("d.pdf"), spare = folder.appendingPathComponent("spare")
        try onePagePDF().write(to: document)
        let store = try DocumentStore(folder: folder)
        let stop = ManagedAtomicFlag()
        let swapper = Thread {
            // Moves the document aside and a link in, and back, as fast as it can; the document
            // then stays in place for a moment of varying length, so that on a loaded machine
            // the reader still meets it in place as well as swapped (CI once saw no read served
            // in 3000 tries when the swap never paused).
            var pause: UInt32 = 0
            while !stop.isSet {
                rename(document.path, spare.path)
                symlink(secret.path, document.path)
                unlink(document.path)
                rename(spare.path, document.path)
                pause = (pause + 37) % 200
                usleep(pause)
            }
        }
        swapper.start()
        var served = 0, refused = 0, tries = 0
        let deadline = ContinuousClock.now + .seconds(20)
        // Runs until the reader has met both states often, or the deadline passes.
        while tries < 3000 || (served < 100 || refused < 100) && ContinuousClock.now < deadline {
            tries += 1
            do {
                let info = try store.info("d.pdf")
                #expect(info.summary.pageCount == 1, "the outside file was read")
                served += 1
            } catch {
                refused += 1
            }
        }
        stop.set()
        while !swapper.isFinished { try await Task.sleep(for: .milliseconds(5)) }
        #expect(served > 0)
        #expect(refused > 0)
        #expect(try Data(PDFFixtures.pdf([.init(), .init(), .init()])) == Data(contentsOf: secret))
    }

    @Test("listings of one folder on several threads at once each see every name once")
    func concurrentListings() async throws {
        // Enough names that a listing takes several reads of the directory, so listings that
        // shared a read position would skip or repeat names.
        let folder = try freshFolder("listings")
        let names = (0..<3000).map { String(format: "entry-%04d", $0) }
        for name in names { _ = FileManager.default.createFile(atPath: folder.appendingPathComponent(name).path, contents: nil) }
        let directory = try Directory.open(folder.path)
        let seen = await withTaskGroup(of: [[String]].self) { group in
            for _ in 0..<4 {
                group.addTask { (0..<30).map { _ in ((try? directory.names()) ?? []).sorted() } }
            }
            var all: [[String]] = []
            for await listings in group { all += listings }
            return all
        }
        #expect(seen.count == 120)
        #expect(seen.allSatisfy { $0 == names }, "a listing missed or repeated names")
    }

    @Test("a 255-byte name is saved, revised and restored")
    func longestName() throws {
        let folder = try freshFolder("long-name")
        let name = String(repeating: "n", count: 251) + ".pdf"
        #expect(name.utf8.count == 255)
        try onePagePDF().write(to: folder.appendingPathComponent(name))
        let store = try DocumentStore(folder: folder)
        #expect(try store.flatten(name, page: 0, drawing: Drawing(strokes: [try dot(5, 5)])).revision == 2)
        #expect(try store.flatten(name, page: 0, drawing: Drawing(strokes: [try dot(15, 5)])).revision == 3)
        #expect(try store.restore(name, revision: 1).revision == 4)
        #expect(try store.revisions(name).map(\.revision) == [1, 2, 3, 4])
    }

    @Test("readers change nothing while a writer saves: no number handed out twice, every kept revision what was acknowledged")
    func readersBesideAWriter() async throws {
        let folder = try freshFolder("readers")
        for name in ["d.pdf", "e.pdf"] { try onePagePDF().write(to: folder.appendingPathComponent(name)) }
        let original = try sha256(folder.appendingPathComponent("d.pdf"))
        let store = try DocumentStore(folder: folder, keepRevisions: 100)
        let reader = Task.detached {
            var seen = 0
            while !Task.isCancelled {
                _ = try? store.list()
                if let info = try? store.info("d.pdf") { seen = max(seen, info.summary.revision) }
                _ = try? store.revisions("d.pdf")
            }
            return seen
        }
        var acknowledged: [DocumentSummary] = []
        for edit in 0..<60 {
            acknowledged.append(try store.flatten("d.pdf", page: 0, drawing: Drawing(strokes: [try dot(5 + Double(edit), 50)])))
        }
        reader.cancel()
        _ = await reader.value
        #expect(acknowledged.map(\.revision) == Array(2...61))
        let kept = try store.revisions("d.pdf")
        #expect(kept.map(\.revision) == Array(1...61))
        #expect(kept.first?.sha256 == original)
        for summary in acknowledged {
            let kept = try store.bytes("d.pdf", revision: summary.revision, offset: 0, length: 1 << 20)
            #expect(kept.sha256 == summary.sha256 && DocumentStore.sha256(kept.bytes) == summary.sha256, "revision \(summary.revision)")
        }
    }

    @Test("a second store opened mid-save leaves the writer's files alone; the next writer clears a killed save's")
    func secondStoreMidSave() throws {
        let folder = try freshFolder("second")
        let url = folder.appendingPathComponent("d.pdf")
        try onePagePDF().write(to: url)
        let store = try DocumentStore(folder: folder)
        let second = try store.flatten("d.pdf", page: 0, drawing: Drawing(strokes: [try dot(5, 5)]))
        // A writer mid-save: it holds the document's lock and has a temporary file half written.
        let history = revisionsFolder(folder, "d.pdf")
        let temporary = history.appendingPathComponent(".tmp.99999.1")
        try Data("half a PDF".utf8).write(to: temporary)
        // And what one killed after keeping its bytes and before its commit record leaves: a
        // tail on the line it extended (announced in the log first, as a save does), and a line
        // file no record names.
        let announcing = try HistoryWriter(RevisionHistory(directory: try Directory.open(history.path), name: "d.pdf"), wait: true, cache: HistoryCache()) { [] }
        try #require(announcing).append([.extending(3, line: 1, from: Int64(try Data(contentsOf: url).count))], durable: true)
        announcing?.close()
        let line = history.appendingPathComponent("data.1")
        let handle = try FileHandle(forWritingTo: line)
        try handle.seekToEnd()
        try handle.write(contentsOf: Data("never a revision".utf8))
        try handle.close()
        let orphan = history.appendingPathComponent("data.3")
        try Data("never the document".utf8).write(to: orphan)
        let held = open(history.appendingPathComponent("lock").path, O_RDWR)
        #expect(held >= 0 && flock(held, LOCK_EX) == 0)
        _ = try DocumentStore(folder: folder)
        #expect(FileManager.default.fileExists(atPath: temporary.path), "a live writer's file was removed")
        #expect(FileManager.default.fileExists(atPath: orphan.path), "a live writer's line was removed")
        #expect(try store.revisions("d.pdf").map(\.revision) == [1, 2])
        #expect(try store.summary("d.pdf").revision == 2)
        #expect(try store.bytes("d.pdf", revision: 1, offset: 0, length: 1 << 20).sha256 == (try store.revisions("d.pdf")[0].sha256))
        #expect(try store.bytes("d.pdf", revision: 2, offset: 0, length: 1 << 20).sha256 == second.sha256)
        // Once the writer is gone (its lock released), the next save clears what it left.
        close(held)
        let third = try store.flatten("d.pdf", page: 0, drawing: Drawing(strokes: [try dot(9, 9)]))
        #expect(third.revision == 3)
        #expect(!FileManager.default.fileExists(atPath: temporary.path))
        #expect(!FileManager.default.fileExists(atPath: orphan.path), "the killed save's line was not removed")
        let document = try Data(contentsOf: url)
        #expect(try Data(contentsOf: line) == document, "the killed save's tail was not cut before the line was extended")
        #expect(try store.bytes("d.pdf", revision: 3, offset: 0, length: 1 << 20).sha256 == third.sha256)
        #expect(try store.bytes("d.pdf", revision: 2, offset: 0, length: 1 << 20).sha256 == second.sha256)
    }

    @Test("another file put in place by hand is the next revision of the same history; every earlier one is still served with its sha256")
    func replacedByHand() throws {
        let folder = try freshFolder("killed")
        let url = folder.appendingPathComponent("d.pdf")
        try onePagePDF().write(to: url)
        let original = try sha256(url)
        let store = try DocumentStore(folder: folder)
        let second = try store.flatten("d.pdf", page: 0, drawing: Drawing(strokes: [try dot(5, 5)]))
        // Another file renamed over the document, as editors save.
        let replacement = folder.appendingPathComponent("new")
        try onePagePDF("0 g 100 100 20 20 re f").write(to: replacement)
        #expect(rename(replacement.path, url.path) == 0)
        let expected = try sha256(url)
        #expect(try store.summary("d.pdf").revision == 3)
        #expect(try store.info("d.pdf").summary.sha256 == expected)
        let listed = try store.revisions("d.pdf")
        #expect(listed.map(\.revision) == [1, 2, 3])
        #expect(listed.map(\.sha256) == [original, second.sha256, expected])
        #expect(listed.map(\.current) == [false, false, true])
        for summary in listed {
            let kept = try store.bytes("d.pdf", revision: summary.revision, offset: 0, length: 1 << 20)
            #expect(kept.sha256 == summary.sha256 && DocumentStore.sha256(kept.bytes) == summary.sha256, "revision \(summary.revision)")
        }
        // Its bytes are kept: written over in place (as cp does), it is revision 4, and 3 is still served.
        let inPlace = try FileHandle(forWritingTo: url)
        try inPlace.truncate(atOffset: 0)
        try inPlace.write(contentsOf: onePagePDF("0 g 200 100 20 20 re f"))
        try inPlace.close()
        let overwritten = try sha256(url)
        #expect(try store.summary("d.pdf").revision == 4)
        let three = try store.bytes("d.pdf", revision: 3, offset: 0, length: 1 << 20)
        #expect(three.sha256 == expected && DocumentStore.sha256(three.bytes) == expected)
        #expect(try store.revisions("d.pdf").map(\.sha256) == [original, second.sha256, expected, overwritten])
        // Saves continue the numbering; an earlier revision is restored as a new one.
        #expect(try store.flatten("d.pdf", page: 0, drawing: Drawing(strokes: [try dot(9, 9)])).revision == 5)
        let restored = try store.restore("d.pdf", revision: 2)
        #expect(restored.revision == 6 && restored.sha256 == second.sha256)
        #expect(try store.revisions("d.pdf").map(\.revision) == [1, 2, 3, 4, 5, 6])
        #expect(!FileManager.default.fileExists(atPath: folder.appendingPathComponent(".canvas-revisions/.ended").path))
        #expect(try !historySharesTheDocument(folder, "d.pdf"))
    }

    @Test("a copy of the current file put in place by hand (links lost) keeps the history and is still the current revision")
    func copiedByHand() throws {
        let folder = try freshFolder("copied")
        let url = folder.appendingPathComponent("d.pdf")
        try onePagePDF().write(to: url)
        let store = try DocumentStore(folder: folder)
        let second = try store.flatten("d.pdf", page: 0, drawing: Drawing(strokes: [try dot(5, 5)]))
        let bytes = try Data(contentsOf: url)
        let copy = folder.appendingPathComponent("copy")
        try bytes.write(to: copy)
        #expect(rename(copy.path, url.path) == 0)
        #expect(try store.summary("d.pdf") == second, "the same bytes are the same revision")
        #expect(try store.revisions("d.pdf").map(\.revision) == [1, 2])
        #expect(try store.flatten("d.pdf", page: 0, drawing: Drawing(strokes: [try dot(9, 9)])).revision == 3)
        #expect(try store.revisions("d.pdf").map(\.revision) == [1, 2, 3])
        #expect(try store.bytes("d.pdf", revision: 2, offset: 0, length: 1 << 20).sha256 == second.sha256)
    }

    @Test(".yianazip metadata: bytes of unknown fields kept, big integers too, a count at its limit saturates")
    func metadataKept() throws {
        let folder = try freshFolder("metadata")
        let metadata = #"{"zeta": 123456789012345678901234567890, "title": "T",  "tags": ["a"], "created": 1.5e9,"# +
            #" "modified": 700000000.5, "page_count": 1, "nested": {"b": 1, "a": [1.000, 2e3]},"# +
            #" "markup": {"extra": "kept", "markup_count": 9223372036854775807}, "full_text": "é\u00e9"}"#
        let url = folder.appendingPathComponent("m.yianazip")
        try (Data(metadata.utf8) + Data([0xFF, 0xFF, 0xFF, 0xFF]) + onePagePDF()).write(to: url)
        let store = try DocumentStore(folder: folder)
        _ = try store.flatten("m.yianazip", page: 0, drawing: Drawing(strokes: [try dot(5, 5)]))
        _ = try store.flatten("m.yianazip", page: 0, drawing: Drawing(strokes: [try dot(9, 9)]))
        let bytes = try Data(contentsOf: url)
        let end = bytes.firstRange(of: Data([0xFF, 0xFF, 0xFF, 0xFF]))!.lowerBound
        let saved = String(decoding: bytes[..<end], as: UTF8.self)
        for kept in [#"{"zeta": 123456789012345678901234567890, "title": "T",  "tags": ["a"], "created": 1.5e9,"#,
                     #""nested": {"b": 1, "a": [1.000, 2e3]},"#, #""full_text": "é\u00e9"}"#, #"{"extra": "kept", "#,
                     #""markup_count": 9223372036854775807"#, #""page_count": 1,"#, #""has_markup":true"#] {
            #expect(saved.contains(kept), "\(kept) is not in \(saved)")
        }
    }
}

@Suite("Ink limits")
struct InkLimitTests {
    @Test("a page's ink is bounded with what earlier saves put there, before anything is drawn")
    func inkPerPage() throws {
        let folder = try freshFolder("ink-limit")
        try Data(PDFFixtures.pdf([.init(), .init()])).write(to: folder.appendingPathComponent("d.pdf"))
        let store = try DocumentStore(folder: folder, maxInkPointsPerPage: 10)
        func stroke(_ points: Int) throws -> Stroke {
            try Stroke(tool: .pen, color: InkColor("blue"), width: 2, points: (0..<points).map { try InkPoint(x: Double(10 + $0), y: 20) })
        }
        #expect(try store.flatten("d.pdf", page: 0, drawing: Drawing(strokes: [try stroke(6)])).revision == 2)
        let before = try sha256(folder.appendingPathComponent("d.pdf"))
        #expect(throws: DocumentError.inkLimit(name: "d.pdf", page: 0, stored: 6, adding: 5, limit: 10)) {
            try store.flatten("d.pdf", page: 0, drawing: Drawing(strokes: [try stroke(5)]))
        }
        #expect(try sha256(folder.appendingPathComponent("d.pdf")) == before, "a refused save changed the document")
        #expect(try store.flatten("d.pdf", page: 0, drawing: Drawing(strokes: [try stroke(4)])).revision == 3)
        // The other page has its own count.
        #expect(try store.flatten("d.pdf", page: 1, drawing: Drawing(strokes: [try stroke(10)])).revision == 4)
        #expect(throws: DocumentError.self) { try store.flatten("d.pdf", page: 0, drawing: Drawing(strokes: [try stroke(1)])) }
    }
}

/// A flag set by one thread and read by another.
private final class ManagedAtomicFlag: @unchecked Sendable {
    private let lock = NSLock()
    private var value = false
    var isSet: Bool { lock.withLock { value } }
    func set() { lock.withLock { value = true } }
}
