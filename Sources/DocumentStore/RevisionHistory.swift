import SystemPackage

/// One document's kept revisions: `.canvas-revisions/<name>/<N>.<ext>`, each a hard link to
/// the file that was the document at revision N.
///
/// A save links its new file here under the next number before renaming it over the document,
/// so the current file is always kept under its own number (a document never saved gets
/// revision 1 when its first save begins). That gives every rule the store needs without a
/// counter that could disagree with the files:
/// - the revision of a file is the number of the entry that is the same file, which any reader
///   can find without a lock;
/// - a current file with no entry is revision 1 of a new history when it was never saved or
///   has other bytes than the newest entry (a new document under a deleted one's name: see
///   `lineage`), and one past the newest when it has its bytes (a folder copied without links);
/// - an entry numbered past the current file's was linked by a save killed before its rename:
///   it was never the document nor reported, and the next writer removes it;
/// - numbers only grow, because the current file is the newest entry and pruning never removes
///   it, nor revision 1 (the original).
/// Files whose names start with `.tmp.` are saves being written; outside the document's write
/// lock, they belong to a writer that is still alive.
///
/// A save made for a request that may be sent again elsewhere (a session's, with several
/// instances) also leaves a mark: an empty file `<N>.madeby.<key>.<pages>.<sha256>`, created
/// beside its entry before the rename, so that the request, run again on another instance after
/// the first died or lost the session before it could record the save, finds revision N made
/// instead of saving the same ink twice. Everything is in the name, so the directory's flush
/// that keeps the entry keeps the mark; a mark numbered past the current file (its save killed
/// before the rename) goes with that entry, and a mark goes when its revision is pruned.
struct RevisionHistory {
    let directory: Directory
    /// The document's extension, given to every entry (`pdf` or `yianazip`).
    let kind: String

    static let temporaryPrefix = ".tmp."

    struct Entry {
        let revision: Int
        let name: String
        let stat: Stat
    }

    func entryName(_ revision: Int) -> String { "\(revision).\(kind)" }

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

    /// The marks left beside the entries, oldest first.
    func marks() throws(Errno) -> [Mark] {
        try directory.names().compactMap(Mark.init(name:)).sorted { $0.revision < $1.revision }
    }

    /// Leaves `mark` beside its entry; made durable by the directory's next flush.
    func leave(_ mark: Mark) throws(Errno) {
        let file = try directory.create(mark.name)
        try Errno.rethrowing { try file.close() }
    }

    /// The kept revisions, oldest first.
    func entries() throws(Errno) -> [Entry] {
        var entries: [Entry] = []
        for name in try directory.names() {
            guard let dot = name.firstIndex(of: "."), name[name.index(after: dot)...] == kind,
                  let revision = Int(name[..<dot]), revision > 0, String(revision) == name[..<dot],
                  let stat = try directory.stat(name), stat.isRegularFile else { continue }
            entries.append(Entry(revision: revision, name: name, stat: stat))
        }
        return entries.sorted { $0.revision < $1.revision }
    }

    /// The revision of the file with `identity`, as the rules above give it.
    static func revision(of identity: FileIdentity, in entries: [Entry]) -> Int {
        if let entry = entries.last(where: { $0.stat.identity == identity }) { return entry.revision }
        return (entries.last?.revision ?? 0) + 1
    }

    /// Whether the file has an entry of its own (else it is current and not yet linked).
    static func isKept(_ identity: FileIdentity, in entries: [Entry]) -> Bool {
        entries.contains { $0.stat.identity == identity }
    }

    /// The entries to remove so that `keep` revisions remain, the current one included: always
    /// revision 1 and the newest.
    static func prunable(_ entries: [Entry], keep: Int) -> [Entry] {
        let newest = Set(entries.suffix(max(1, keep - 1)).map(\.revision))
        return entries.filter { $0.revision != 1 && !newest.contains($0.revision) }
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
