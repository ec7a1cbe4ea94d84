@testable import DocumentStore
import Foundation
import Testing

/// `protocol/vectors/history-log/`: each log as canvasd wrote it (or damaged from one), and what
/// a reader of `protocol/history-log.md` must conclude. The Python reader written from the
/// document reads them too (test_history_log_vectors.py); this is canvasd's own reader on them.
@Suite("History log vectors")
struct HistoryLogVectorTests {
    static let folder = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("protocol/vectors/history-log")

    static func vectors() throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: folder.path).filter { $0.hasSuffix(".json") }.sorted()
    }

    @Test("every vector reads as it says: its records, its end, its torn tail, the state they make, or its refusal")
    func vectorsRead() throws {
        let names = try Self.vectors()
        #expect(names.count >= 10)
        for name in names {
            let expected = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: Self.folder.appendingPathComponent(name))) as? [String: Any])
            let log = try [UInt8](Data(contentsOf: Self.folder.appendingPathComponent(try #require(expected["log"] as? String))))
            let parsed = HistoryLog.parse(log)
            switch expected["outcome"] as? String {
            case "read":
                let reading = try #require(try? parsed.get(), "\(name): \(parsed)")
                #expect(reading.end == Int64(try #require(expected["end"] as? Int)), "\(name)")
                #expect(reading.damagedTail == (expected["tornTail"] as? Bool), "\(name)")
                let records = try #require(expected["records"] as? [[String: Any]])
                #expect(reading.records.map(\.kind) == records.compactMap { $0["kind"] as? String }, "\(name)")
                // Each record's payload, written again, is the object the vector names.
                for (record, want) in zip(reading.records, records) {
                    let mine = try JSONSerialization.jsonObject(with: Data(record.encoded())) as? NSDictionary
                    #expect(mine == (want["fields"] as? [String: Any]).map { NSDictionary(dictionary: $0.merging(["kind": want["kind"]!]) { a, _ in a }) },
                            "\(name) at \(want["offset"] ?? "?")")
                }
                var state = HistoryState()
                for record in reading.records { state.apply(record) }
                let want = try #require(expected["state"] as? [String: Any])
                #expect(state.next == want["next"] as? Int, "\(name)")
                let kept = try #require(want["kept"] as? [[String: Any]])
                #expect(state.kept.map(\.revision) == kept.compactMap { $0["revision"] as? Int }, "\(name)")
                #expect(state.kept.map(\.sha256) == kept.compactMap { $0["sha256"] as? String }, "\(name)")
                #expect(state.kept.map(\.length) == kept.compactMap { ($0["length"] as? Int).map(Int64.init) }, "\(name)")
                #expect(state.pending?.revision == want["pendingRename"] as? Int, "\(name)")
                #expect(state.current?.revision == (want["current"] as? [String: Any])?["revision"] as? Int, "\(name)")
                #expect(state.records == want["records"] as? Int, "\(name)")
            case "damaged":
                #expect(parsed == .failure(.damaged(at: Int64(try #require(expected["at"] as? Int)))), "\(name): \(parsed)")
            case "notALog":
                #expect(parsed == .failure(.notALog), "\(name): \(parsed)")
            case "unknownVersion":
                #expect(parsed == .failure(.newerVersion(UInt32(try #require(expected["version"] as? Int)))), "\(name): \(parsed)")
            case let other:
                Issue.record("\(name): an outcome no reader knows: \(other ?? "none")")
            }
        }
    }
}
