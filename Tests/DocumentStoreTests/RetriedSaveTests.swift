import CanvasCore
@testable import DocumentStore
import Foundation
import TestSupport
import Testing

/// A save made for a request (`madeBy`) is found by that request run again, instead of being
/// made twice; the key is in the revision's record in the history's log, and goes with it.
@Suite("Saves run again by the same request", .serialized)
struct RetriedSaveTests {
    static let pdf = PDFFixtures.pdf([.init(mediaBox: [0, 0, 300, 200], content: "0 g 10 10 50 50 re f")])

    func setUp(_ label: String, keep: Int = 20) throws -> (DocumentStore, URL) {
        let folder = try freshFolder(label)
        try Data(Self.pdf).write(to: folder.appendingPathComponent("a.pdf"))
        return (try DocumentStore(folder: folder, keepRevisions: keep), folder)
    }

    func history(_ folder: URL) throws -> [String] { try historyNames(folder, "a.pdf") }

    func current(_ folder: URL) throws -> [UInt8] { Array(try Data(contentsOf: folder.appendingPathComponent("a.pdf"))) }

    @Test("the same key answers the revision it made, even after other saves and against a stale expectedRevision; another key saves")
    func sameKeyAnswersItsRevision() throws {
        let (store, folder) = try setUp("retried-save")
        let key = String(repeating: "ab", count: 16)
        let first = try store.flatten("a.pdf", page: 0, drawing: Drawing(strokes: [dot(50, 50)]), madeBy: key)
        #expect(try first.revision == 2 && first.sha256 == DocumentStore.sha256(current(folder)))
        let bytes = try current(folder)
        let again = try store.flatten("a.pdf", page: 0, drawing: Drawing(strokes: [dot(50, 50)]), expectedRevision: 1, madeBy: key)
        #expect(again == first)
        #expect(try current(folder) == bytes, "the document was not saved again")
        let other = try store.flatten("a.pdf", page: 0, drawing: Drawing(strokes: [dot(80, 80)]), madeBy: String(repeating: "cd", count: 16))
        #expect(other.revision == 3)
        #expect(try store.flatten("a.pdf", page: 0, drawing: Drawing(strokes: [dot(50, 50)]), madeBy: key) == first)
        #expect(try store.restore("a.pdf", revision: 1, madeBy: "01").revision == 4)
        #expect(try store.restore("a.pdf", revision: 1, madeBy: "01").revision == 4)
        #expect(try store.revisions("a.pdf").map(\.revision) == [1, 2, 3, 4])
        // Without a key, a save is a save.
        #expect(try store.flatten("a.pdf", page: 0, drawing: Drawing(strokes: [dot(50, 50)])).revision == 5)
    }

    @Test("a key committed by a save killed before its rename answers once the next writer has finished that save: it is not made twice")
    func keyOfAKilledCommittedSave() throws {
        let (store, folder) = try setUp("killed-mark-finished")
        let key = String(repeating: "ef", count: 16)
        _ = try store.flatten("a.pdf", page: 0, drawing: Drawing(strokes: [dot(20, 20)]), madeBy: "11")
        // What a save killed between its commit record (which carries its key) and its rename
        // leaves: its new file in the history, its bytes kept, the record naming the file.
        let made = try withUpdate(folder.appendingPathComponent("a.pdf"), Drawing(strokes: [dot(50, 50)]))
        #expect(try commitWithoutRename(store, folder, "a.pdf", bytes: made, madeBy: key, pageCount: 1) == 3)
        // Until a writer comes, the document is still revision 2.
        #expect(try store.summary("a.pdf").revision == 2)
        let saved = try store.flatten("a.pdf", page: 0, drawing: Drawing(strokes: [dot(50, 50)]), madeBy: key)
        #expect(saved.revision == 3 && saved.sha256 == DocumentStore.sha256(made) && saved.pageCount == 1)
        #expect(try current(folder) == made, "the committed save was finished, not made again")
        #expect(try store.revisions("a.pdf").map(\.revision) == [1, 2, 3])
        let state = try historyState(folder, "a.pdf")
        #expect(state.kept.map(\.madeBy) == [nil, "11", key])
        #expect(state.pending == nil && state.current?.revision == 3)
        #expect(try !history(folder).contains { $0.hasPrefix(".tmp.") })
    }

    @Test("a key committed by a save killed before its rename, its new file gone, is cleared and never answers; its number is not handed out again")
    func keyOfAnAbandonedSave() throws {
        let (store, folder) = try setUp("killed-mark")
        let key = String(repeating: "ef", count: 16)
        _ = try store.flatten("a.pdf", page: 0, drawing: Drawing(strokes: [dot(20, 20)]), madeBy: "11")
        let made = try withUpdate(folder.appendingPathComponent("a.pdf"), Drawing(strokes: [dot(50, 50)]))
        #expect(try commitWithoutRename(store, folder, "a.pdf", bytes: made, madeBy: key, pageCount: 1, temporary: ".tmp.99999.3") == 3)
        try FileManager.default.removeItem(at: historyFolder(folder, "a.pdf").appendingPathComponent(".tmp.99999.3"))
        #expect(try store.summary("a.pdf").revision == 2)
        let saved = try store.flatten("a.pdf", page: 0, drawing: Drawing(strokes: [dot(50, 50)]), madeBy: key)
        #expect(try saved.revision == 4 && saved.sha256 == DocumentStore.sha256(current(folder)))
        #expect(try store.revisions("a.pdf").map(\.revision) == [1, 2, 4])
        let state = try historyState(folder, "a.pdf")
        #expect(state.kept.map(\.revision) == [1, 2, 4])
        #expect(state.kept.map(\.madeBy) == [nil, "11", key])
        #expect(state.kept[1].sha256 == (try store.revisions("a.pdf")[1].sha256))
        #expect(try history(folder) == ["data.1", "history.log", "lock"], "the abandoned save's files are gone")
        #expect(throws: DocumentError.revisionNotFound(name: "a.pdf", revision: 3)) { try store.restore("a.pdf", revision: 3) }
    }

    @Test("a key is pruned with its revision")
    func marksArePruned() throws {
        let (store, folder) = try setUp("pruned-marks", keep: 3)
        for index in 0..<5 {
            _ = try store.flatten("a.pdf", page: 0, drawing: Drawing(strokes: [dot(20 + Double(index) * 10, 20)]), madeBy: "k\(index)")
        }
        // Revisions 1, 5 and 6 are kept, all lengths of one line (data.1); their keys are in their records.
        let state = try historyState(folder, "a.pdf")
        #expect(state.kept.map(\.revision) == [1, 5, 6])
        #expect(state.kept.map(\.madeBy) == [nil, "k3", "k4"])
        #expect(state.kept.map(\.pageCount) == [nil, 1, 1])
        #expect(state.kept.last?.sha256 == DocumentStore.sha256(try current(folder)))
        #expect(try history(folder) == ["data.1", "history.log", "lock"])
        // k0's revision is gone: the same request now saves again, as any request would; k3's answers.
        #expect(try store.flatten("a.pdf", page: 0, drawing: Drawing(strokes: [dot(50, 20)]), madeBy: "k3").revision == 5)
        #expect(try store.flatten("a.pdf", page: 0, drawing: Drawing(strokes: [dot(20, 20)]), madeBy: "k0").revision == 7)
    }

    @Test("a save's key is read back exactly from its record, and a record with a key no save makes is not one")
    func keysInRecords() throws {
        let key = "0f" + String(repeating: "9", count: 30)
        var record = try #require(HistoryRecord.revision(12, line: 3, length: 5000, sha256: String(repeating: "e", count: 64), state: SHA256Hasher().midstate,
                                                         saved: 1, source: "save", document: nil, lineFile: nil, madeBy: key, pageCount: 2000).kept)
        #expect(HistoryRecord(decoding: HistoryRecord.revision(record).encoded()) == .revision(record))
        record.madeBy = String(repeating: "Z9", count: 32)
        #expect(HistoryRecord(decoding: HistoryRecord.revision(record).encoded())?.kept?.madeBy == String(repeating: "Z9", count: 32))
        for bad in ["", "k.1", "a-b", "a b", "k/1", "é", String(repeating: "a", count: 65)] {
            record.madeBy = bad
            #expect(HistoryRecord(decoding: HistoryRecord.revision(record).encoded()) == nil, "\(bad)")
        }
    }

    @Test("an older layout's mark names are read back exactly for its migration, and nothing else is taken for one")
    func legacyMarkNames() {
        let key = "0f" + String(repeating: "9", count: 30)
        let mark = LegacyHistory.Mark(name: "12.madeby.\(key).2000.\(String(repeating: "e", count: 64))")
        #expect(mark?.revision == 12 && mark?.key == key && mark?.pageCount == 2000)
        for name in ["12.pdf", ".tmp.1.2", "12.madeby.k.1", "x.madeby.k.1.s", "0.madeby.k.1.s", "12.madeby.k.x.s", "12.madeby.k.1.s.t",
                     "012.madeby.k.1.s", "+12.madeby.k.1.s", "12.madeby.k-1.1.s", "12.madeby..1.s"] {
            #expect(LegacyHistory.Mark(name: name) == nil, "\(name)")
        }
    }

    /// A fence that lets its first `allowed` questions through and refuses the rest, counting them.
    final class CountingFence: @unchecked Sendable {
        // @unchecked: asked by the save on the test's own thread only.
        var asked = 0
        let allowed: Int
        init(allowing allowed: Int) { self.allowed = allowed }

        var fence: DocumentStore.WriteFence {
            { (name: String) throws(DocumentError) in
                self.asked += 1
                guard self.asked <= self.allowed else {
                    throw .refused(name: name, reason: "sessionMoved", message: "the session moved while the save was written")
                }
            }
        }
    }

    @Test("a fence that holds before the save's work and not at its commit makes no revision and leaves nothing, in both save modes",
          arguments: [SaveMode.replace, .append])
    func fenceAskedAgainAtTheCommit(mode: SaveMode) throws {
        // What a canvasd paused in the middle of a save meets when it goes on: the session it
        // saved for moved meanwhile. Asked only before the work, the save committed anyway.
        let folder = try freshFolder("commit-fence")
        try Data(Self.pdf).write(to: folder.appendingPathComponent("a.pdf"))
        let store = try DocumentStore(folder: folder, saveMode: mode)
        _ = try store.flatten("a.pdf", page: 0, drawing: Drawing(strokes: [dot(20, 20)]))
        let bytes = try current(folder), listed = try history(folder), revisions = try store.revisions("a.pdf")
        let logged = try historyState(folder, "a.pdf")
        let refusing = CountingFence(allowing: 1)
        #expect(throws: DocumentError.self) {
            _ = try store.flatten("a.pdf", page: 0, drawing: Drawing(strokes: [dot(50, 50)]), madeBy: "ab12", fence: refusing.fence)
        }
        #expect(refusing.asked == 2, "asked before the work and at the commit")
        #expect(try current(folder) == bytes, "the document is as it was, byte for byte")
        #expect(try history(folder) == listed, "no file or temporary left in the history")
        let after = try historyState(folder, "a.pdf")
        #expect(after.kept == logged.kept && after.next == logged.next, "no revision or key committed in the log")
        #expect(after.intent == nil && after.pending == nil && after.current?.revision == 2)
        // (Not the modification times: an append taken back has written to the file and cut it.)
        func kept(_ list: [RevisionSummary]) -> [String] { list.map { "\($0.revision) \($0.bytes) \($0.sha256) \($0.current)" } }
        #expect(try kept(store.revisions("a.pdf")) == kept(revisions))
        // A fence that holds both times saves, and the next revision is the one refused.
        let holding = CountingFence(allowing: 2)
        let saved = try store.flatten("a.pdf", page: 0, drawing: Drawing(strokes: [dot(50, 50)]), madeBy: "ab12", fence: holding.fence)
        #expect(holding.asked == 2 && saved.revision == 3)
        #expect(try saved.sha256 == DocumentStore.sha256(current(folder)))
    }

    @Test("a save refused at its commit leaves the history's bytes as they were, in both save modes",
          arguments: [SaveMode.replace, .append])
    func fenceLeavesNoBytes(mode: SaveMode) throws {
        let folder = try freshFolder("commit-fence-bytes")
        try Data(Self.pdf).write(to: folder.appendingPathComponent("a.pdf"))
        let store = try DocumentStore(folder: folder, saveMode: mode)
        _ = try store.flatten("a.pdf", page: 0, drawing: Drawing(strokes: [dot(20, 20)]))
        func sizes() throws -> [String: Int64] {
            Dictionary(uniqueKeysWithValues: try lineFiles(folder, "a.pdf").map { ($0, try historyFileSize(folder, "a.pdf", $0)) })
        }
        let before = try sizes()
        #expect(throws: DocumentError.self) {
            _ = try store.flatten("a.pdf", page: 0, drawing: Drawing(strokes: [dot(50, 50)]), fence: CountingFence(allowing: 1).fence)
        }
        #expect(try sizes() == before, "the refused save's bytes were left in the history's line files")
    }
}
