import CanvasCore
@testable import DocumentStore
import Foundation
import TestSupport
import Testing

/// A save that finds its history folder as its own process left it skips the look through the
/// folder (`SettledFolders`, history-log.md 7.8): on a network file system that look was most of
/// a save's cost (issue 46). These check that the skip happens, and that whatever another
/// program or another canvasd does to the folder still gets looked at, or is never built on.
@Suite("Settling without a look", .serialized)
struct SettledFolderTests {
    static func document(_ label: String, mode: SaveMode, keepRevisions: Int = 20) throws -> (DocumentStore, URL, URL) {
        let folder = try freshFolder(label)
        let url = folder.appendingPathComponent("d.pdf")
        try Data(HistoryBoundsTests.onePage(0)).write(to: url)
        return (try DocumentStore(folder: folder, keepRevisions: keepRevisions, saveMode: mode), folder, url)
    }

    static func save(_ store: DocumentStore, _ index: Int) throws -> DocumentSummary {
        try store.flatten("d.pdf", page: 0, drawing: Drawing(strokes: [try dot(Double(10 + index % 80), 20)]))
    }

    /// Past the file system's timestamp tick, so that a change made now moves the folder's times.
    static func tick() { usleep(20_000) }

    @Test("a second save of the same process skips the look; a file put in the folder by hand makes the next save look and remove it",
          arguments: [SaveMode.replace, .append])
    func skippedUntilTheFolderChanges(mode: SaveMode) throws {
        let (store, folder, _) = try Self.document("settled-skip-\(mode)", mode: mode)
        _ = try Self.save(store, 1)
        let before = store.settledFolders.looksSkipped
        _ = try Self.save(store, 2)
        _ = try Self.save(store, 3)
        #expect(store.settledFolders.looksSkipped == before + 2, "each save looked through the folder")
        Self.tick()
        let stray = historyFolder(folder, "d.pdf").appendingPathComponent(".tmp.12345.6")
        try Data("left by a killed writer".utf8).write(to: stray)
        let fourth = try Self.save(store, 4)
        let names = try historyNames(folder, "d.pdf")
        #expect(!names.contains(stray.lastPathComponent), "the next save did not look: \(names)")
        #expect(store.settledFolders.looksSkipped == before + 2)
        #expect(try store.summary("d.pdf").sha256 == fourth.sha256)
    }

    @Test("two stores on one folder (two canvasd): each save after the other's looks, and no number is handed out twice",
          arguments: [SaveMode.replace, .append])
    func anotherWriterMakesItLook(mode: SaveMode) throws {
        let (first, folder, url) = try Self.document("settled-two-\(mode)", mode: mode)
        let second = try DocumentStore(folder: folder, keepRevisions: 20, saveMode: mode)
        var made: [Int: String] = [:]
        for index in 0..<12 {
            // Two saves in a row from one, then the other: the second of a pair may skip.
            let store = (index / 2) % 2 == 0 ? first : second
            let summary = try Self.save(store, index)
            #expect(made[summary.revision] == nil, "revision \(summary.revision) handed out twice")
            made[summary.revision] = summary.sha256
        }
        #expect(made.count == 12)
        #expect(first.settledFolders.looksSkipped >= 3 && second.settledFolders.looksSkipped >= 3,
                "\(first.settledFolders.looksSkipped), \(second.settledFolders.looksSkipped)")
        let listed = Dictionary(uniqueKeysWithValues: try DocumentStore(folder: folder, saveMode: mode).revisions("d.pdf").map { ($0.revision, $0.sha256) })
        #expect(made.allSatisfy { listed[$0.key] == $0.value }, "\(listed)")
        #expect(DocumentStore.sha256(Array(try Data(contentsOf: url))) == made[made.keys.max()!])
    }

    @Test("a line file written in place by another program is not built on by a save that skipped the look: every kept revision is still its bytes",
          arguments: [SaveMode.replace, .append])
    func lineWrittenInPlaceNotBuiltOn(mode: SaveMode) throws {
        let (store, folder, url) = try Self.document("settled-line-\(mode)", mode: mode)
        var made: [Int: String] = [:]
        for index in 0..<3 {
            let summary = try Self.save(store, index)
            made[summary.revision] = summary.sha256
        }
        let state = try historyState(folder, "d.pdf")
        let line = try #require(state.current.flatMap { state.revisions[$0.revision] }?.line)
        Self.tick()
        // Another program appends to the line the next save would continue (no name made, so
        // the folder's times stay as they were).
        let handle = try FileHandle(forWritingTo: historyFolder(folder, "d.pdf").appendingPathComponent(RevisionHistory.lineName(line)))
        try handle.seekToEnd()
        try handle.write(contentsOf: Data("% not canvasd's\n".utf8))
        try handle.close()
        let skipped = store.settledFolders.looksSkipped
        let next = try Self.save(store, 9)
        #expect(store.settledFolders.looksSkipped == skipped + 1)
        made[next.revision] = next.sha256
        #expect(DocumentStore.sha256(Array(try Data(contentsOf: url))) == next.sha256)
        let after = try historyState(folder, "d.pdf")
        #expect(after.revisions[next.revision]?.line != line, "the save continued a line another program wrote")
        for (revision, sha256) in made {
            let kept = try store.bytes("d.pdf", revision: revision, offset: 0, length: 1 << 20)
            #expect(kept.sha256 == sha256 && DocumentStore.sha256(kept.bytes) == sha256, "revision \(revision)")
        }
    }
}
