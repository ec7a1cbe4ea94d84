import Foundation

/// One record of a history's log (`HistoryLog`; the format is `protocol/history-log.md`): one
/// case a kind, each with the fields its kind has and no other, so a record that is read is a
/// record that can be used, and a kind added is a compile error wherever records are told apart.
enum HistoryRecord: Equatable, Sendable {
    /// A revision committed.
    case revision(KeptRevision)
    /// An append in place is about to write a revision at the end of the document (a writer
    /// killed before its commit leaves bytes there to cut).
    case intent(AppendIntent)
    /// A save is about to write a line's file past what the log accounts for (extending it, or
    /// making a new one).
    case extending(LineExtension)
    /// The document is this revision, now as this file (after a rename, a `touch`, a copy of
    /// the same bytes, a cut tail).
    case identity(Int, document: FileSnapshot)
    /// This number is no revision: a commit that never became the document (a replacing save
    /// killed before its rename, with its file gone; its number, committed once, is not handed
    /// out again), or an append's intent never committed (its number is free again).
    case abandoned(Int)
    /// These revisions are no longer kept.
    case pruned([Int])
    /// A line's file after pruning cut it, or nil: removed.
    case seal(Int, FileSnapshot?)
    /// A log written whole (a migration, or a compaction): the lowest number never handed out.
    case base(next: Int)

    /// Its kind, as the payload names it.
    var kind: String { fields.kind }

    /// The revision it commits, for a `revision` record.
    var kept: KeptRevision? {
        if case .revision(let kept) = self { return kept }
        return nil
    }

    static func revision(_ number: Int, line: Int, length: Int64, sha256: String, state: SHA256Midstate, saved: Int64,
                         source: String, document: FileSnapshot?, lineFile: FileSnapshot?, temporary: String? = nil,
                         madeBy: String? = nil, pageCount: Int? = nil) -> HistoryRecord {
        // The log keeps a state's words, its length being the revision's rounded down to a block
        // (as the hasher leaves it): held the same way here, a record reads back equal.
        .revision(KeptRevision(revision: number, line: line, length: length, sha256: sha256,
                               midstate: SHA256Midstate(words: state.words, length: length - length % 64), saved: saved,
                               source: source, document: document, lineFile: lineFile, temporary: temporary, madeBy: madeBy,
                               pageCount: pageCount))
    }

    static func intent(_ number: Int, from: Int64, document: FileSnapshot, line: Int? = nil) -> HistoryRecord {
        .intent(AppendIntent(revision: number, from: from, document: document, line: line))
    }

    static func extending(_ number: Int, line: Int, from: Int64) -> HistoryRecord {
        .extending(LineExtension(revision: number, line: line, from: from))
    }
}

/// A revision as its commit record says: its bytes are the first `length` of the line's file
/// `data.<line>`.
struct KeptRevision: Equatable, Sendable {
    var revision: Int
    var line: Int
    var length: Int64
    var sha256: String
    /// SHA-256's state after the revision's last whole block, from which a save that extends it
    /// continues.
    var midstate: SHA256Midstate
    /// Milliseconds since 1970.
    var saved: Int64
    /// What made it (a save, a restore, an outside change taken in, a migration).
    var source: String
    /// The document file it is, when it became the document.
    var document: FileSnapshot?
    /// The line's file just after.
    var lineFile: FileSnapshot?
    /// A replacing save's new file in the history's folder, renamed over the document after this
    /// record (an `identity` record says it was).
    var temporary: String?
    /// The request that saved it, and the page count it reported: a save a request may run again.
    var madeBy: String?
    var pageCount: Int?
}

/// An append in place about to write revision `revision` at byte `from` of `document`.
struct AppendIntent: Equatable, Sendable {
    var revision: Int
    var from: Int64
    var document: FileSnapshot
    /// The line the append also writes, when it does.
    var line: Int?
}

/// A save about to write line `line`'s file from byte `from`, for revision `revision`.
struct LineExtension: Equatable, Sendable {
    var revision: Int
    var line: Int
    var from: Int64
}

// MARK: - The payload: a JSON object with sorted keys

extension HistoryRecord {
    /// Every field a record of any kind may have, as the payload names them.
    private struct Fields: Codable {
        var kind: String
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

        init(kind: String) { self.kind = kind }

        static let names: Set<String> = ["kind", "revision", "line", "length", "sha256", "state", "saved", "source", "document",
                                         "lineFile", "temporary", "madeBy", "pageCount", "from", "revisions", "next"]

        /// Read in one pass; a name no kind has makes it no record of this version (a newer
        /// format says so in the header, so here it is damage or forgery).
        init(from decoder: any Decoder) throws {
            let names = try decoder.container(keyedBy: AnyName.self)
            guard names.allKeys.allSatisfy({ Self.names.contains($0.stringValue) }) else {
                throw DecodingError.dataCorrupted(.init(codingPath: [], debugDescription: "a field no record has"))
            }
            let c = try decoder.container(keyedBy: CodingKeys.self)
            kind = try c.decode(String.self, forKey: .kind)
            revision = try c.decodeIfPresent(Int.self, forKey: .revision)
            line = try c.decodeIfPresent(Int.self, forKey: .line)
            length = try c.decodeIfPresent(Int64.self, forKey: .length)
            sha256 = try c.decodeIfPresent(String.self, forKey: .sha256)
            state = try c.decodeIfPresent(String.self, forKey: .state)
            saved = try c.decodeIfPresent(Int64.self, forKey: .saved)
            source = try c.decodeIfPresent(String.self, forKey: .source)
            document = try c.decodeIfPresent(FileSnapshot.self, forKey: .document)
            lineFile = try c.decodeIfPresent(FileSnapshot.self, forKey: .lineFile)
            temporary = try c.decodeIfPresent(String.self, forKey: .temporary)
            madeBy = try c.decodeIfPresent(String.self, forKey: .madeBy)
            pageCount = try c.decodeIfPresent(Int.self, forKey: .pageCount)
            from = try c.decodeIfPresent(Int64.self, forKey: .from)
            revisions = try c.decodeIfPresent([Int].self, forKey: .revisions)
            next = try c.decodeIfPresent(Int.self, forKey: .next)
        }

        private struct AnyName: CodingKey {
            let stringValue: String
            init(stringValue: String) { self.stringValue = stringValue }
            var intValue: Int? { nil }
            init?(intValue: Int) { nil }
        }
    }

    private var fields: Fields {
        switch self {
        case .revision(let kept):
            var f = Fields(kind: "revision")
            (f.revision, f.line, f.length, f.sha256, f.state, f.saved) = (kept.revision, kept.line, kept.length, kept.sha256,
                                                                         kept.midstate.hex, kept.saved)
            (f.source, f.document, f.lineFile, f.temporary, f.madeBy, f.pageCount) = (kept.source, kept.document, kept.lineFile,
                                                                                     kept.temporary, kept.madeBy, kept.pageCount)
            return f
        case .intent(let intent):
            var f = Fields(kind: "intent")
            (f.revision, f.from, f.document, f.line) = (intent.revision, intent.from, intent.document, intent.line)
            return f
        case .extending(let extending):
            var f = Fields(kind: "extending")
            (f.revision, f.line, f.from) = (extending.revision, extending.line, extending.from)
            return f
        case .identity(let number, let document):
            var f = Fields(kind: "identity")
            (f.revision, f.document) = (number, document)
            return f
        case .abandoned(let number):
            var f = Fields(kind: "abandoned")
            f.revision = number
            return f
        case .pruned(let numbers):
            var f = Fields(kind: "pruned")
            f.revisions = numbers
            return f
        case .seal(let line, let file):
            var f = Fields(kind: "seal")
            (f.line, f.lineFile) = (line, file)
            return f
        case .base(let next):
            var f = Fields(kind: "base")
            f.next = next
            return f
        }
    }

    /// The payload in a log of `version`: sorted keys, no escaped slashes; every field is a
    /// number, a string of hex digits or ASCII, or an array of numbers. Version 1's is the only
    /// format yet; a writer appends in the version of the log it opened, never a newer one
    /// (protocol/history-log.md, section 9), and converts a log only by writing it whole.
    func encoded(version: UInt32 = HistoryLog.version) -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return Array((try? encoder.encode(fields)) ?? Data())
    }

    /// A payload of a log of `version`, or nil: not a record that version's writer makes (a
    /// field no record has, a field its kind needs missing, a value out of bounds).
    init?(decoding bytes: [UInt8], version: UInt32 = HistoryLog.version) {
        // Version 1 is the only one yet; a version 2 reads its own payloads here and version 1's
        // as they are (protocol/history-log.md, section 9, Versioning).
        guard version == 1, let f = try? JSONDecoder().decode(Fields.self, from: Data(bytes)) else { return nil }
        switch f.kind {
        case "revision":
            guard let revision = f.revision, Self.bounded(revision), let line = f.line, line > 0, line <= revision,
                  let length = f.length, length > 0, length <= HistoryLog.maxNumber,
                  let sha256 = f.sha256, sha256.utf8.count == 64, sha256.utf8.allSatisfy(\.isLowercaseHexDigit),
                  let state = f.state, let midstate = SHA256Midstate(hex: Substring(state), coveringAtMost: length),
                  let saved = f.saved,
                  f.madeBy.map({ !$0.isEmpty && $0.utf8.count <= 64 && $0.utf8.allSatisfy(\.isASCIILetterOrDigit) }) ?? true
            else { return nil }
            // A temporary file is one of the history's own, by name: a log edited to name a
            // path outside the folder names nothing the settle may move.
            if let temporary = f.temporary, !Self.isTemporaryName(temporary) { return nil }
            self = .revision(KeptRevision(revision: revision, line: line, length: length, sha256: sha256, midstate: midstate,
                                          saved: saved, source: f.source ?? "", document: f.document, lineFile: f.lineFile,
                                          temporary: f.temporary, madeBy: f.madeBy, pageCount: f.pageCount))
        case "intent":
            guard let revision = f.revision, Self.bounded(revision), let from = f.from, from >= 0, from <= HistoryLog.maxNumber,
                  let document = f.document, f.line.map(Self.bounded) ?? true else { return nil }
            self = .intent(AppendIntent(revision: revision, from: from, document: document, line: f.line))
        case "extending":
            guard let revision = f.revision, Self.bounded(revision), let line = f.line, Self.bounded(line),
                  let from = f.from, from >= 0, from <= HistoryLog.maxNumber else { return nil }
            self = .extending(LineExtension(revision: revision, line: line, from: from))
        case "identity":
            guard let revision = f.revision, Self.bounded(revision), let document = f.document else { return nil }
            self = .identity(revision, document: document)
        case "abandoned":
            guard let revision = f.revision, Self.bounded(revision) else { return nil }
            self = .abandoned(revision)
        case "pruned":
            guard let numbers = f.revisions, numbers.allSatisfy({ $0 > 1 && Self.bounded($0) }) else { return nil }
            self = .pruned(numbers)
        case "seal":
            guard let line = f.line, Self.bounded(line) else { return nil }
            self = .seal(line, f.lineFile)
        case "base":
            guard let next = f.next, next > 0, next <= HistoryLog.maxRevision + 1 else { return nil }
            self = .base(next: next)
        default:
            // A kind name this version has no case for: not a record it writes.
            return nil
        }
    }

    private static func bounded(_ number: Int) -> Bool { number > 0 && number <= HistoryLog.maxRevision }

    /// A name a save gives its new file in the history's folder: the prefix, then no separator.
    static func isTemporaryName(_ name: String) -> Bool {
        name.hasPrefix(RevisionHistory.temporaryPrefix) && name.utf8.count > RevisionHistory.temporaryPrefix.utf8.count
            && name.utf8.count <= 255 && !name.utf8.contains(UInt8(ascii: "/")) && !name.utf8.contains(0)
    }
}
