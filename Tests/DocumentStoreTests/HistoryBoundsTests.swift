import CanvasCore
@testable import DocumentStore
import Foundation
import TestSupport
import Testing

/// What keeps a history within bounds and its files to itself (issue 42): outside changes
/// pruned as saves are, a log compacted however many revisions are kept, revision numbers the
/// protocol can name, and hard links left alone by append mode.
@Suite("History within bounds", .serialized)
struct HistoryBoundsTests {
    static func onePage(_ shade: Int) -> [UInt8] {
        PDFFixtures.pdf([.init(content: "0.\(shade) g 10 10 50 50 re f")])
    }

    /// A fresh folder with one document, `d.pdf`, and a store on it.
    static func document(_ label: String, keepRevisions: Int = 20, mode: SaveMode = .replace) throws -> (DocumentStore, URL, URL) {
        let folder = try freshFolder(label)
        let url = folder.appendingPathComponent("d.pdf")
        try Data(onePage(0)).write(to: url)
        return (try DocumentStore(folder: folder, keepRevisions: keepRevisions, saveMode: mode), folder, url)
    }

    @Test("a document changed only by another program keeps its revisions as saves do (--keep-revisions)")
    func outsideChangesPruned() throws {
        // Before, 600 outside changes, each read, left 603 files under --keep-revisions 20.
        let (store, folder, url) = try Self.document("outside-pruned", keepRevisions: 3)
        _ = try store.flatten("d.pdf", page: 0, drawing: Drawing(strokes: [try dot(20, 20)]))   // the history starts: 1, 2
        for shade in 1...12 {
            usleep(2_000)   // past the file system's timestamp tick
            try Data(Self.onePage(shade)).write(to: url)
            _ = try store.info("d.pdf")
        }
        let revisions = try store.revisions("d.pdf")
        #expect(revisions.map(\.revision) == [1, 13, 14], "\(revisions.map(\.revision))")
        #expect(revisions.last?.sha256 == DocumentStore.sha256(Self.onePage(12)) && revisions.last?.current == true)
        let lines = try lineFiles(folder, "d.pdf")
        #expect(lines.count <= 3, "\(lines)")
    }

    @Test("with every revision kept, the log is still written again once most of it is the past, and stays readable")
    func compactedWithManyKept() throws {
        // Before, with a large --keep-revisions, the log compacted only at eight records a kept
        // revision: never, so it grew until a save wrote one no reader took (64 MiB).
        let (store, folder, _) = try Self.document("compacted-kept", keepRevisions: 100_000)
        var made: [Int: String] = [:]
        for index in 0..<300 {
            let saved = try store.flatten("d.pdf", page: 0, drawing: Drawing(strokes: [try dot(Double(10 + index % 80), 20)]))
            made[saved.revision] = saved.sha256
        }
        let records = try historyRecords(folder, "d.pdf")
        let state = try historyState(folder, "d.pdf")
        #expect(state.revisions.count == 301)
        #expect(records.count < 2 * (state.revisions.count + state.lines.count + 2) + HistoryState.compactionRecords,
                "\(records.count) records for \(state.revisions.count) kept")
        #expect(records.contains { $0.kind == "base" }, "never compacted")
        let listed = Dictionary(uniqueKeysWithValues: try store.revisions("d.pdf").map { ($0.revision, $0.sha256) })
        #expect(made.allSatisfy { listed[$0.key] == $0.value })
    }

    @Test("a forged record whose state has a sign, or whose temporary file is a path, is no record")
    func forgedFieldsRefused() throws {
        let good = try #require(HistoryRecord.revision(3, line: 1, length: 900, sha256: String(repeating: "a", count: 64),
                                                       state: SHA256Hasher().midstate, saved: 1, source: "save", document: nil,
                                                       lineFile: nil, temporary: ".tmp.1.2").kept)
        #expect(HistoryRecord(decoding: HistoryRecord.revision(good).encoded()) == .revision(good))
        let payload = String(decoding: HistoryRecord.revision(good).encoded(), as: UTF8.self)
        let state = good.midstate.hex
        // UInt32(_:radix:) takes "+6a09e667"; before, such a state was read as the real one.
        let signed = payload.replacingOccurrences(of: state, with: "+" + state.dropFirst())
        #expect(HistoryRecord(decoding: Array(signed.utf8)) == nil)
        #expect(HistoryRecord(decoding: Array(payload.replacingOccurrences(of: state, with: state.uppercased()).utf8)) == .revision(good))
        // Before, a settle would stat and rename whatever path a hand-edited log named.
        for path in ["../d.pdf", ".tmp./../../etc/x", ".tmp.", "data.1", "/tmp/x"] {
            var forged = good
            forged.temporary = path
            #expect(HistoryRecord(decoding: HistoryRecord.revision(forged).encoded()) == nil, "\(path)")
        }
    }

    @Test("a forged hash state in a well-chained record is never built on: the save is refused as damaged, nothing written",
          arguments: [SaveMode.replace, .append])
    func forgedMidstateRefused(mode: SaveMode) throws {
        let (store, _, url) = try Self.document("forged-midstate-\(mode)", mode: mode)
        let two = try store.flatten("d.pdf", page: 0, drawing: Drawing(strokes: [try dot(20, 20)]))
        // Revision 2 recorded again with another state, the log's checksum chain written as a
        // writer writes it: before, the next save continued from it and acknowledged a sha256
        // that was not its bytes'.
        let writer = try historyWriter(store, "d.pdf")
        var forged = try #require(writer.state.revisions[two.revision])
        forged.midstate = SHA256Midstate(words: forged.midstate.words.map { $0 ^ 1 }, length: forged.midstate.length)
        try writer.append([.revision(forged)], durable: true)
        writer.close()
        let before = try Data(contentsOf: url)
        do {
            let made = try store.flatten("d.pdf", page: 0, drawing: Drawing(strokes: [try dot(30, 30)]))
            Issue.record("saved as revision \(made.revision), sha256 \(made.sha256), over a forged state; the file hashes to \(DocumentStore.sha256(Array(try Data(contentsOf: url))))")
        } catch let error as DocumentError {
            guard case .unreadable(_, let reason, let message) = error else { throw error }
            #expect(reason == "damaged" && message.contains("hash state"), "\(message)")
        }
        #expect(try Data(contentsOf: url) == before)
        #expect(try store.summary("d.pdf").revision == two.revision)
    }

    /// A record says which file holds which bytes; another program can forge one, checksum
    /// chain and all. Before, a stat that matched was enough: the document's bytes changed in
    /// place and an identity record forged for the file as it now is made a fresh canvasd answer
    /// revision 2's sha256 for bytes that were not revision 2's.
    @Test("a forged identity record is believed only as far as the bytes hash to it: the file is the next revision, its own sha256",
          arguments: [SaveMode.replace, .append])
    func forgedIdentityNotBelieved(mode: SaveMode) throws {
        let (store, folder, url) = try Self.document("forged-identity-\(mode)", mode: mode)
        let two = try store.flatten("d.pdf", page: 0, drawing: Drawing(strokes: [try dot(20, 20)]))
        // Another program writes other bytes of the same length in place (the page's grey 0.0
        // made 0.7) ...
        var bytes = Array(try Data(contentsOf: url))
        let pattern = Array("0.0 g".utf8)
        let at = try #require((0...(bytes.count - pattern.count)).first { Array(bytes[$0..<($0 + pattern.count)]) == pattern })
        bytes[at + 2] = UInt8(ascii: "7")
        let handle = try FileHandle(forWritingTo: url)
        try handle.write(contentsOf: Data(bytes))
        try handle.close()
        // ... and forges the record that the file, as it now is, is revision 2.
        let writer = try historyWriter(store, "d.pdf")
        try writer.append([.identity(two.revision, document: try fileSnapshot(url))], durable: true)
        writer.close()
        // A canvasd that starts now (nothing vouched for yet).
        let fresh = try DocumentStore(folder: folder, saveMode: mode)
        let summary = try fresh.summary("d.pdf")
        #expect(summary.sha256 == DocumentStore.sha256(bytes), "answered \(summary.sha256) for bytes that hash otherwise")
        #expect(summary.revision == two.revision + 1)
        // Revision 2 is still kept, with its own bytes.
        let kept = try fresh.bytes("d.pdf", revision: two.revision, offset: 0, length: 1 << 20)
        #expect(kept.sha256 == two.sha256 && DocumentStore.sha256(kept.bytes) == two.sha256)
    }

    /// Revision 3's record written again with another sha256, everything else as it was (its
    /// line's and the document's files as the log last saw them), the chain recomputed. Before,
    /// a fresh canvasd served both the document and revision 3's kept bytes under that sha256.
    @Test("a forged revision record is never served: the document is hashed and kept as what it is, the kept bytes refused as damaged",
          arguments: [SaveMode.replace, .append])
    func forgedRevisionNotServed(mode: SaveMode) throws {
        let (store, folder, url) = try Self.document("forged-revision-\(mode)", mode: mode)
        _ = try store.flatten("d.pdf", page: 0, drawing: Drawing(strokes: [try dot(20, 20)]))
        let three = try store.flatten("d.pdf", page: 0, drawing: Drawing(strokes: [try dot(30, 30)]))
        let writer = try historyWriter(store, "d.pdf")
        var forged = try #require(writer.state.revisions[three.revision])
        forged.sha256 = String(repeating: "ab", count: 32)
        try writer.append([.revision(forged)], durable: true)
        writer.close()
        let fresh = try DocumentStore(folder: folder, saveMode: mode)
        let summary = try fresh.summary("d.pdf")
        let actual = DocumentStore.sha256(Array(try Data(contentsOf: url)))
        #expect(summary.sha256 == three.sha256 && summary.sha256 == actual, "answered \(summary.sha256) for bytes that hash to \(actual)")
        do {
            let served = try fresh.bytes("d.pdf", revision: three.revision, offset: 0, length: 1 << 20)
            Issue.record("served revision \(three.revision) as \(served.sha256); its bytes hash to \(DocumentStore.sha256(served.bytes))")
        } catch {
            guard case .unreadable(_, let reason, let message) = error else { throw error }
            #expect(reason == "damaged" && message.contains("do not hash"), "\(message)")
        }
    }

    @Test("a record naming a revision past what the protocol can name is no record")
    func revisionNumbersBounded() throws {
        let reads = { (record: HistoryRecord) in HistoryRecord(decoding: record.encoded()) == record }
        #expect(reads(.base(next: HistoryLog.maxRevision + 1)))
        #expect(!reads(.base(next: HistoryLog.maxRevision + 2)))
        #expect(!reads(.abandoned(HistoryLog.maxRevision + 1)))
        #expect(reads(.abandoned(HistoryLog.maxRevision)))
        // A forged base (2^53 - 2) decodes as no record: the log is damaged there, never a lie.
        #expect(HistoryRecord(decoding: Array(#"{"kind":"base","next":9007199254740990}"#.utf8)) == nil)
    }

    @Test("append mode leaves a hard link alone: the document is saved by replace and the other name keeps its bytes")
    func hardLinksNotWrittenInPlace() throws {
        let folder = try freshFolder("append-links")
        let url = folder.appendingPathComponent("doc.pdf"), twin = folder.appendingPathComponent("twin.pdf")
        try Data(Self.onePage(3)).write(to: url)
        let store = try DocumentStore(folder: folder, saveMode: .append)
        _ = try store.flatten("doc.pdf", page: 0, drawing: Drawing(strokes: [try dot(20, 20)]))
        try FileManager.default.linkItem(at: url, to: twin)   // a `cp -al` backup
        let before = try Data(contentsOf: twin)
        let saved = try store.flatten("doc.pdf", page: 0, drawing: Drawing(strokes: [try dot(40, 40)]))
        #expect(try Data(contentsOf: twin) == before, "the save wrote into the other name")
        #expect(DocumentStore.sha256(Array(try Data(contentsOf: url))) == saved.sha256)
        // Its own again (one name), the next save appends in place as before.
        let inode = try fileSnapshot(url).inode
        _ = try store.flatten("doc.pdf", page: 0, drawing: Drawing(strokes: [try dot(60, 60)]))
        #expect(try fileSnapshot(url).inode == inode)
    }
}
