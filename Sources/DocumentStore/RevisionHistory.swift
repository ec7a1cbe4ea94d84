import Foundation
import SystemPackage

/// One document's kept revisions, in `.canvas-revisions/<name>/`.
///
/// An incremental update only appends, so each revision of a `.pdf` is the beginning of the
/// next. The history keeps that shape: revisions form lines, each line one file holding its
/// newest revision, every older revision of the line a byte length of it.
/// - `<N>-<L>.<ext>`: the file that revision N's save made, in line L (a hard link: while N is
///   current, it is the document itself). It holds revision N and every earlier revision of
///   line L. `<N>.<ext>` when N starts its line (L = N). The line is in the name, so a file
///   keeps it when the record of its own revision is pruned and it still holds older ones.
/// - `<N>.rev.<line>.<length>.<ms>.<sha256>.<state>`: revision N's record, an empty file whose
///   name says it all: its line (the number of the line's first revision), its length in bytes,
///   when it was saved (milliseconds since 1970), its SHA-256, and SHA-256's running state after
///   its last whole 64-byte block, from which the next save of the line continues the hash.
///   A record is made by the directory flush that keeps its file, so neither is ever without
///   the other on disk once the document was renamed.
/// - A save that appends starts no line: its file is the last one's bytes and the update, and
///   the last one's file, now the beginning of the new one, goes. A restore, qpdf's whole
///   rewrite (a repaired or encrypted file), an upload, and every save of a `.yianazip` (whose
///   metadata, at the front, changes with each save) start a line of their own.
/// - An older history has `<N>.<ext>` files and no records: each is revision N, whole, read as
///   it is (as is an `<N>.<ext>` whose record is gone when no record of its line is left). The first save migrates only the current one, by writing its record (one hash of the
///   file, under the document's lock); the others stay as they are until pruned.
///
/// Rules that follow, for readers without a lock:
/// - the current file is revision N when it is the same file as a kept `<M>.<ext>` and N is the
///   revision of M's line with the current file's length (M itself, for a file made by a
///   replacing save); a legacy `<M>.<ext>` without a record is revision M;
/// - a current file that no kept file is is a new document or a copy (see `lineage`);
/// - anything numbered past the current revision was left by a save killed before its rename:
///   never the document nor reported, the next writer removes it;
/// - numbers only grow, because the current revision is the newest and pruning never removes
///   it, nor revision 1 (the original).
/// Files whose names start with `.tmp.` are saves being written; outside the document's write
/// lock, they belong to a writer that is still alive.
///
/// A save made for a request that may be sent again elsewhere (a session's, with several
/// instances) also leaves a mark: an empty file `<N>.madeby.<key>.<pages>.<sha256>`, created
/// beside its entry before the rename, so that the request, run again on another instance after
/// the first died or lost the session before it could record the save, finds revision N made
/// instead of saving the same ink twice. A mark numbered past the current file (its save killed
/// before the rename) goes with that entry, and a mark goes when its revision is pruned.
struct RevisionHistory {
    let directory: Directory
    /// The document's extension, given to every entry (`pdf` or `yianazip`).
    let kind: String
    /// The save's fence (`DocumentStore.WriteFence`), asked once more at the moment a new
    /// revision is committed (the replacing save's rename, the appending save's record): asked
    /// only before the save's work, it could not see a pause during that work.
    var commitFence: DocumentStore.WriteFence?

    static let temporaryPrefix = ".tmp."

    /// A file of the history: `<N>.<ext>` or `<N>-<L>.<ext>`.
    struct Entry {
        let revision: Int
        /// The line whose revisions it holds.
        let line: Int
        let name: String
        let stat: Stat
    }

    /// Revision N's record: where its bytes are, and what they hash to.
    struct Record: Equatable {
        let revision: Int
        /// The number of the line's first revision.
        let line: Int
        let length: Int64
        /// Milliseconds since 1970 when it was saved.
        let saved: Int64
        let sha256: String
        /// The hash's state after the last whole block of the revision's bytes.
        let midstate: SHA256Midstate

        static let infix = ".rev."

        var name: String { "\(revision)\(Self.infix)\(line).\(length).\(saved).\(sha256).\(midstate.hex)" }

        init(revision: Int, line: Int, length: Int64, saved: Int64, sha256: String, midstate: SHA256Midstate) {
            (self.revision, self.line, self.length, self.saved, self.sha256, self.midstate) = (revision, line, length, saved, sha256, midstate)
        }

        init?(name: String) {
            guard let infix = name.range(of: Self.infix), let revision = Int(name[..<infix.lowerBound]), revision > 0 else { return nil }
            let parts = name[infix.upperBound...].split(separator: ".", omittingEmptySubsequences: false)
            guard parts.count == 5, let line = Int(parts[0]), line > 0, line <= revision, let length = Int64(parts[1]), length > 0,
                  let saved = Int64(parts[2]), parts[3].utf8.count == 64,
                  let midstate = SHA256Midstate(hex: parts[4], coveringAtMost: length) else { return nil }
            self.init(revision: revision, line: line, length: length, saved: saved, sha256: String(parts[3]), midstate: midstate)
            guard self.name == name else { return nil }
        }

        var modified: Date { Date(timeIntervalSince1970: Double(saved) / 1000) }
    }

    /// The journal of a save that appends in place: an empty file `<N>.append.<line>.<from>`,
    /// made durable before the update is written at byte `from` of the line's file. Bytes of that
    /// file past its last record's length are a tail no reader may take for a revision: while the
    /// writer holds the lock, an append under way; once it is gone, left by a killed save, and cut
    /// by the next to hold the lock. Without an intent, bytes past the last record are no save's
    /// (the file was changed from outside), and nothing cuts them.
    struct Intent: Equatable {
        let revision: Int
        let line: Int
        let from: Int64

        static let infix = ".append."

        var name: String { "\(revision)\(Self.infix)\(line).\(from)" }

        init(revision: Int, line: Int, from: Int64) {
            (self.revision, self.line, self.from) = (revision, line, from)
        }

        init?(name: String) {
            guard let infix = name.range(of: Self.infix), let revision = Int(name[..<infix.lowerBound]), revision > 0 else { return nil }
            let parts = name[infix.upperBound...].split(separator: ".", omittingEmptySubsequences: false)
            guard parts.count == 2, let line = Int(parts[0]), let from = Int64(parts[1]) else { return nil }
            self.init(revision: revision, line: line, from: from)
            guard self.name == name else { return nil }
        }
    }

    /// A revision that can be read: `length` bytes from the start of `holder`.
    struct Kept {
        let revision: Int
        let length: Int64
        /// Nil for an older history's file, hashed when asked.
        let record: Record?
        let holder: Entry
        /// Bytes the writer hashed to write its record (a file no save had kept yet).
        var hashedToRecord: Int64 = 0
        /// The line it is in: its holder's.
        var line: Int { holder.line }
    }

    /// Everything in the history at one moment: one reading of the directory.
    struct Listing {
        var files: [Entry] = []
        var records: [Int: Record] = [:]
        var marks: [Mark] = []
        var intents: [Intent] = []

        /// Whether a file is an older history's revision, whole: `<N>.<ext>` with no record in its
        /// line. A file of a line that has records is only where they are: appended to in
        /// place, it holds revisions past its own, so its own revision, once its record is
        /// pruned, is no longer the whole file.
        func isWhole(_ file: Entry) -> Bool {
            file.line == file.revision && records[file.revision] == nil && !records.values.contains { $0.line == file.line }
        }

        /// Every revision whose bytes are here, oldest first.
        var kept: [Kept] {
            var result: [Kept] = []
            let numbers = Set(records.keys).union(files.filter(isWhole).map(\.revision))
            for number in numbers.sorted() {
                if let record = records[number] {
                    // The newest file of the line long enough to hold it: every file of a line begins
                    // with the bytes of all its shorter ones (a file appended to in place holds
                    // revisions numbered past its own). A killed save's record has none.
                    guard let holder = files.last(where: { $0.line == record.line && $0.stat.size >= record.length })
                    else { continue }
                    result.append(Kept(revision: number, length: record.length, record: record, holder: holder))
                } else if let file = files.first(where: { $0.revision == number && isWhole($0) }) {
                    result.append(Kept(revision: number, length: file.stat.size, record: nil, holder: file))
                }
            }
            return result
        }

        /// The revision of the file with `identity` and `size`, when it is one of these.
        func revision(of identity: FileIdentity, size: Int64) -> Kept? {
            guard let file = files.last(where: { $0.stat.identity == identity }) else { return nil }
            let line = file.line
            if let record = records.values.filter({ $0.line == line && $0.length == size && $0.revision >= line }).max(by: { $0.revision < $1.revision }) {
                return Kept(revision: record.revision, length: size, record: record, holder: file)
            }
            if isWhole(file) && file.stat.size == size {
                return Kept(revision: file.revision, length: size, record: nil, holder: file)
            }
            return nil
        }

        /// For a file of the history longer than any of its line's records: the revision it holds
        /// below an append's tail (an append under way, or one a killed save left), when an intent
        /// says the tail is an append's.
        func committedPrefix(of identity: FileIdentity, size: Int64) -> Kept? {
            guard let file = files.last(where: { $0.stat.identity == identity }),
                  let record = records.values.filter({ $0.line == file.line && $0.length < size }).max(by: { $0.length < $1.length }),
                  record.revision >= file.revision,
                  intents.contains(where: { $0.line == file.line && $0.from == record.length && $0.revision == record.revision + 1 }) else { return nil }
            return Kept(revision: record.revision, length: record.length, record: record, holder: file)
        }
    }

    /// Reads the directory once: files (with their `stat`), records and marks.
    func listing() throws(Errno) -> Listing {
        var listing = Listing()
        for name in try directory.names() {
            if let record = Record(name: name) {
                listing.records[record.revision] = record
            } else if let mark = Mark(name: name) {
                listing.marks.append(mark)
            } else if let intent = Intent(name: name) {
                listing.intents.append(intent)
            } else if let (revision, line) = fileNumbers(name), let stat = try directory.stat(name), stat.isRegularFile {
                listing.files.append(Entry(revision: revision, line: line, name: name, stat: stat))
            }
        }
        listing.files.sort { $0.revision < $1.revision }
        listing.marks.sort { $0.revision < $1.revision }
        return listing
    }

    /// Leaves an empty file of this name in the history (an append's intent, a revision's
    /// record, a save's mark: all they say is in the name); made durable by the directory's
    /// next flush.
    func leave(_ name: String) throws(Errno) {
        let file = try directory.create(name)
        try Errno.rethrowing { try file.close() }
    }

    func entryName(_ revision: Int, line: Int) -> String { line == revision ? "\(revision).\(kind)" : "\(revision)-\(line).\(kind)" }

    /// The revision and line of a file's name, `<N>.<ext>` or `<N>-<L>.<ext>` (L < N); nil for
    /// any other name.
    func fileNumbers(_ name: String) -> (Int, Int)? {
        guard let dot = name.firstIndex(of: "."), name[name.index(after: dot)...] == kind else { return nil }
        let numbers = name[..<dot].split(separator: "-", omittingEmptySubsequences: false)
        guard numbers.count <= 2, let revision = Int(numbers[0]), revision > 0,
              let line = numbers.count == 2 ? Int(numbers[1]) : revision, line > 0, line <= revision,
              entryName(revision, line: line) == name else { return nil }
        return (revision, line)
    }

        /// What a save left for the request that made it, to be found if that request runs again.
    struct Mark: Equatable {
        let revision: Int
        /// Who made it: an opaque key of ASCII letters and digits, from the request.
        let key: String
        let pageCount: Int
        let sha256: String

        static let infix = ".madeby."

        var name: String { "\(revision)\(Self.infix)\(key).\(pageCount).\(sha256)" }

        init(revision: Int, key: String, pageCount: Int, sha256: String) {
            (self.revision, self.key, self.pageCount, self.sha256) = (revision, key, pageCount, sha256)
        }

        init?(name: String) {
            guard let infix = name.range(of: Self.infix), let revision = Int(name[..<infix.lowerBound]), revision > 0 else { return nil }
            let parts = name[infix.upperBound...].split(separator: ".", omittingEmptySubsequences: false)
            guard parts.count == 3, let pageCount = Int(parts[1]) else { return nil }
            self.init(revision: revision, key: String(parts[0]), pageCount: pageCount, sha256: String(parts[2]))
            guard self.name == name else { return nil }
        }
    }

    /// The entries to remove so that `keep` revisions remain, the current one included: always
    /// revision 1 and the newest.
    static func prunable(_ kept: [Kept], keep: Int) -> [Kept] {
        let newest = Set(kept.suffix(max(1, keep - 1)).map(\.revision))
        return kept.filter { $0.revision != 1 && !newest.contains($0.revision) }
    }

    /// The files no revision but `dropped` needs: in each line only the newest file is read (it
    /// holds all the line's revisions), and a line none of whose other revisions is kept needs
    /// none. Removed before the records of `dropped`, so a pruning killed half-way keeps a
    /// revision too many, never loses one.
    static func unneededFiles(_ listing: Listing, dropping dropped: Set<Int>) -> [Entry] {
        let lines = Set(listing.kept.filter { !dropped.contains($0.revision) }.map(\.line))
        var newest: [Int: Int] = [:]
        for file in listing.files { newest[file.line] = max(newest[file.line] ?? 0, file.revision) }
        return listing.files.filter { file in
            let line = file.line
            return !lines.contains(line) || newest[line] != file.revision
        }
    }

    /// Removes what killed saves left: only ever called under the document's write lock, when no
    /// writer of this document can be alive but the caller.
    func removeAbandonedTemporaries() throws(Errno) {
        for name in try directory.names() where name.hasPrefix(Self.temporaryPrefix) {
            try directory.remove(name)
        }
    }
}

extension UInt8 {
    var isASCIILetterOrDigit: Bool {
        (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(self) || (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(self)
            || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(self)
    }
}
