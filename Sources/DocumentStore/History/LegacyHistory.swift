import Foundation
#if canImport(Glibc)
import Glibc
#endif
import SystemPackage

/// The two layouts of `.canvas-revisions/<name>/` before the log, read once each, by the first
/// holder of the document's lock, to write the log they come to:
/// - whole files (canvasd before the byte sharing): `<N>.<ext>` is revision N, whole; the
///   current one is a hard link of the document;
/// - lines (the layout just before the log): `<N>-<L>.<ext>` files (`<N>.<ext>` when N starts
///   line L), each holding revision N and every earlier revision of its line as a length of it,
///   the current one a hard link of the document; and empty files whose names carry the rest:
///   `<N>.rev.<line>.<length>.<ms>.<sha256>.<state>` (a revision's record),
///   `<N>.madeby.<key>.<pages>.<sha256>` (the request that made it), `<N>.append.<line>.<from>`
///   (an append under way).
/// What a migration keeps: each revision whose bytes are there, under its number, with its
/// sha256 (from its record, or hashed when it had none). Bytes that shared the document's
/// file are copied out of it, and checked against their records first: a document written in
/// place before the migration took those bytes with it, and a revision whose bytes no longer
/// hash to its record is not kept (it is gone, and never served as something it is not).
enum LegacyHistory {
    struct File {
        let revision: Int
        let line: Int
        let name: String
        let stat: Stat
    }

    struct Record {
        let revision: Int
        let line: Int
        let length: Int64
        let saved: Int64
        let sha256: String
        let midstate: SHA256Midstate

        init?(name: String) {
            guard let infix = name.range(of: ".rev."), let revision = Int(name[..<infix.lowerBound]), revision > 0 else { return nil }
            let parts = name[infix.upperBound...].split(separator: ".", omittingEmptySubsequences: false)
            guard parts.count == 5, let line = Int(parts[0]), line > 0, line <= revision, let length = Int64(parts[1]), length > 0,
                  let saved = Int64(parts[2]), parts[3].utf8.count == 64, parts[3].utf8.allSatisfy(\.isLowercaseHexDigit),
                  let midstate = SHA256Midstate(hex: parts[4], coveringAtMost: length) else { return nil }
            (self.revision, self.line, self.length, self.saved, self.sha256, self.midstate) = (revision, line, length, saved, String(parts[3]), midstate)
            // Only the name the layout wrote: `012.rev…` or `+12.rev…` is a stray file, not revision 12.
            guard "\(revision).rev.\(line).\(length).\(saved).\(sha256).\(midstate.hex)" == name else { return nil }
        }
    }

    struct Mark {
        let revision: Int
        let key: String
        let pageCount: Int

        init?(name: String) {
            guard let infix = name.range(of: ".madeby."), let revision = Int(name[..<infix.lowerBound]), revision > 0 else { return nil }
            let parts = name[infix.upperBound...].split(separator: ".", omittingEmptySubsequences: false)
            guard parts.count == 3, let pageCount = Int(parts[1]), !parts[0].isEmpty, parts[0].utf8.count <= 64,
                  parts[0].utf8.allSatisfy(\.isASCIILetterOrDigit) else { return nil }
            (self.revision, self.key, self.pageCount) = (revision, String(parts[0]), pageCount)
            guard "\(revision).madeby.\(key).\(pageCount).\(parts[2])" == name else { return nil }
        }
    }

    struct Intent {
        let revision: Int
        let line: Int
        let from: Int64

        init?(name: String) {
            guard let infix = name.range(of: ".append."), let revision = Int(name[..<infix.lowerBound]), revision > 0 else { return nil }
            let parts = name[infix.upperBound...].split(separator: ".", omittingEmptySubsequences: false)
            guard parts.count == 2, let line = Int(parts[0]), let from = Int64(parts[1]) else { return nil }
            (self.revision, self.line, self.from) = (revision, line, from)
            guard "\(revision).append.\(line).\(from)" == name else { return nil }
        }
    }

    /// A revision whose bytes are there: the first `length` bytes of `holder`.
    struct Kept {
        let revision: Int
        let length: Int64
        let record: Record?
        let holder: File
    }

    /// The revision and line of `<N>.<ext>` or `<N>-<L>.<ext>` (L < N).
    static func fileNumbers(_ name: String) -> (Int, Int)? {
        guard let dot = name.firstIndex(of: "."), DocumentStore.extensions.contains(String(name[name.index(after: dot)...])) else { return nil }
        let numbers = name[..<dot].split(separator: "-", omittingEmptySubsequences: false)
        guard numbers.count <= 2, let revision = Int(numbers[0]), revision > 0,
              let line = numbers.count == 2 ? Int(numbers[1]) : revision, line > 0, line <= revision,
              (line == revision ? "\(revision)" : "\(revision)-\(line)") == name[..<dot] else { return nil }
        return (revision, line)
    }

    static func isLegacyName(_ name: String) -> Bool {
        fileNumbers(name) != nil || Record(name: name) != nil || Mark(name: name) != nil || Intent(name: name) != nil
    }

    struct Listing {
        var files: [File] = []
        var records: [Int: Record] = [:]
        var marks: [Mark] = []
        var intents: [Intent] = []

        /// An old history's `<N>.<ext>`, whole: no record in its line.
        func isWhole(_ file: File) -> Bool {
            file.line == file.revision && records[file.revision] == nil && !records.values.contains { $0.line == file.line }
        }

        var kept: [Kept] {
            var result: [Kept] = []
            for number in Set(records.keys).union(files.filter(isWhole).map(\.revision)).sorted() {
                if let record = records[number] {
                    guard let holder = files.last(where: { $0.line == record.line && $0.stat.size >= record.length }) else { continue }
                    result.append(Kept(revision: number, length: record.length, record: record, holder: holder))
                } else if let file = files.first(where: { $0.revision == number && isWhole($0) }) {
                    result.append(Kept(revision: number, length: file.stat.size, record: nil, holder: file))
                }
            }
            return result
        }

        /// The revision the document is, by the rules of the layout: the same file as a kept
        /// one, at the length of one of its line's revisions.
        func revision(of identity: FileIdentity, size: Int64) -> Int? {
            guard let file = files.last(where: { $0.stat.identity == identity }) else { return nil }
            if let record = records.values.filter({ $0.line == file.line && $0.length == size }).max(by: { $0.revision < $1.revision }) {
                return record.revision
            }
            return isWhole(file) && file.stat.size == size ? file.revision : nil
        }

        /// For a document longer than its line's last record, with an intent for the tail: the
        /// length it had before an append that was never committed, and that revision's sha256.
        func committedLength(of identity: FileIdentity, size: Int64) -> (Int64, String)? {
            guard let file = files.last(where: { $0.stat.identity == identity }),
                  let record = records.values.filter({ $0.line == file.line && $0.length < size }).max(by: { $0.length < $1.length }),
                  intents.contains(where: { $0.line == file.line && $0.from == record.length && $0.revision == record.revision + 1 }) else { return nil }
            return (record.length, record.sha256)
        }
    }

    static func listing(_ directory: Directory) throws(Errno) -> Listing {
        var listing = Listing()
        for name in try directory.names() {
            if let record = Record(name: name) {
                listing.records[record.revision] = record
            } else if let mark = Mark(name: name) {
                listing.marks.append(mark)
            } else if let intent = Intent(name: name) {
                listing.intents.append(intent)
            } else if let (revision, line) = fileNumbers(name), let stat = try directory.stat(name), stat.isRegularFile {
                listing.files.append(File(revision: revision, line: line, name: name, stat: stat))
            }
        }
        listing.files.sort { $0.revision < $1.revision }
        return listing
    }

    /// The log an older layout comes to (empty for a folder with none: a new history), its
    /// line files made (`data.<L>`, linked from the old files the document does not share, else
    /// copied). The old files stay until the log is in place; the first writer after removes
    /// them. `document`: the current file, open; `folderChanged`: when the folder last changed
    /// before the lock's file was made in it; `cut` shortens the document, for a tail an append
    /// left.
    static func migrate(_ history: RevisionHistory, document: DocumentStore.OpenFile?, folderChanged: timespec,
                        cut: (Int64) throws(DocumentError) -> Stat?) throws -> [HistoryRecord] {
        let directory = history.directory
        // A migration killed before its log was in place left these: they are nobody's.
        for name in try directory.names() where RevisionHistory.line(ofFile: name) != nil || name.hasPrefix(RevisionHistory.temporaryPrefix) {
            try directory.remove(name)
        }
        let listing = try listing(directory)
        guard !listing.files.isEmpty else { return [] }
        var documentStat = document?.stat
        if let document, let stat = documentStat, listing.revision(of: stat.identity, size: stat.size) == nil,
           let (length, sha256) = listing.committedLength(of: stat.identity, size: stat.size),
           try SHA256Hasher.prefixDigests(document.descriptor, lengths: [length])[length]?.0 == sha256 {
            // A killed append's tail after the revision's very bytes: cut. (Other bytes are another
            // program's writing, kept below as they are.)
            documentStat = try cut(length) ?? documentStat
        }
        // The first layout kept no hash: a file it shares with the document was written with it
        // when the document changed after the history last did (saves link a file into the
        // history after writing it). Those bytes are no longer the revision's.
        func overwritten(_ file: File) -> Bool {
            guard let stat = documentStat, file.stat.identity == stat.identity else { return false }
            let modified = stat.rawValue.st_mtim
            return (modified.tv_sec, modified.tv_nsec) > (folderChanged.tv_sec, folderChanged.tv_nsec)
        }
        let current = documentStat.flatMap { listing.revision(of: $0.identity, size: $0.size) }
        let kept = listing.kept
        var next = (listing.files.map(\.revision) + listing.records.keys + listing.marks.map(\.revision) + kept.map(\.revision)).max().map { $0 + 1 } ?? 1

        // Each line's bytes from the longest file that holds a kept revision of it.
        var holders: [Int: File] = [:]
        for entry in kept where (holders[entry.holder.line]?.stat.size ?? -1) < entry.holder.stat.size {
            holders[entry.holder.line] = entry.holder
        }
        var lineFiles: [Int: (FileDescriptor, Stat, shared: Bool)] = [:]
        defer { for (file, _, _) in lineFiles.values { try? file.close() } }
        for (line, holder) in holders {
            let needed = kept.filter { $0.holder.line == line }.map(\.length).max() ?? 0
            let shared = holder.stat.identity == documentStat?.identity || holder.stat.rawValue.st_nlink > 1
            let source = try directory.openForReading(holder.name)
            defer { try? source.close() }
            let lineName = RevisionHistory.lineName(line)
            if shared {
                let temporary = RevisionHistory.temporaryPrefix + "migrate.\(line)"
                let out = try directory.create(temporary, readable: true)
                var cost = SaveCost()
                do {
                    try FileCopy.copyPrefix(source, length: needed, to: out, &cost)
                    try Directory.check { fsync(out.rawValue) }
                    try directory.rename(temporary, to: directory, as: lineName)
                } catch {
                    try? out.close()
                    throw error
                }
                lineFiles[line] = (out, try Errno.rethrowing { try out.stat() }, true)
            } else {
                try directory.link(holder.name, to: directory, as: lineName)
                let file = try directory.openForReading(lineName)
                lineFiles[line] = (file, try Errno.rethrowing { try file.stat() }, false)
            }
        }
        try directory.sync()

        var records: [HistoryRecord] = []
        for line in lineFiles.keys.sorted() {
            guard let (file, stat, shared) = lineFiles[line] else { continue }
            let revisions = kept.filter { $0.holder.line == line }
            // Checked against their records where the document could have written over them;
            // hashed where there is no record.
            let unknown = revisions.filter { $0.record == nil || shared }.map(\.length)
            let digests = try SHA256Hasher.prefixDigests(file, lengths: unknown)
            for entry in revisions {
                let sha256: String, midstate: SHA256Midstate
                if let record = entry.record {
                    if shared, digests[entry.length]?.0 != record.sha256 { continue }
                    (sha256, midstate) = (record.sha256, record.midstate)
                } else {
                    guard let digest = digests[entry.length], !overwritten(entry.holder) else { continue }
                    (sha256, midstate) = digest
                }
                let mark = listing.marks.last { $0.revision == entry.revision }
                let saved = entry.record?.saved ?? DocumentStore.milliseconds(entry.holder.stat)
                records.append(.revision(entry.revision, line: line, length: entry.length, sha256: sha256, state: midstate, saved: saved,
                                         source: "migrated", document: entry.revision == current ? documentStat.map(FileSnapshot.init) : nil,
                                         lineFile: FileSnapshot(stat), madeBy: mark?.key, pageCount: mark?.pageCount))
            }
        }
        next = max(next, (records.compactMap(\.kept?.revision).max() ?? 0) + 1)
        records.sort { ($0.kept?.revision ?? 0) < ($1.kept?.revision ?? 0) }
        // Each line's file as made: the bytes it holds past its last revision kept (a revision
        // whose bytes failed their check) are accounted for, not taken for records the log lost.
        let seals = lineFiles.keys.sorted().compactMap { line in lineFiles[line].map { HistoryRecord.seal(line, FileSnapshot($0.1)) } }
        return [.base(next: next)] + records + seals
    }
}

extension SHA256Hasher {
    /// The SHA-256 of each of the first `lengths` bytes of `file`, with the state after its last
    /// whole block, from one read of the file.
    static func prefixDigests(_ file: FileDescriptor, lengths: [Int64]) throws(Errno) -> [Int64: (String, SHA256Midstate)] {
        var result: [Int64: (String, SHA256Midstate)] = [:]
        var hasher = SHA256Hasher()
        var position: Int64 = 0
        for length in Set(lengths).sorted() {
            let block = length - length % 64
            try hasher.feed(file, from: position, to: block)
            position = block
            let midstate = hasher.midstate
            var tail = SHA256Hasher(resuming: midstate)
            try tail.feed(file, from: block, to: length)
            result[length] = (tail.finish(), midstate)
        }
        return result
    }
}
