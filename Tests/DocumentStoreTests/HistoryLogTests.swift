import CanvasCore
@testable import DocumentStore
import Foundation
import TestSupport
import Testing

/// A file snapshot with made-up numbers (the log stores whatever a stat gave).
private func snapshot(inode: UInt64, size: Int64 = 1000, modified: Int64 = 5_000_000_001, changed: Int64 = 5_000_000_002) -> FileSnapshot {
    let json = #"{"device":2049,"inode":\#(inode),"size":\#(size),"modified":\#(modified),"changed":\#(changed)}"#
    return try! JSONDecoder().decode(FileSnapshot.self, from: Data(json.utf8))
}

private let someHash = String(repeating: "3f", count: 32)

private func revision(_ number: Int, line: Int = 1, length: Int64 = 1000, temporary: String? = nil, madeBy: String? = nil,
                      document: FileSnapshot? = nil) -> HistoryRecord {
    .revision(number, line: line, length: length, sha256: someHash, state: SHA256Hasher().midstate, saved: 1_700_000_000_000 + Int64(number),
              source: "save", document: document ?? snapshot(inode: UInt64(100 + number), size: length), lineFile: snapshot(inode: UInt64(line), size: length),
              temporary: temporary, madeBy: madeBy, pageCount: madeBy == nil ? nil : 3)
}

/// A log of `records` after a header with `salt`, and where each record ends (`ends[0]` is the
/// header's end, `ends[i]` record i's).
private func log(_ records: [HistoryRecord], salt: [UInt8] = [1, 2, 3, 4, 5, 6, 7, 8]) -> (bytes: [UInt8], ends: [Int]) {
    var (bytes, chain) = HistoryLog.header(salt: salt)
    var ends = [bytes.count]
    for record in records {
        let framed = HistoryLog.frame(record, after: chain)
        bytes += framed.bytes
        chain = framed.chain
        ends.append(bytes.count)
    }
    return (bytes, ends)
}

/// Frames any payload as a record after `chain`, checksum and all, as a writer would.
private func frame(payload: [UInt8], after chain: [UInt8]) -> [UInt8] {
    let length = HistoryLog.littleEndian(UInt32(payload.count))
    return length + payload + HistoryLog.checksum(chain + length + payload)
}

private func parse(_ bytes: [UInt8]) -> HistoryLog.Reading? {
    try? HistoryLog.parse(bytes).get()
}

/// Five records as a history makes them: the original kept, a save, an append's intent, its
/// commit, and its identity after the fact.
private let sample: [HistoryRecord] = [
    revision(1, length: 900),
    revision(2, length: 1000, madeBy: "ab12"),
    .intent(3, from: 1000, document: snapshot(inode: 102, size: 1000)),
    revision(3, length: 1200),
    .identity(3, document: snapshot(inode: 103, size: 1200, changed: 6_000_000_000)),
]

/// A folder holding a history folder's log, for a writer: `<folder>/h/history.log`.
private func historyWith(_ bytes: [UInt8], _ label: String) throws -> (RevisionHistory, URL) {
    let folder = try freshFolder(label).appendingPathComponent("h")
    try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
    try Data(bytes).write(to: folder.appendingPathComponent(HistoryLog.fileName))
    return (RevisionHistory(directory: try Directory.open(folder.path), name: "d.pdf"), folder.appendingPathComponent(HistoryLog.fileName))
}

@Suite("The history's log")
struct HistoryLogTests {
    @Test("a log reads back every record, in order, and where it ends")
    func roundTrip() throws {
        let (bytes, ends) = log(sample)
        let reading = try #require(parse(bytes))
        #expect(reading.records == sample)
        #expect(reading.end == Int64(bytes.count) && !reading.damagedTail)
        #expect(Array(bytes.prefix(8)) == [0x89, 0x43, 0x42, 0x48, 0x0D, 0x0A, 0x1A, 0x0A])
        #expect(ends[0] == HistoryLog.headerSize)
        // Read in two pieces, as the cache reads what was appended since, the same.
        let first = try #require(parse(Array(bytes[..<ends[2]])))
        let rest = try HistoryLog.parse(Array(bytes[ends[2]...]), resuming: first).get()
        #expect(first.records + rest.records == sample && rest.end == Int64(bytes.count) && rest.chain == reading.chain)
        // An empty log (a header only) is a history with nothing in it.
        let empty = try #require(parse(Array(bytes[..<ends[0]])))
        #expect(empty.records.isEmpty && empty.end == Int64(HistoryLog.headerSize) && !empty.damagedTail)
    }

    @Test("a torn last record, cut at any byte, is ignored back to the last good record, and a writer cuts it before it appends")
    func tornTail() throws {
        let (bytes, ends) = log(sample)
        let lastStart = ends[sample.count - 1]
        let (history, url) = try historyWith([], "log-torn")
        for cut in lastStart..<bytes.count {
            let torn = Array(bytes[..<cut])
            let reading = try #require(parse(torn), "cut at \(cut)")
            #expect(reading.records == Array(sample.dropLast()), "cut at \(cut)")
            #expect(reading.end == Int64(lastStart) && reading.damagedTail == (cut > lastStart), "cut at \(cut)")

            try Data(torn).write(to: url)
            let writer = try #require(try HistoryWriter(history, wait: true, cache: HistoryCache(), migrate: { [] }))
            #expect(try Data(contentsOf: url).count == lastStart, "the writer left the torn tail, cut at \(cut)")
            #expect(writer.state.current?.revision == 3 && writer.state.pending == nil)
            #expect(writer.state.intent == nil, "the torn record was the commit that ends the intent; cut at \(cut)")
            let added = HistoryRecord.abandoned(4)
            try writer.append([added], durable: true)
            writer.close()
            let after = try #require(parse(Array(try Data(contentsOf: url))))
            #expect(after.records == Array(sample.dropLast()) + [added] && !after.damagedTail, "cut at \(cut)")
        }
    }

    @Test("a writer decodes only what was added since its store last read the log, and takes none of the rest on trust")
    func writerReadsWhatWasAdded() throws {
        let (bytes, ends) = log(sample)
        let (history, url) = try historyWith(Array(bytes[..<ends[3]]), "log-writer-cache")
        let cache = HistoryCache()
        func opened(_ cache: HistoryCache) throws -> HistoryState {
            let writer = try #require(try HistoryWriter(history, wait: true, cache: cache, migrate: { [] }))
            defer { writer.close() }
            return writer.state
        }
        /// Writes `bytes` over the log where it is (the same file, as `cp` over it or an
        /// editor writing in place leaves it).
        func overwrite(_ bytes: [UInt8], at offset: Int = 0, truncating: Bool = false) throws {
            let handle = try FileHandle(forUpdating: url)
            if truncating { try handle.truncate(atOffset: 0) }
            try handle.seek(toOffset: UInt64(offset))
            try handle.write(contentsOf: Data(bytes))
            try handle.close()
        }
        var state = try opened(cache)
        #expect(state.current?.revision == 2 && state.intent?.revision == 3 && state.records == 3)

        // Another instance's writer (a cache of its own) appends the last two records.
        let other = try #require(try HistoryWriter(history, wait: true, cache: HistoryCache(), migrate: { [] }))
        try other.append(Array(sample[3...]), durable: true)
        other.close()
        #expect(Array(try Data(contentsOf: url)) == bytes)
        state = try opened(cache)
        #expect(state.current?.revision == 3 && state.intent == nil && state.revisions.keys.sorted() == [1, 2, 3] && state.records == 5)

        // A bit flipped in place, in a record the cache read before: damage, as a whole reading
        // finds it; no writer opens the log to append after it.
        try overwrite([bytes[ends[1] + 6] ^ 0x10], at: ends[1] + 6)
        #expect(throws: DocumentError.self) { _ = try opened(cache) }
        try overwrite([bytes[ends[1] + 6]], at: ends[1] + 6)
        #expect(try opened(cache).records == 5)

        // Another log (another salt) written over it in place, shorter: read whole.
        try overwrite(log(Array(sample.prefix(2)), salt: [9, 9, 9, 9, 9, 9, 9, 9]).bytes, truncating: true)
        state = try opened(cache)
        #expect(state.current?.revision == 2 && state.intent == nil && state.records == 2)

        // An older copy of this same log put back in place (its salt, fewer records), then the
        // records after it that differ from the ones the cache read: the chain tells them apart.
        try overwrite(Array(bytes[..<ends[3]]), truncating: true)
        #expect(try opened(cache).records == 3)
        let forked = HistoryLog.frame(.abandoned(3), after: try #require(parse(Array(bytes[..<ends[2]]))).chain).bytes
        try overwrite(Array(bytes[..<ends[2]]) + forked, truncating: true)
        state = try opened(cache)
        #expect(state.records == 3 && state.intent == nil && state.current?.revision == 2)
    }

    @Test("a flipped bit anywhere in a middle record makes the log damaged there, never read past it")
    func flippedBit() throws {
        let (bytes, ends) = log(sample)
        var missed: [String] = []
        for byte in ends[2]..<ends[3] {
            for bit in 0..<8 {
                var damaged = bytes
                damaged[byte] ^= 1 << bit
                switch HistoryLog.parse(damaged) {
                case .failure(.damaged(let at)) where at == Int64(ends[2]):
                    continue
                case .success(let reading) where reading.records == Array(sample.prefix(2)) && reading.damagedTail:
                    // A length made to run past the end of the file reads as a torn last write.
                    continue
                default:
                    missed.append("byte \(byte) bit \(bit)")
                }
            }
        }
        #expect(missed.isEmpty, "read past a damaged record: \(missed.prefix(10))")
    }

    @Test("a flipped bit in the header makes it no log at all")
    func damagedHeader() {
        let (bytes, _) = log(sample)
        for byte in 0..<HistoryLog.headerSize {
            for bit in 0..<8 {
                var damaged = bytes
                damaged[byte] ^= 1 << bit
                guard case .failure(.notALog) = HistoryLog.parse(damaged) else {
                    Issue.record("byte \(byte) bit \(bit) was read")
                    continue
                }
            }
        }
        guard case .failure(.notALog) = HistoryLog.parse(Array(bytes.prefix(HistoryLog.headerSize - 1))) else {
            Issue.record("a cut header was read")
            return
        }
    }

    @Test("a record copied from another log (another salt) is refused, and so is everything after it")
    func recordOfAnotherLog() throws {
        let (ours, ourEnds) = log(sample, salt: [1, 2, 3, 4, 5, 6, 7, 8])
        let (theirs, theirEnds) = log(sample, salt: [8, 7, 6, 5, 4, 3, 2, 1])
        // The same record at the same place, framed by the other log.
        let spliced = Array(ours[..<ourEnds[2]]) + Array(theirs[theirEnds[2]..<theirEnds[3]]) + Array(ours[ourEnds[3]...])
        #expect(HistoryLog.parse(spliced) == .failure(.damaged(at: Int64(ourEnds[2]))))
        // Their whole log after our header: damaged at its first record.
        let grafted = Array(ours[..<ourEnds[0]]) + Array(theirs[theirEnds[0]...])
        #expect(HistoryLog.parse(grafted) == .failure(.damaged(at: Int64(ourEnds[0]))))
        // Our own record repeated at another place (replayed) is refused too: the chain differs.
        let replayed = Array(ours) + Array(ours[ourEnds[1]..<ourEnds[2]])
        let once = try #require(parse(replayed))
        #expect(once.records == sample && once.damagedTail)
    }

    @Test("a log of another version is refused as newer, by readers and by the store, and left as it is")
    func newerVersion() throws {
        let salt: [UInt8] = [9, 9, 9, 9, 1, 1, 1, 1]
        var header = HistoryLog.magic + HistoryLog.littleEndian(2) + salt
        header += HistoryLog.checksum(header)
        var bytes = header
        bytes += frame(payload: revision(1).encoded(), after: Array(header.suffix(8)))
        guard case .failure(.newerVersion(2)) = HistoryLog.parse(bytes) else {
            Issue.record("a version 2 log was read")
            return
        }
        // A writer refuses it and writes nothing.
        let (history, url) = try historyWith(bytes, "log-newer")
        #expect(throws: DocumentError.self) { _ = try HistoryWriter(history, wait: true, cache: HistoryCache(), migrate: { [] }) }
        #expect(try Array(Data(contentsOf: url)) == bytes)
        // So does the store, for a document whose history it is.
        let folder = try freshFolder("log-newer-store")
        let document = PDFFixtures.pdf([.init(content: "0 g 10 10 50 50 re f")])
        try Data(document).write(to: folder.appendingPathComponent("d.pdf"))
        let store = try DocumentStore(folder: folder)
        _ = try store.flatten("d.pdf", page: 0, drawing: Drawing(strokes: [try dot(5, 5)]))
        let saved = try Data(contentsOf: folder.appendingPathComponent("d.pdf"))
        try Data(bytes).write(to: historyFolder(folder, "d.pdf").appendingPathComponent(HistoryLog.fileName), options: .atomic)
        for attempt in [{ _ = try store.flatten("d.pdf", page: 0, drawing: Drawing(strokes: [try dot(9, 9)])) },
                        { _ = try store.revisions("d.pdf") }, { _ = try store.restore("d.pdf", revision: 1) },
                        { _ = try DocumentStore(folder: folder).summary("d.pdf") }] {
            do {
                try attempt()
                Issue.record("a history of a newer format was used")
            } catch let error as DocumentError {
                guard case .unreadable(_, "damaged", let message) = error, message.contains("newer") else {
                    Issue.record("\(error)")
                    continue
                }
            }
        }
        #expect(try Data(contentsOf: folder.appendingPathComponent("d.pdf")) == saved)
        #expect(try Array(Data(contentsOf: historyFolder(folder, "d.pdf").appendingPathComponent(HistoryLog.fileName))) == bytes)
    }

    @Test("a record with a field missing or a value no writer makes is not well-formed, and ends the log where it stands")
    func missingFields() throws {
        func object(_ record: HistoryRecord) throws -> [String: Any] {
            try #require(try JSONSerialization.jsonObject(with: Data(record.encoded())) as? [String: Any])
        }
        func decodes(_ object: [String: Any]) throws -> Bool {
            HistoryRecord(decoding: Array(try JSONSerialization.data(withJSONObject: object))) != nil
        }
        let required: [(HistoryRecord, [String])] = [
            (revision(4, line: 2, madeBy: "k1"), ["kind", "revision", "line", "length", "sha256", "state", "saved"]),
            (.intent(4, from: 10, document: snapshot(inode: 1)), ["kind", "revision", "from", "document"]),
            (.identity(4, document: snapshot(inode: 1)), ["kind", "revision", "document"]),
            (.abandoned(4), ["kind", "revision"]),
            (.pruned([2, 3]), ["kind", "revisions"]),
            (.seal(2, snapshot(inode: 1)), ["kind", "line"]),
            (.base(next: 9), ["kind", "next"]),
        ]
        for (record, fields) in required {
            #expect(HistoryRecord(decoding: record.encoded()) == record, "\(record.kind)")
            for field in fields {
                var damaged = try object(record)
                damaged[field] = nil
                #expect(try !decodes(damaged), "\(record.kind) without \(field)")
            }
        }
        // Values no writer makes.
        let wrong: [(String, Any)] = [("kind", "rename"), ("revision", 0), ("revision", -1), ("line", 5), ("length", 0),
                                      ("sha256", String(repeating: "A", count: 64)), ("sha256", "abc"), ("state", "00"),
                                      ("madeBy", ""), ("madeBy", "a-b"), ("revision", "4"), ("document", "x")]
        for (field, value) in wrong {
            var damaged = try object(revision(4, line: 2))
            damaged[field] = value
            #expect(try !decodes(damaged), "revision with \(field) \(value)")
        }
        #expect(HistoryRecord(decoding: Array(#"{"kind":"pruned","revisions":[1,2]}"#.utf8)) == nil, "revision 1 is never pruned")
        #expect(HistoryRecord(decoding: Array("not json".utf8)) == nil)
        // Checksummed and chained as a writer would, a record that is not well-formed still ends the log.
        let (bytes, ends) = log(Array(sample.prefix(2)))
        var malformed = try object(revision(3))
        malformed["line"] = nil
        let payload = Array(try JSONSerialization.data(withJSONObject: malformed))
        let chain = try #require(parse(bytes)).chain
        let followed = bytes + frame(payload: payload, after: chain) + log(Array(sample.suffix(2))).bytes.dropFirst(HistoryLog.headerSize)
        #expect(HistoryLog.parse(followed) == .failure(.damaged(at: Int64(ends[2]))))
        // Last in the file, it is a write cut short: read up to it.
        let reading = try #require(parse(bytes + frame(payload: payload, after: chain)))
        #expect(reading.records == Array(sample.prefix(2)) && reading.end == Int64(ends[2]) && reading.damagedTail)
    }

    @Test("a record with a field this version does not know is not well-formed")
    func unknownField() throws {
        for record in [revision(4, line: 2), .identity(4, document: snapshot(inode: 1)), .abandoned(4), .base(next: 9)] {
            var object = try #require(try JSONSerialization.jsonObject(with: Data(record.encoded())) as? [String: Any])
            object["renamedFrom"] = "x.pdf"
            #expect(HistoryRecord(decoding: Array(try JSONSerialization.data(withJSONObject: object))) == nil, "\(record.kind)")
        }
    }

    @Test("a replacing save's commit is pending until its identity; then it is current")
    func pendingThenIdentity() {
        var state = HistoryState()
        let one = revision(1, length: 900, document: snapshot(inode: 50, size: 900))
        state.apply(one)
        #expect(state.current?.revision == 1 && state.current?.document == snapshot(inode: 50, size: 900))
        let two = revision(2, length: 1000, temporary: ".tmp.7.8", document: snapshot(inode: 60, size: 1000))
        state.apply(two)
        #expect(state.pending == two.kept && state.current?.revision == 1 && state.next == 3)
        #expect(state.kept.map(\.revision) == [1, 2])
        #expect(state.revision(of: snapshot(inode: 50, size: 900)) == one.kept)
        #expect(state.revision(of: snapshot(inode: 60, size: 1000)) == nil, "the new file is not the document before its rename")
        let renamed = snapshot(inode: 60, size: 1000, changed: 7_000_000_000)
        state.apply(.identity(2, document: renamed))
        #expect(state.pending == nil && state.current?.revision == 2 && state.current?.document == renamed)
        #expect(state.revision(of: renamed) == two.kept && state.revision(of: snapshot(inode: 50, size: 900)) == nil)
        #expect(state.next == 3 && state.newest == two.kept)
    }

    @Test("an abandoned commit is no revision, and its number is not handed out again")
    func abandonedCommit() {
        var state = HistoryState()
        state.apply(revision(1))
        state.apply(revision(2, temporary: ".tmp.1.2"))
        state.apply(.abandoned(2))
        #expect(state.pending == nil && state.kept.map(\.revision) == [1] && state.current?.revision == 1)
        #expect(state.next == 3)
    }

    @Test("an append's intent stands until its commit, or until it is abandoned")
    func intentThenAbandoned() {
        var state = HistoryState()
        state.apply(revision(1, length: 900))
        let intent = HistoryRecord.intent(2, from: 900, document: snapshot(inode: 101, size: 900))
        state.apply(intent)
        #expect(state.intent.map(HistoryRecord.intent) == intent && state.next == 2 && state.current?.revision == 1)
        state.apply(.abandoned(2))
        #expect(state.intent == nil && state.kept.map(\.revision) == [1] && state.next == 2, "an intent hands out no number")
        // Committed, the intent is over.
        state.apply(.intent(2, from: 900, document: snapshot(inode: 101, size: 900)))
        state.apply(revision(2, length: 1000, document: snapshot(inode: 101, size: 1000)))
        #expect(state.intent == nil && state.current?.revision == 2 && state.next == 3)
        // Taken back (its tail cut), the document is said to be its revision again.
        state.apply(.intent(3, from: 1000, document: snapshot(inode: 101, size: 1000)))
        state.apply(.identity(2, document: snapshot(inode: 101, size: 1000, changed: 9)))
        #expect(state.intent == nil && state.current?.revision == 2 && state.next == 3)
    }

    @Test("pruned revisions are no longer kept, their lines no longer needed; numbers go on past them")
    func pruned() {
        var state = HistoryState()
        state.apply(revision(1, line: 1, length: 900))
        state.apply(revision(2, line: 1, length: 1000))
        state.apply(revision(3, line: 3, length: 500))
        state.apply(revision(4, line: 3, length: 700))
        #expect(state.neededLines == [1: 1000, 3: 700])
        state.apply(.pruned([2, 3, 9]))
        #expect(state.kept.map(\.revision) == [1, 4] && state.next == 5)
        #expect(state.neededLines == [1: 900, 3: 700])
        #expect(state.current?.revision == 4 && state.newest?.revision == 4)
        state.apply(.seal(1, snapshot(inode: 1, size: 900)))
        #expect(state.lines[1] == snapshot(inode: 1, size: 900))
        state.apply(.seal(2, nil))
        #expect(state.lines[2] == nil)
    }

    @Test("a base record carries the next number over a log written anew; it never lowers it")
    func baseNext() {
        var state = HistoryState()
        state.apply(.base(next: 10))
        #expect(state.next == 10 && state.kept.isEmpty && state.current == nil)
        state.apply(revision(3))
        #expect(state.next == 10, "a migrated revision below the next number does not lower it")
        state.apply(revision(10))
        #expect(state.next == 11)
        state.apply(.base(next: 4))
        #expect(state.next == 11)
    }
}
