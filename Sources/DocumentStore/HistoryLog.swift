import Foundation
#if canImport(Glibc)
import Glibc
#endif
import SystemPackage

/// The one file that says what a document's history holds: `history.log` in its folder.
///
/// Everything the history knows is a record in this log; no state lives in a file name. The
/// shape is SQLite's write-ahead log's, cut down to one writer that only appends:
/// - a header: the magic `89 43 42 48 0D 0A 1A 0A` ("\x89CBH\r\n\x1a\n": a file sent through a
///   text-mode transfer or cut at a line end no longer starts with it), the format's version
///   (a 32-bit little-endian number, now 1), 8 random bytes (the salt), and a checksum of the
///   three;
/// - then records, each: its length (32-bit little-endian), its payload (a JSON object, one
///   `HistoryRecord`), and a checksum: the first 8 bytes of SHA-256 over the checksum before it
///   (the header's, for the first record), the length and the payload.
/// The chain makes a record valid only where it was written: a torn write, a flipped bit, or a
/// record copied from another log (another salt) ends the log there, and what follows is
/// ignored. Readers take the log up to its last good record; the next writer, under the
/// document's lock, cuts the rest off before it appends.
///
/// A writer makes a record durable (`fdatasync`) before it does what depends on it: the order
/// of an intent, the data, a flush and the commit record, as a write-ahead log's.
enum HistoryLog {
    static let fileName = "history.log"
    static let magic: [UInt8] = [0x89, 0x43, 0x42, 0x48, 0x0D, 0x0A, 0x1A, 0x0A]
    static let version: UInt32 = 1
    static let headerSize = 28
    static let checksumSize = 8
    /// No record is near this: one that says it is longer is damage.
    static let maxRecordBytes = 1 << 20
    /// A log is written again, smaller, long before this (`HistoryState.compactionRecords`): a
    /// larger one is refused unread (a sparse file can claim any size).
    static let maxLogBytes: Int64 = 64 << 20
    /// The most a write cut short can leave past the last good record (one write of records).
    static let maxTornBytes = 64 << 10
    /// Numbers and lengths in records stay below this (JSON's exact integers): a forged or
    /// damaged record cannot overflow the arithmetic done with them.
    static let maxNumber: Int64 = (1 << 53) - 1
    /// The highest revision (and line) number: the protocol names revisions as 32-bit signed
    /// integers. A record past it is forgery or damage; a history that reached it saves no more.
    static let maxRevision = Int(Int32.max)

    /// The header of a new log, and the checksum its first record continues.
    static func header(salt: [UInt8]) -> (bytes: [UInt8], chain: [UInt8]) {
        var bytes = magic + littleEndian(version) + salt
        let chain = checksum(bytes)
        bytes += chain
        return (bytes, chain)
    }

    static func newSalt() -> [UInt8] { (0..<8).map { _ in UInt8.random(in: 0...255) } }

    /// One record, framed, and the checksum the next record continues.
    static func frame(_ record: HistoryRecord, after chain: [UInt8]) -> (bytes: [UInt8], chain: [UInt8]) {
        let payload = record.encoded()
        let length = littleEndian(UInt32(payload.count))
        let sum = checksum(chain + length + payload)
        return (length + payload + sum, sum)
    }

    /// What reading a log found.
    struct Reading: Equatable {
        var records: [HistoryRecord] = []
        /// Where the last good record ends: a writer appends here, after cutting the rest.
        var end: Int64 = 0
        /// The checksum the next record continues.
        var chain: [UInt8] = []
        /// Bytes past `end` that are not a good record: the last record, torn by a writer killed
        /// while it wrote (its length runs past the end of the file, or it ends exactly there).
        var damagedTail = false
    }

    enum ReadError: Error, Equatable {
        /// Not a history log at all (no magic, or a damaged header).
        case notALog
        /// A record that fails its checksum, or is no record, with more of the log after it: not
        /// a write cut short (which is always the last thing in the file) but damage, or an edit.
        /// The log is the history's only account of itself: nothing after the damage can be
        /// trusted, and nothing before it may be taken for the whole.
        case damaged(at: Int64)
        /// Larger than any log a writer leaves (`maxLogBytes`).
        case tooLarge(Int64)
        /// Written by a newer canvas bridge, whose records this one cannot be sure to read.
        case newerVersion(UInt32)
    }

    /// Parses `bytes` (a whole log, or the part of one past `resuming.end`).
    static func parse(_ bytes: [UInt8], resuming: Reading? = nil) -> Result<Reading, ReadError> {
        var reading: Reading
        var offset = 0
        if let resuming {
            reading = resuming
            reading.records = []
            reading.damagedTail = false
        } else {
            guard bytes.count >= headerSize, Array(bytes[0..<8]) == magic else { return .failure(.notALog) }
            let version = UInt32(bytes[8]) | UInt32(bytes[9]) << 8 | UInt32(bytes[10]) << 16 | UInt32(bytes[11]) << 24
            guard Array(bytes[20..<28]) == checksum(Array(bytes[0..<20])) else { return .failure(.notALog) }
            guard version == Self.version else { return .failure(.newerVersion(version)) }
            reading = Reading(records: [], end: Int64(headerSize), chain: Array(bytes[20..<28]))
            offset = headerSize
        }
        let base = reading.end - Int64(offset)
        while offset < bytes.count {
            // What a killed writer can leave is the end of one write: a few records at most.
            let torn = bytes.count - offset <= maxTornBytes
            guard bytes.count - offset >= 4 else { reading.damagedTail = true; break }
            let length = Int(UInt32(bytes[offset]) | UInt32(bytes[offset + 1]) << 8 | UInt32(bytes[offset + 2]) << 16 | UInt32(bytes[offset + 3]) << 24)
            let end = offset + 4 + length + checksumSize
            guard length <= maxRecordBytes, end <= bytes.count else {
                guard torn else { return .failure(.damaged(at: base + Int64(offset))) }
                reading.damagedTail = true
                break
            }
            let sum = checksum(reading.chain + Array(bytes[offset..<(offset + 4 + length)]))
            guard Array(bytes[(offset + 4 + length)..<end]) == sum,
                  let record = HistoryRecord(decoding: Array(bytes[(offset + 4)..<(offset + 4 + length)])) else {
                guard end == bytes.count else { return .failure(.damaged(at: base + Int64(offset))) }
                reading.damagedTail = true
                break
            }
            reading.records.append(record)
            reading.chain = sum
            offset = end
            reading.end = base + Int64(end)
        }
        return .success(reading)
    }

    static func checksum(_ bytes: [UInt8]) -> [UInt8] {
        var hasher = SHA256Hasher()
        hasher.update(bytes)
        return Array(hasher.finishBytes().prefix(checksumSize))
    }

    static func littleEndian(_ value: UInt32) -> [UInt8] {
        [UInt8(value & 0xFF), UInt8(value >> 8 & 0xFF), UInt8(value >> 16 & 0xFF), UInt8(value >> 24)]
    }
}

/// A file as the history saw it: which file it was and when it last changed. Any write to a
/// file changes its modification time, and anything that sets that back (`touch -d`) changes
/// its change time, which nothing but the kernel sets: two snapshots that are equal are the
/// same bytes, as far as anything short of reading them can tell.
struct FileSnapshot: Codable, Equatable, Hashable, Sendable {
    var device: UInt64
    var inode: UInt64
    var size: Int64
    /// Nanoseconds since 1970.
    var modified: Int64
    var changed: Int64

    init(_ stat: Stat) {
        device = UInt64(stat.rawValue.st_dev)
        inode = UInt64(stat.rawValue.st_ino)
        size = stat.size
        modified = Int64(stat.rawValue.st_mtim.tv_sec) * 1_000_000_000 + Int64(stat.rawValue.st_mtim.tv_nsec)
        changed = Int64(stat.rawValue.st_ctim.tv_sec) * 1_000_000_000 + Int64(stat.rawValue.st_ctim.tv_nsec)
    }

    var identity: FileIdentity { FileIdentity(device: device, inode: inode) }

    /// Whether this is `written`, the same file as a save left it, told after that save renamed
    /// it into place: a rename changes a file's change time, never its size or modification
    /// time, and another program's write changes those.
    func isStill(_ written: FileSnapshot) -> Bool {
        identity == written.identity && size == written.size && modified == written.modified
    }
}

/// One record of a history's log (see `HistoryLog`). Which fields a kind carries:
/// - `revision`: a revision committed. `revision`, `line` and `length` (its bytes are the first
///   `length` of the line's file `data.<line>`), `sha256` and `state` (SHA-256's state after its
///   last whole block, from which a save that extends it continues), `saved` (milliseconds
///   since 1970), `source` (what made it), `lineFile` (the line's file just after), and:
///   `document`, the document file it is; for a replacing save, `temporary`, the name of the
///   new file in the history's folder, renamed over the document after this record (an
///   `identity` record says it was); `madeBy` and `pageCount` for a save a request may run again.
/// - `intent`: an append in place is about to write revision `revision` at byte `from` of the
///   document `document` (a writer killed before its commit leaves bytes there to cut).
/// - `identity`: the document is revision `revision`, now as `document` (after a rename, a
///   `touch`, a copy of the same bytes, a cut tail).
/// - `abandoned`: revision `revision` was committed but never became the document (a replacing
///   save killed before its rename, with its file gone): it is no revision, and its number is
///   not handed out again.
/// - `pruned`: `revisions` are no longer kept.
/// - `seal`: the line's file, after pruning cut or removed it (`lineFile` nil when removed).
/// - `base`: a log written whole (a migration, or a compaction): `next`, the lowest number
///   never handed out, and `created`.
struct HistoryRecord: Codable, Equatable, Sendable {
    enum Kind: String, Codable, Sendable { case revision, intent, extending, identity, abandoned, pruned, seal, base }

    var kind: Kind
    var revision: Int?
    var line: Int?
    var length: Int64?
    var sha256: String?
    var state: String?
    var saved: Int64?
    var source: String?
    var document: FileSnapshot?
    var lineFile: FileSnapshot?
    var temporary: String?
    var madeBy: String?
    var pageCount: Int?
    var from: Int64?
    var revisions: [Int]?
    var next: Int?

    init(kind: Kind) { self.kind = kind }

    static func revision(_ number: Int, line: Int, length: Int64, sha256: String, state: SHA256Midstate, saved: Int64,
                         source: String, document: FileSnapshot?, lineFile: FileSnapshot?, temporary: String? = nil,
                         madeBy: String? = nil, pageCount: Int? = nil) -> HistoryRecord {
        var record = HistoryRecord(kind: .revision)
        (record.revision, record.line, record.length, record.sha256, record.state, record.saved) = (number, line, length, sha256, state.hex, saved)
        (record.source, record.document, record.lineFile, record.temporary) = (source, document, lineFile, temporary)
        (record.madeBy, record.pageCount) = (madeBy, pageCount)
        return record
    }

    static func intent(_ number: Int, from: Int64, document: FileSnapshot, line: Int? = nil) -> HistoryRecord {
        var record = HistoryRecord(kind: .intent)
        (record.revision, record.from, record.document, record.line) = (number, from, document, line)
        return record
    }

    static func extending(_ number: Int, line: Int, from: Int64) -> HistoryRecord {
        var record = HistoryRecord(kind: .extending)
        (record.revision, record.line, record.from) = (number, line, from)
        return record
    }

    static func identity(_ number: Int, document: FileSnapshot) -> HistoryRecord {
        var record = HistoryRecord(kind: .identity)
        (record.revision, record.document) = (number, document)
        return record
    }

    static func abandoned(_ number: Int) -> HistoryRecord {
        var record = HistoryRecord(kind: .abandoned)
        record.revision = number
        return record
    }

    static func pruned(_ numbers: [Int]) -> HistoryRecord {
        var record = HistoryRecord(kind: .pruned)
        record.revisions = numbers
        return record
    }

    static func seal(_ line: Int, _ file: FileSnapshot?) -> HistoryRecord {
        var record = HistoryRecord(kind: .seal)
        (record.line, record.lineFile) = (line, file)
        return record
    }

    static func base(next: Int) -> HistoryRecord {
        var record = HistoryRecord(kind: .base)
        record.next = next
        return record
    }

    func encoded() -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        // Every field is a number, a string of hex digits or ASCII, or an array of numbers.
        return Array((try? encoder.encode(self)) ?? Data())
    }

    init?(decoding bytes: [UInt8]) {
        // A field this version does not write is no record of it (a newer format says so in the
        // header, so here it is damage or forgery).
        guard let object = try? JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any],
              Set(object.keys).isSubset(of: Self.fieldNames),
              let record = try? JSONDecoder().decode(HistoryRecord.self, from: Data(bytes)), record.isWellFormed else { return nil }
        self = record
    }

    private static let fieldNames: Set<String> = ["kind", "revision", "line", "length", "sha256", "state", "saved", "source", "document",
                                                  "lineFile", "temporary", "madeBy", "pageCount", "from", "revisions", "next"]

    /// Whether the fields its kind needs are there, with values a writer makes.
    var isWellFormed: Bool {
        switch kind {
        case .revision:
            guard let revision, Self.bounded(revision), let line, line > 0, line <= revision,
                  let length, length > 0, length <= HistoryLog.maxNumber,
                  let sha256, sha256.utf8.count == 64, sha256.utf8.allSatisfy(\.isLowercaseHexDigit),
                  let state, SHA256Midstate(hex: Substring(state), coveringAtMost: length) != nil, saved != nil else { return false }
            return madeBy.map { !$0.isEmpty && $0.utf8.count <= 64 && $0.utf8.allSatisfy(\.isASCIILetterOrDigit) } ?? true
        case .intent: return Self.bounded(revision) && (from ?? -1) >= 0 && (from ?? 0) <= HistoryLog.maxNumber && document != nil
                && (line == nil || Self.bounded(line))
        case .extending: return Self.bounded(revision) && Self.bounded(line) && (from ?? -1) >= 0 && (from ?? 0) <= HistoryLog.maxNumber
        case .identity: return Self.bounded(revision) && document != nil
        case .abandoned: return Self.bounded(revision)
        case .pruned: return revisions.map { $0.allSatisfy { $0 > 1 && Self.bounded($0) } } ?? false
        case .seal: return Self.bounded(line)
        case .base: return next.map { $0 > 0 && $0 <= HistoryLog.maxRevision + 1 } ?? false
        }
    }

    private static func bounded(_ number: Int?) -> Bool {
        guard let number else { return false }
        return number > 0 && number <= HistoryLog.maxRevision
    }

    var midstate: SHA256Midstate? { state.flatMap { SHA256Midstate(hex: Substring($0), coveringAtMost: length ?? 0) } }
}

/// A history as its log leaves it: what each reader and writer works from.
struct HistoryState: Sendable {
    /// The kept revisions: committed, not pruned, not abandoned.
    var revisions: [Int: HistoryRecord] = [:]
    /// The lowest number never handed out.
    var next = 1
    /// The revision the document file was last seen to be, and as which file.
    var current: (revision: Int, document: FileSnapshot)?
    /// An append whose commit has not followed (under way, or killed).
    var intent: HistoryRecord?
    /// A save about to write a line's file past what the log accounts for (extending it, or
    /// making a new one), whose commit has not followed.
    var extending: HistoryRecord?
    /// The most bytes any record has accounted for in each line's file (kept, pruned, or as a
    /// seal left it): a file longer than this, with no save under way on it, holds bytes of
    /// records the log lost.
    var written: [Int: Int64] = [:]
    /// A replacing save committed whose rename is not known to have happened.
    var pending: HistoryRecord?
    /// Each line's file as the last writer left it.
    var lines: [Int: FileSnapshot] = [:]
    /// Records read: a log long past what it keeps is written again, smaller.
    var records = 0
    static let compactionRecords = 512

    mutating func apply(_ record: HistoryRecord) {
        records += 1
        switch record.kind {
        case .revision:
            guard let number = record.revision, let line = record.line else { return }
            revisions[number] = record
            next = max(next, number + 1)
            intent = nil
            extending = nil
            lines[line] = record.lineFile ?? lines[line]
            written[line] = max(written[line] ?? 0, record.length ?? 0, record.lineFile?.size ?? 0)
            if record.temporary != nil {
                pending = record
            } else {
                pending = nil
                if let document = record.document { current = (number, document) }
            }
        case .intent:
            intent = record
        case .extending:
            extending = record
        case .identity:
            guard let number = record.revision, let document = record.document else { return }
            current = (number, document)
            if pending?.revision == number { pending = nil }
            intent = nil
        case .abandoned:
            guard let number = record.revision else { return }
            revisions[number] = nil
            if pending?.revision == number { pending = nil }
            if intent?.revision == number { intent = nil }
            if extending?.revision == number { extending = nil }
        case .pruned:
            for number in record.revisions ?? [] { revisions[number] = nil }
        case .seal:
            guard let line = record.line else { return }
            lines[line] = record.lineFile
            written[line] = max(written[line] ?? 0, record.lineFile?.size ?? 0)
        case .base:
            next = max(next, record.next ?? 1)
        }
    }

    /// Kept revisions, oldest first.
    var kept: [HistoryRecord] { revisions.keys.sorted().compactMap { revisions[$0] } }

    /// The newest kept revision.
    var newest: HistoryRecord? { revisions.keys.max().flatMap { revisions[$0] } }

    /// The revision a document file is, when the history last saw it as exactly this file.
    func revision(of document: FileSnapshot) -> HistoryRecord? {
        guard let current, current.document == document else { return nil }
        return revisions[current.revision]
    }

    /// The line files kept revisions need, with the length each must have at least.
    var neededLines: [Int: Int64] {
        var needed: [Int: Int64] = [:]
        for record in revisions.values {
            guard let line = record.line, let length = record.length else { continue }
            needed[line] = max(needed[line] ?? 0, length)
        }
        return needed
    }
}

extension UInt8 {
    var isLowercaseHexDigit: Bool {
        (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(self) || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains(self)
    }
}
