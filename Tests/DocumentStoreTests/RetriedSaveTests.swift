import CanvasCore
@testable import DocumentStore
import Foundation
import TestSupport
import Testing

/// A save made for a request (`madeBy`) is found by that request run again, instead of being
/// made twice; marks go with the revisions they name.
@Suite("Saves run again by the same request", .serialized)
struct RetriedSaveTests {
    static let pdf = PDFFixtures.pdf([.init(mediaBox: [0, 0, 300, 200], content: "0 g 10 10 50 50 re f")])

    func setUp(_ label: String, keep: Int = 20) throws -> (DocumentStore, URL) {
        let folder = try freshFolder(label)
        try Data(Self.pdf).write(to: folder.appendingPathComponent("a.pdf"))
        return (try DocumentStore(folder: folder, keepRevisions: keep), folder)
    }

    func history(_ folder: URL) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: folder.appendingPathComponent(".canvas-revisions/a.pdf").path).sorted()
    }

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

    @Test("a mark past the current revision, left by a save killed before its rename, is cleared and never answers")
    func markOfAKilledSave() throws {
        let (store, folder) = try setUp("killed-mark")
        let key = String(repeating: "ef", count: 16)
        _ = try store.flatten("a.pdf", page: 0, drawing: Drawing(strokes: [dot(20, 20)]), madeBy: "11")
        // What a save killed between its mark and its rename leaves: an entry and a mark for
        // revision 3, which never became the document.
        let revisions = folder.appendingPathComponent(".canvas-revisions/a.pdf")
        try Data(Self.pdf).write(to: revisions.appendingPathComponent("3.pdf"))
        let killed = RevisionHistory.Mark(revision: 3, key: key, pageCount: 1, sha256: String(repeating: "0", count: 64))
        #expect(FileManager.default.createFile(atPath: revisions.appendingPathComponent(killed.name).path, contents: nil))
        let saved = try store.flatten("a.pdf", page: 0, drawing: Drawing(strokes: [dot(50, 50)]), madeBy: key)
        #expect(try saved.revision == 3 && saved.sha256 == DocumentStore.sha256(current(folder)))
        #expect(try history(folder).filter { $0.contains(".madeby.") } == [
            RevisionHistory.Mark(revision: 2, key: "11", pageCount: 1, sha256: try store.revisions("a.pdf")[1].sha256).name,
            RevisionHistory.Mark(revision: 3, key: key, pageCount: 1, sha256: saved.sha256).name,
        ])
    }

    @Test("a mark is pruned with its revision")
    func marksArePruned() throws {
        let (store, folder) = try setUp("pruned-marks", keep: 3)
        for index in 0..<5 {
            _ = try store.flatten("a.pdf", page: 0, drawing: Drawing(strokes: [dot(20 + Double(index) * 10, 20)]), madeBy: "k\(index)")
        }
        // Revisions 1, 5 and 6 are kept, all lengths of one file (6-1.pdf, the document itself).
        #expect(try history(folder).filter { !$0.contains(".rev.") } == ["5.madeby.k3.1.\(try store.revisions("a.pdf")[1].sha256)", "6-1.pdf",
                                                                         "6.madeby.k4.1.\(DocumentStore.sha256(try current(folder)))"])
        #expect(try history(folder).compactMap { RevisionHistory.Record(name: $0)?.revision }.sorted() == [1, 5, 6])
        // k0's revision is gone: the same request now saves again, as any request would.
        #expect(try store.flatten("a.pdf", page: 0, drawing: Drawing(strokes: [dot(20, 20)]), madeBy: "k0").revision == 7)
    }

    @Test("mark names are read back exactly, and nothing else is taken for one")
    func markNames() {
        let mark = RevisionHistory.Mark(revision: 12, key: "0f" + String(repeating: "9", count: 30), pageCount: 2000, sha256: String(repeating: "e", count: 64))
        #expect(RevisionHistory.Mark(name: mark.name) == mark)
        for name in ["12.pdf", ".tmp.1.2", "12.madeby.k.1", "x.madeby.k.1.s", "0.madeby.k.1.s", "12.madeby.k.x.s", "12.madeby.k.1.s.t", "012.madeby.k.1.s"] {
            #expect(RevisionHistory.Mark(name: name) == nil, "\(name)")
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
        let refusing = CountingFence(allowing: 1)
        #expect(throws: DocumentError.self) {
            _ = try store.flatten("a.pdf", page: 0, drawing: Drawing(strokes: [dot(50, 50)]), madeBy: "ab12", fence: refusing.fence)
        }
        #expect(refusing.asked == 2, "asked before the work and at the commit")
        #expect(try current(folder) == bytes, "the document is as it was, byte for byte")
        #expect(try history(folder) == listed, "no file, record, mark or temporary left in the history")
        // (Not the modification times: an append taken back has written to the file and cut it.)
        func kept(_ list: [RevisionSummary]) -> [String] { list.map { "\($0.revision) \($0.bytes) \($0.sha256) \($0.current)" } }
        #expect(try kept(store.revisions("a.pdf")) == kept(revisions))
        // A fence that holds both times saves, and the next revision is the one refused.
        let holding = CountingFence(allowing: 2)
        let saved = try store.flatten("a.pdf", page: 0, drawing: Drawing(strokes: [dot(50, 50)]), madeBy: "ab12", fence: holding.fence)
        #expect(holding.asked == 2 && saved.revision == 3)
        #expect(try saved.sha256 == DocumentStore.sha256(current(folder)))
    }
}
