import CanvasCore
@testable import DocumentStore
import Foundation
import TestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

private func onePagePDF(_ content: String = "0 g 10 10 50 50 re f") -> [UInt8] {
    PDFFixtures.pdf([.init(content: content)])
}

/// Writes `bytes` over the file in place (the same inode), as `cp` does.
private func writeInPlace(_ bytes: [UInt8], to url: URL) throws {
    let handle = try FileHandle(forWritingTo: url)
    try handle.truncate(atOffset: 0)
    try handle.write(contentsOf: Data(bytes))
    try handle.close()
}

private func whole(_ store: DocumentStore, _ name: String, _ revision: Int? = nil) throws -> DocumentBytes {
    try store.bytes(name, revision: revision, offset: 0, length: 1 << 30)
}

/// The reason of an `unreadable` refusal, or what else `body` did.
private func refusal(_ body: () throws -> Void) -> String {
    do {
        try body()
        return "served"
    } catch let error as DocumentError {
        if case .unreadable(_, let reason, _) = error { return reason }
        return "\(error)"
    } catch {
        return "\(error)"
    }
}

/// What other programs do to a document and its folder: each change is a revision of the same
/// history, numbers are handed out once, and nothing is served with a sha256 that is not its bytes'.
@Suite("Changes made outside the store", .serialized)
struct OutsideChangesTests {
    func setUp(_ label: String) throws -> (DocumentStore, URL, URL) {
        let folder = try freshFolder(label)
        let url = folder.appendingPathComponent("d.pdf")
        try Data(onePagePDF()).write(to: url)
        return (try DocumentStore(folder: folder), folder, url)
    }

    @Test("a deleted document keeps its history: listed with none current, served, and restored as the next revision")
    func deletedDocument() throws {
        let (store, folder, url) = try setUp("outside-deleted")
        let original = DocumentStore.sha256(onePagePDF())
        let two = try store.flatten("d.pdf", page: 0, drawing: Drawing(strokes: [try dot(5, 5)]))
        let three = try store.flatten("d.pdf", page: 0, drawing: Drawing(strokes: [try dot(9, 9)]))
        let twoBytes = try whole(store, "d.pdf", 2).bytes
        try FileManager.default.removeItem(at: url)
        #expect(try store.list().isEmpty)
        #expect(throws: DocumentError.notFound("d.pdf")) { try store.info("d.pdf") }
        #expect(throws: DocumentError.notFound("d.pdf")) { try store.flatten("d.pdf", page: 0, drawing: Drawing(strokes: [try dot(5, 5)])) }
        let listed = try store.revisions("d.pdf")
        #expect(listed.map(\.revision) == [1, 2, 3] && listed.allSatisfy { !$0.current })
        #expect(listed.map(\.sha256) == [original, two.sha256, three.sha256])
        for summary in listed {
            let kept = try whole(store, "d.pdf", summary.revision)
            #expect(DocumentStore.sha256(kept.bytes) == summary.sha256, "revision \(summary.revision)")
        }
        let restored = try store.restore("d.pdf", revision: 2)
        #expect(restored.revision == 4 && restored.sha256 == two.sha256)
        #expect(Array(try Data(contentsOf: url)) == twoBytes)
        #expect(try store.revisions("d.pdf").map(\.revision) == [1, 2, 3, 4])
        #expect(try store.summary("d.pdf").revision == 4)
        #expect(try !historySharesTheDocument(folder, "d.pdf"))
    }

    @Test("a file copied in, or an upload, under a deleted document's name continues its history")
    func deletedThenCreated() throws {
        let (store, folder, url) = try setUp("outside-recreated")
        let two = try store.flatten("d.pdf", page: 0, drawing: Drawing(strokes: [try dot(5, 5)]))
        try FileManager.default.removeItem(at: url)
        let other = onePagePDF("0 g 100 100 20 20 re f")
        try Data(other).write(to: folder.appendingPathComponent("elsewhere"))
        #expect(rename(folder.appendingPathComponent("elsewhere").path, url.path) == 0)
        let three = try store.summary("d.pdf")
        #expect(three.revision == 3 && three.sha256 == DocumentStore.sha256(other))
        #expect(try store.revisions("d.pdf").map(\.revision) == [1, 2, 3])
        #expect(try whole(store, "d.pdf", 2).sha256 == two.sha256)
        try FileManager.default.removeItem(at: url)
        let uploaded = onePagePDF("0 g 150 150 20 20 re f")
        let spool = try UploadSpool()
        try spool.write([uploaded], at: 0)
        let four = try store.store(upload: spool, as: "d.pdf", expectedRevision: nil)
        #expect(four.revision == 4 && four.sha256 == DocumentStore.sha256(uploaded))
        #expect(try store.revisions("d.pdf").map(\.sha256) == [DocumentStore.sha256(onePagePDF()), two.sha256, three.sha256, four.sha256])
        #expect(try whole(store, "d.pdf", 3).bytes == other)
    }

    @Test("an earlier revision's bytes written back in place are a new revision, never the old number again")
    func earlierBytesWrittenBack() throws {
        let (store, _, url) = try setUp("outside-written-back")
        let two = try store.flatten("d.pdf", page: 0, drawing: Drawing(strokes: [try dot(5, 5)]))
        let three = try store.flatten("d.pdf", page: 0, drawing: Drawing(strokes: [try dot(9, 9)]))
        try writeInPlace(try whole(store, "d.pdf", 2).bytes, to: url)
        let four = try store.summary("d.pdf")
        #expect(four.revision == 4 && four.sha256 == two.sha256)
        #expect(try store.revisions("d.pdf").map(\.sha256) == [DocumentStore.sha256(onePagePDF()), two.sha256, three.sha256, two.sha256])
        #expect(try whole(store, "d.pdf", 3).sha256 == three.sha256)
        #expect(try store.flatten("d.pdf", page: 0, drawing: Drawing(strokes: [try dot(20, 9)])).revision == 5)
    }

    @Test("a file touched, with its bytes unchanged, is still its revision")
    func touched() throws {
        let (store, _, url) = try setUp("outside-touched")
        let two = try store.flatten("d.pdf", page: 0, drawing: Drawing(strokes: [try dot(5, 5)]))
        try FileManager.default.setAttributes([.modificationDate: Date(timeIntervalSince1970: 1_000_000)], ofItemAtPath: url.path)
        #expect(try store.summary("d.pdf") == two)
        #expect(try store.revisions("d.pdf").map(\.revision) == [1, 2])
        #expect(try store.flatten("d.pdf", page: 0, drawing: Drawing(strokes: [try dot(9, 9)])).revision == 3)
    }

    @Test("kept bytes changed by hand are refused as damaged, never served with their old sha256; the document saves on")
    func keptBytesChangedByHand() throws {
        let (store, folder, url) = try setUp("outside-damaged-line")
        _ = try store.flatten("d.pdf", page: 0, drawing: Drawing(strokes: [try dot(5, 5)]))
        let three = try store.flatten("d.pdf", page: 0, drawing: Drawing(strokes: [try dot(9, 9)]))
        // Revisions 1 to 3 are lengths of line 1: one byte of revision 1's changed in place.
        let line = historyFolder(folder, "d.pdf").appendingPathComponent("data.1")
        var bytes = Array(try Data(contentsOf: line))
        bytes[20] ^= 0x01
        try writeInPlace(bytes, to: line)
        for revision in [1, 2] {
            #expect(refusal { _ = try whole(store, "d.pdf", revision) } == "damaged", "revision \(revision)")
        }
        #expect(refusal { _ = try store.restore("d.pdf", revision: 1) } == "damaged")
        // The document is not the history: it is read and saved as before.
        #expect(try store.summary("d.pdf") == three)
        #expect(try whole(store, "d.pdf").sha256 == three.sha256)
        let four = try store.flatten("d.pdf", page: 0, drawing: Drawing(strokes: [try dot(20, 9)]))
        #expect(try four.revision == 4 && four.sha256 == DocumentStore.sha256(Array(Data(contentsOf: url))))
        let kept = try whole(store, "d.pdf", 4)
        #expect(kept.sha256 == four.sha256 && DocumentStore.sha256(kept.bytes) == four.sha256)
        #expect(refusal { _ = try whole(store, "d.pdf", 1) } == "damaged")
    }

    @Test("files of an older layout's names made by hand beside a log mean nothing, and the next writer removes them")
    func handMadeNames() throws {
        let (store, folder, _) = try setUp("outside-hand-made")
        let two = try store.flatten("d.pdf", page: 0, drawing: Drawing(strokes: [try dot(5, 5)]))
        let history = historyFolder(folder, "d.pdf")
        let forged = "900.rev.1.\(onePagePDF().count).1.\(DocumentStore.sha256(onePagePDF())).\(SHA256Hasher().midstate.hex)"
        for name in [forged, "5.pdf", "3.madeby.k1.1.\(two.sha256)", "4.append.1.10"] {
            try Data(onePagePDF()).write(to: history.appendingPathComponent(name))
        }
        #expect(try store.revisions("d.pdf").map(\.revision) == [1, 2])
        #expect(throws: DocumentError.revisionNotFound(name: "d.pdf", revision: 900)) { try whole(store, "d.pdf", 900) }
        #expect(throws: DocumentError.revisionNotFound(name: "d.pdf", revision: 5)) { try whole(store, "d.pdf", 5) }
        #expect(try store.flatten("d.pdf", page: 0, drawing: Drawing(strokes: [try dot(9, 9)]), madeBy: "k1").revision == 3)
        #expect(try historyNames(folder, "d.pdf") == ["data.1", "history.log", "lock"])
    }

    @Test("a long log is written again with only what it keeps: numbers, keys, bytes and hashes all as they were")
    func compaction() throws {
        let folder = try freshFolder("outside-compaction")
        let url = folder.appendingPathComponent("d.pdf")
        try Data(onePagePDF()).write(to: url)
        let store = try DocumentStore(folder: folder, keepRevisions: 2)
        var last: DocumentSummary?
        var compacted = false
        for edit in 0..<400 where !compacted {
            last = try store.flatten("d.pdf", page: 0, drawing: Drawing(strokes: [try dot(5 + Double(edit % 50), 5 + Double(edit / 50))]),
                                     madeBy: "edit\(edit)")
            compacted = try historyRecords(folder, "d.pdf").first?.kind == "base"
        }
        let newest = try #require(last)
        #expect(compacted, "the log was never written again")
        let records = try historyRecords(folder, "d.pdf")
        #expect(records.count < 10)
        let state = try historyState(folder, "d.pdf")
        #expect(state.kept.map(\.revision) == [1, newest.revision] && state.next == newest.revision + 1)
        #expect(state.pending == nil && state.intent == nil && state.current?.revision == newest.revision)
        #expect(records.allSatisfy { $0.kept?.temporary == nil })
        for reader in [store, try DocumentStore(folder: folder, keepRevisions: 2)] {
            #expect(try reader.summary("d.pdf") == DocumentSummary(name: "d.pdf", revision: newest.revision, pageCount: 1, sha256: newest.sha256))
            #expect(try whole(reader, "d.pdf", 1).bytes == onePagePDF())
            #expect(try whole(reader, "d.pdf", newest.revision).sha256 == newest.sha256)
        }
        // The key of the newest save still answers; the numbering goes on.
        let again = try store.flatten("d.pdf", page: 0, drawing: Drawing(strokes: [try dot(1, 1)]), madeBy: "edit\(newest.revision - 2)")
        #expect(again.revision == newest.revision)
        #expect(try store.flatten("d.pdf", page: 0, drawing: Drawing(strokes: [try dot(1, 1)])).revision == newest.revision + 1)
        #expect(try store.revisions("d.pdf").map(\.revision) == [1, newest.revision + 1])
        #expect(Array(try Data(contentsOf: url)).count > 0)
    }

    @Test("a history whose log was deleted by hand is not started again over its kept bytes: no number is handed out twice")
    func logDeleted() throws {
        let (store, folder, _) = try setUp("outside-log-deleted")
        let original = DocumentStore.sha256(onePagePDF())
        let two = try store.flatten("d.pdf", page: 0, drawing: Drawing(strokes: [try dot(5, 5)]))
        try FileManager.default.removeItem(at: historyFolder(folder, "d.pdf").appendingPathComponent(HistoryLog.fileName))
        // Refused, or saved under a number never handed out; never revision 2 again.
        if let saved = try? store.flatten("d.pdf", page: 0, drawing: Drawing(strokes: [try dot(9, 9)])) {
            #expect(saved.revision > two.revision, "revision \(saved.revision) handed out again for other bytes")
        }
        if let first = try? store.revisions("d.pdf").first(where: { $0.revision == 1 }) {
            #expect(first.sha256 == original, "revision 1 is no longer the original")
        }
    }

    /// Another program's write, made when the fence is asked: first after the save has settled
    /// the history and opened the document, before it reads or copies anything; again just
    /// before the commit, once the new revision's bytes are written (in append mode, onto the
    /// document itself).
    final class OutsideWriteAtFence: @unchecked Sendable {
        // @unchecked: asked by the save on the test's own thread only.
        var asked = 0
        /// Which question writes: 1, before the work; 2, at the commit.
        let at: Int
        let write: () throws -> Void
        init(at: Int, _ write: @escaping () throws -> Void) { (self.at, self.write) = (at, write) }

        var fence: DocumentStore.WriteFence {
            { (_: String) throws(DocumentError) in
                self.asked += 1
                if self.asked == self.at { try? self.write() }
            }
        }
    }

    @Test("another program's write that meets a save (a cp of earlier bytes, a truncation, a one-byte append, a delete, a touch) answers busy, never an I/O error; the next save keeps that write as a revision, and a touch leaves no half-made revision",
          arguments: [SaveMode.replace, .append], ["earlier", "empty", "appended", "deleted", "earlier@commit", "appended@commit", "touched@commit"])
    func outsideWriteDuringSave(mode: SaveMode, write: String) throws {
        // Seen in a soak: `cp` of earlier bytes over the document while a save copied the current
        // revision's bytes read short, and the save answered INTERNAL "Input/output error".
        let folder = try freshFolder("outside-during-save")
        let url = folder.appendingPathComponent("d.pdf")
        try Data(onePagePDF()).write(to: url)
        let store = try DocumentStore(folder: folder, saveMode: mode)
        let two = try store.flatten("d.pdf", page: 0, drawing: Drawing(strokes: [try dot(5, 5)]))
        let three = try store.flatten("d.pdf", page: 0, drawing: Drawing(strokes: [try dot(9, 9)]))
        let (what, at) = write.hasSuffix("@commit") ? (String(write.dropLast(7)), 2) : (write, 1)
        let earlier = try whole(store, "d.pdf", 2).bytes
        // What the document holds after the other program's write; nil when it is gone.
        var written: [UInt8]?
        let outside = OutsideWriteAtFence(at: at) {
            switch what {
            case "earlier": written = earlier
            case "empty": written = []
            case "appended": written = Array(try Data(contentsOf: url)) + [0x0A]
            case "touched":
                // Its times change, not its bytes (in append mode, the save's own tail is there).
                try FileManager.default.setAttributes([.modificationDate: Date(timeIntervalSince1970: 1_000_000)], ofItemAtPath: url.path)
                return
            default:
                try FileManager.default.removeItem(at: url)
                return
            }
            try writeInPlace(written!, to: url)
        }
        #expect(throws: DocumentError.changedDuringSave("d.pdf")) {
            _ = try store.flatten("d.pdf", page: 0, drawing: Drawing(strokes: [try dot(20, 20)]), fence: outside.fence)
        }
        #expect(outside.asked >= at)
        // An empty file is refused as one being written (its revisions are listed again once it
        // holds a PDF); every other write leaves the history readable at once.
        if written == [] { return }
        let listed = try store.revisions("d.pdf")
        #expect(listed.contains { $0.revision == 2 && $0.sha256 == two.sha256 })
        #expect(listed.contains { $0.revision == 3 && $0.sha256 == three.sha256 })
        #expect(try whole(store, "d.pdf", 3).sha256 == three.sha256)
        if what == "touched" {
            // Nothing but times changed: the document is revision 3 again, with none of the
            // refused save's bytes, and the save tried again is revision 4.
            #expect(try DocumentStore.sha256(Array(Data(contentsOf: url))) == three.sha256)
            #expect(try store.flatten("d.pdf", page: 0, drawing: Drawing(strokes: [try dot(20, 20)])).revision == 4)
            return
        }
        guard let written else { return }
        // What the other program wrote is kept; the save tried again goes on after it.
        #expect(Array(try Data(contentsOf: url)) == written, "the other program's file was changed")
        let again = try store.flatten("d.pdf", page: 0, drawing: Drawing(strokes: [try dot(20, 20)]))
        #expect(again.revision > three.revision)
        #expect(try store.revisions("d.pdf").contains { $0.revision > three.revision && $0.sha256 == DocumentStore.sha256(written) },
                "the other program's bytes are not a revision of their own")
        #expect(try whole(store, "d.pdf", again.revision).sha256 == again.sha256)
    }
}
