import CanvasCore
@testable import DocumentStore
import Foundation
import TestSupport
import Testing

/// Tests/Fixtures/history-layouts: document folders made by real runs of the two canvasd
/// versions before the log (see its README.md), and what those versions listed.
private let fixtures = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .appendingPathComponent("Fixtures/history-layouts")

private struct Manifest: Decodable {
    struct Revision: Decodable, Equatable {
        let revision: Int
        let sha256: String
        let bytes: Int64
        let current: Bool
    }

    struct Document: Decodable {
        let current: Int
        let sha256: String
        let pageCount: Int
        let revisions: [Revision]
    }

    let documents: [String: Document]
}

private let manifests: [String: Manifest] = {
    guard let data = try? Data(contentsOf: fixtures.appendingPathComponent("manifest.json")),
          let decoded = try? JSONDecoder().decode([String: Manifest].self, from: data) else { return [:] }
    return decoded
}()

@Suite("Histories of the layouts before the log", .serialized)
struct LegacyLayoutTests {
    @Test("a folder of an older layout keeps every revision's number, bytes and sha256, its keys, and shares nothing with the document once migrated",
          arguments: ["whole-files.tar", "records.tar"])
    func migrated(archive: String) throws {
        let manifest = try #require(manifests[archive])
        let folder = try freshFolder("legacy-\(archive)")
        #expect(try run("/usr/bin/tar", ["-xf", fixtures.appendingPathComponent(archive).path, "-C", folder.path]).status == 0)
        let documents = folder.appendingPathComponent("documents")
        // The keys the old marks hold, by document and revision.
        var keys: [String: [Int: String]] = [:]
        for name in manifest.documents.keys {
            for file in (try? historyNames(documents, name)) ?? [] {
                if let mark = LegacyHistory.Mark(name: file) { keys[name, default: [:]][mark.revision] = mark.key }
            }
        }
        #expect(!keys.isEmpty, "the fixture has marks")
        let store = try DocumentStore(folder: documents)
        for (name, expected) in manifest.documents.sorted(by: { $0.key < $1.key }) {
            let summary = try store.summary(name)
            #expect(summary.revision == expected.current && summary.sha256 == expected.sha256 && summary.pageCount == expected.pageCount, "\(name)")
            let listed = try store.revisions(name).map { Manifest.Revision(revision: $0.revision, sha256: $0.sha256, bytes: $0.bytes, current: $0.current) }
            #expect(listed == expected.revisions, "\(archive) \(name)")
            for revision in expected.revisions {
                let kept = try store.bytes(name, revision: revision.revision, offset: 0, length: 1 << 30)
                #expect(kept.sha256 == revision.sha256 && DocumentStore.sha256(kept.bytes) == revision.sha256, "\(name) revision \(revision.revision)")
            }
            guard expected.revisions.count > 1 else { continue }
            // Migrated by that first read: the log and its lines, no name of the old grammars.
            let names = try historyNames(documents, name)
            #expect(names.allSatisfy { RevisionHistory.line(ofFile: $0) != nil || $0 == "history.log" || $0 == "lock" }, "\(name): \(names)")
            #expect(try !historySharesTheDocument(documents, name), "\(name)")
            let state = try historyState(documents, name)
            for (revision, key) in keys[name] ?? [:] {
                #expect(state.revisions[revision]?.madeBy == key, "\(name) revision \(revision)")
                // The request that made it, run again, answers it and saves nothing.
                let before = try Data(contentsOf: documents.appendingPathComponent(name))
                let again = try store.flatten(name, page: 0, drawing: Drawing(strokes: [try dot(5, 5)]), madeBy: key)
                #expect(again.revision == revision && again.sha256 == expected.revisions.first { $0.revision == revision }?.sha256)
                #expect(try Data(contentsOf: documents.appendingPathComponent(name)) == before)
            }
            // The next save is one past the newest number the old layout handed out.
            let saved = try store.flatten(name, page: 0, drawing: Drawing(strokes: [try dot(9, 9)]))
            let acknowledged = expected.revisions.map(\.revision).max() ?? 0
            #expect(saved.revision == acknowledged + 1, "\(name)")
            #expect(try saved.sha256 == DocumentStore.sha256(Array(Data(contentsOf: documents.appendingPathComponent(name)))))
        }
        // Read again by another store: the same.
        let again = try DocumentStore(folder: documents)
        for (name, expected) in manifest.documents where expected.revisions.count > 1 {
            let listed = try again.revisions(name)
            #expect(Array(listed.map(\.sha256).prefix(expected.revisions.count)) == expected.revisions.map(\.sha256), "\(name)")
        }
    }
}
