public import CanvasCore
public import Foundation
import PDFSurgery
import SystemPackage
#if canImport(Glibc)
import Glibc
#endif

/// The document folder: every regular `.pdf` and `.yianazip` file in it is a document named by
/// its file name.
///
/// - Every file is reached through the folder's descriptor, without following links, and only
///   regular files are read or written: a name checked is the file used.
/// - Saves are atomic: a new file is written beside the others, flushed, and renamed over the
///   document. The history in `.canvas-revisions/<name>/` keeps each line of revisions as one
///   file and each revision as a length of it (see `RevisionHistory`), so N saves that append
///   cost the current file and the increments, not N copies.
/// - One writer per document, across processes: a writer locks the document file itself
///   (`flock`) and checks it is still the current one; a new file is locked before it is
///   renamed into place, so the next writer waits for the first to finish.
/// - Readers take no lock and change nothing: they open the current file and name its revision
///   by which kept file it is and its length. The one exception: a tail a killed append left
///   (`SaveMode.append`), which a reader cuts under the lock when no writer holds it.
///
/// Sendable: its state is fixed at init but for the hash cache, which locks.
public final class DocumentStore: Sendable {
    public let folder: URL
    /// Revisions kept per document, the current one included; never fewer than 2 (the original
    /// and the latest).
    public let keepRevisions: Int
    /// How long reading a document may take (`document.info`, a page's geometry, one entry of
    /// `document.list`), and how long a save may: a damaged file can make qpdf's repair take
    /// hours, and past these it is refused as `timeout` instead.
    public let readBudget: Duration
    public let saveBudget: Duration
    /// The most points of ink one page may hold, counting every save's.
    public let maxInkPointsPerPage: Int
    /// The largest document file read at all: a larger one is refused (`tooLarge`) before a
    /// byte of it is read. A sparse file can claim 40 GiB while it takes 8 KiB of disk, and
    /// hashing it took 75 s, holding a worker that other clients' reads waited for.
    public let maxDocumentBytes: Int64
    /// How long hashing one file may take (cached, it is paid once per file): a slow disk
    /// still reads `maxDocumentBytes` in it.
    public let hashBudget: Duration
    public static let defaultMaxDocumentBytes: Int64 = 1 << 30
    /// How a save that appends reaches the disk (a rewrite, a restore and a `.yianazip` save
    /// always replace the file).
    public let saveMode: SaveMode
    let root: Directory
    let revisionsRoot: Directory
    private let hashes = ContentHashes()
    private let costs = LastSaveCost()

    /// What the last save made by this store read and wrote (for benchmarks).
    public var lastSaveCost: SaveCost { costs.value }
    func recordCost(_ cost: SaveCost) { costs.set(cost) }

    public static let extensions = ["pdf", "yianazip"]
    static let revisionsFolderName = ".canvas-revisions"
    /// How often a read starts again when saves keep replacing the file under it.
    static let readAttempts = 20

    public init(folder: URL, keepRevisions: Int = 20, readBudget: Duration = .seconds(2),
                saveBudget: Duration = .seconds(120), maxInkPointsPerPage: Int = 400_000,
                maxDocumentBytes: Int64 = DocumentStore.defaultMaxDocumentBytes, hashBudget: Duration = .seconds(10),
                saveMode: SaveMode = .replace) throws(DocumentError) {
        self.saveMode = saveMode
        self.maxInkPointsPerPage = maxInkPointsPerPage
        self.maxDocumentBytes = max(1, maxDocumentBytes)
        self.hashBudget = hashBudget
        self.folder = folder.standardizedFileURL.resolvingSymlinksInPath()
        self.keepRevisions = max(2, keepRevisions)
        self.readBudget = readBudget
        self.saveBudget = saveBudget
        do {
            root = try Directory.open(self.folder.path)
        } catch {
            throw .system("open the document folder \(self.folder.path)", error)
        }
        do {
            revisionsRoot = try root.directory(Self.revisionsFolderName, create: true)
        } catch {
            throw .system("open \(self.folder.path)/\(Self.revisionsFolderName)", error)
        }
        repairIdleDocuments()
        removeAbandonedUploads()
    }

    // MARK: Names

    /// Refuses anything that is not a plain name of a document (no separators, no hidden files).
    static func check(_ name: String) throws(DocumentError) {
        guard !name.isEmpty, name.utf8.count <= 255 else { throw .invalidName(name, reason: "empty or longer than 255 bytes") }
        guard !name.contains("/"), !name.contains("\0"), !name.contains("\\") else {
            throw .invalidName(name, reason: "it must be a file name, without a path")
        }
        guard !name.hasPrefix(".") else { throw .invalidName(name, reason: "hidden names are not documents") }
        guard extensions.contains(kind(name)) else { throw .invalidName(name, reason: "documents end in .pdf or .yianazip") }
    }

    static func kind(_ name: String) -> String { (name as NSString).pathExtension.lowercased() }

    // MARK: Opening

    /// A document file, open: what was opened is what is read, whatever happens to the name.
    final class OpenFile {
        let descriptor: FileDescriptor
        let stat: Stat
        private var owned = true

        init(_ descriptor: FileDescriptor, _ stat: Stat) {
            self.descriptor = descriptor
            self.stat = stat
        }

        /// Hands the descriptor (and its lock) to a new owner: this one no longer closes it.
        func takeDescriptor() -> FileDescriptor {
            owned = false
            return descriptor
        }

        deinit { if owned { try? descriptor.close() } }
    }

    /// Opens `name` in `directory`, refusing links and anything that is not a regular file.
    func openRegular(_ directory: Directory, _ name: String, document: String) throws(DocumentError) -> OpenFile {
        let descriptor: FileDescriptor
        do {
            descriptor = try directory.openForReading(name)
        } catch .noSuchFileOrDirectory {
            throw .notFound(document)
        } catch .tooManySymbolicLinkLevels {
            throw .unreadable(name: document, reason: "notRegularFile", message: "it is a symbolic link; only regular files are documents")
        } catch {
            throw .system("open \(document)", error)
        }
        let stat: Stat
        do {
            stat = try descriptor.stat()
        } catch {
            try? descriptor.close()
            throw .system("inspect \(document)", error)
        }
        guard stat.isRegularFile else {
            try? descriptor.close()
            throw .unreadable(name: document, reason: "notRegularFile",
                              message: "it is \(Self.describe(stat.type)); only regular files are documents")
        }
        return OpenFile(descriptor, stat)
    }

    private static func describe(_ type: FileType) -> String {
        switch type {
        case .directory: return "a directory"
        case .symbolicLink: return "a symbolic link"
        case .fifo: return "a FIFO"
        case .socket: return "a socket"
        case .characterSpecial, .blockSpecial: return "a device"
        default: return "not a regular file"
        }
    }

    /// The current file of a document, open; refused when it is larger than `maxDocumentBytes`.
    func openDocument(_ name: String) throws(DocumentError) -> OpenFile {
        try Self.check(name)
        let file = try openRegular(root, name, document: name)
        guard file.stat.size <= maxDocumentBytes else {
            throw .unreadable(name: name, reason: "tooLarge",
                              message: "it is \(file.stat.size) bytes (\(Int64(file.stat.rawValue.st_blocks) * 512) on disk); documents over \(maxDocumentBytes) bytes are not read")
        }
        return file
    }

    /// The document's revision history; nil when it has never been saved (nothing kept yet).
    func history(_ name: String, create: Bool) throws(DocumentError) -> RevisionHistory? {
        do {
            return RevisionHistory(directory: try revisionsRoot.directory(name, create: create), kind: Self.kind(name))
        } catch .noSuchFileOrDirectory where !create {
            return nil
        } catch .notDirectory where !create {
            // Something else stands where the history belongs: readers read on (revision 1 then),
            // and a save refuses, with this cause, until it is moved away.
            return nil
        } catch {
            throw .system("open the revisions of \(name)", error)
        }
    }

    func listing(_ history: RevisionHistory?, _ name: String) throws(DocumentError) -> RevisionHistory.Listing {
        guard let history else { return RevisionHistory.Listing() }
        do {
            return try history.listing()
        } catch {
            throw .system("list the revisions of \(name)", error)
        }
    }

    /// Reads the current document with `body`, and names the revision of what it read. Takes no
    /// lock and changes nothing: a save that lands meanwhile makes it read again, so the
    /// revision, the hash and what `body` saw are always of one file.
    func reading<T>(_ name: String, _ body: (OpenFile) throws(DocumentError) -> T) throws(DocumentError)
        -> (T, revision: Int, sha256: String, kept: [RevisionHistory.Kept]) {
        for _ in 0..<Self.readAttempts {
            let file = try openDocument(name)
            var outcome: Result<T, DocumentError>
            do {
                outcome = .success(try body(file))
            } catch {
                outcome = .failure(error)
            }
            let history = try history(name, create: false)
            let listing = try listing(history, name)
            // Appended to while it was read (a save in append mode): read it again.
            if let now = try? file.descriptor.stat(), now.size != file.stat.size { continue }
            // A kept file has its number for good (its length names the revision); one that is
            // not kept is the current file only while the name still leads to it (else it was
            // saved over, and perhaps pruned, while this read: read the new one).
            let stillCurrent = (try? root.stat(name))?.identity == file.stat.identity
            if let kept = listing.revision(of: file.stat.identity, size: file.stat.size) {
                let value = try outcome.get()
                let sha256: String
                if let record = kept.record { sha256 = record.sha256 } else { sha256 = try hash(file, name) }
                return (value, kept.revision, sha256, listing.kept)
            }
            if let committed = listing.committedPrefix(of: file.stat.identity, size: file.stat.size), let history {
                settleTail(name, file, committed, history)
                continue
            }
            if stillCurrent {
                // Never saved, or a new document under an old name (see `lineage`).
                let value = try outcome.get()
                let kept = try lineage(file, name, history, listing)
                return (value, (kept.last?.revision ?? 0) + 1, try hash(file, name), kept)
            }
        }
        throw .unreadable(name: name, reason: "busy", message: "it was saved over \(Self.readAttempts) times while being read; try again")
    }

    func hash(_ file: OpenFile, _ name: String) throws(DocumentError) -> String {
        do {
            return try hashes.hash(file.descriptor, file.stat, budget: hashBudget)
        } catch .timedOut {
            throw .unreadable(name: name, reason: "timeout", message: "hashing its \(file.stat.size) bytes took longer than \(hashBudget)")
        } catch {
            throw .system("read \(name)", error)
        }
    }

    private func header(_ name: String, _ file: OpenFile) throws(DocumentError) -> YianaContainer.Header {
        do {
            return try YianaContainer.readHeader(file.descriptor)
        } catch .read(let error) {
            throw .system("read \(name)", error)
        } catch {
            throw .unreadable(name: name, reason: "damaged", message: error.description)
        }
    }

    private func location(_ name: String, _ file: OpenFile) throws(DocumentError) -> (PDFLocation, YianaContainer.Header?) {
        let container = Self.kind(name) == "yianazip" ? try header(name, file) : nil
        return (PDFLocation(file: file.descriptor, name: name, offset: container?.pdfOffset ?? 0, budget: readBudget), container)
    }

    func pdf(_ name: String, _ file: OpenFile, at offset: Int64? = nil) throws(DocumentError) -> PDFFile {
        let start: Int64
        if let offset { start = offset } else { start = try location(name, file).0.offset }
        do {
            return try PDFFile(file: file.descriptor, name: name, offset: start, budget: readBudget)
        } catch {
            throw unreadable(name, error)
        }
    }

    func unreadable(_ name: String, _ error: PDFError) -> DocumentError {
        switch error.kind {
        case .encrypted: return .unreadable(name: name, reason: "encrypted", message: error.message)
        case .damaged: return .unreadable(name: name, reason: "damaged", message: error.message)
        case .io: return .io(operation: error.operation, message: error.message, errno: error.errno)
        case .timeout: return .unreadable(name: name, reason: "timeout", message: error.message)
        default: return .io(operation: error.operation, message: error.message)
        }
    }

    // MARK: Reading

    /// Every document in the folder; one that cannot be read (or is not a regular file) is
    /// listed with the reason.
    ///
    /// A folder that cannot be read throws: an empty list would tell a client the documents
    /// are gone, when the process has only run out of descriptors for a moment.
    public func list() throws(DocumentError) -> [(name: String, summary: Result<DocumentSummary, DocumentError>)] {
        let names: [String]
        do {
            names = try root.names()
        } catch {
            throw .system("list the document folder", error)
        }
        // In code point order (UTF-8 byte order), not Swift's, which sorts by canonical
        // equivalence and would put two differently spelled "é" files side by side as one.
        return names.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }.compactMap { name in
            guard (try? Self.check(name)) != nil else { return nil }
            do throws(DocumentError) {
                return (name, .success(try summary(name)))
            } catch {
                return (name, .failure(error))
            }
        }
    }

    public func summary(_ name: String) throws(DocumentError) -> DocumentSummary {
        let (pageCount, revision, sha256, _) = try reading(name) { (file) throws(DocumentError) in try pdf(name, file).pageCount }
        return DocumentSummary(name: name, revision: revision, pageCount: pageCount, sha256: sha256)
    }

    /// Everything `document.info` reports, from one read of the file.
    public func info(_ name: String) throws(DocumentError) -> DocumentInfo {
        let ((pages, metadata), revision, sha256, _) = try reading(name) { (file) throws(DocumentError) in
            let (place, container) = try location(name, file)
            let document = try pdf(name, file, at: place.offset)
            var pages: [PageSummary] = []
            for index in 0..<document.pageCount {
                do throws(PDFError) {
                    let page = try document.page(index)
                    pages.append(PageSummary(width: page.width, height: page.height, rotation: page.rotation))
                } catch {
                    throw unreadable(name, error)
                }
            }
            return (pages, container?.metadata)
        }
        return DocumentInfo(summary: DocumentSummary(name: name, revision: revision, pageCount: pages.count, sha256: sha256),
                            pages: pages, metadata: metadata)
    }

    /// One page's display geometry.
    public func page(_ name: String, _ index: Int) throws(DocumentError) -> PageSummary {
        let pdf = try pdf(name, try openDocument(name))
        guard index >= 0 && index < pdf.pageCount else { throw .pageOutOfRange(name: name, page: index, pageCount: pdf.pageCount) }
        do {
            let page = try pdf.page(index)
            return PageSummary(width: page.width, height: page.height, rotation: page.rotation)
        } catch {
            throw unreadable(name, error)
        }
    }

    /// The kept revisions, oldest first, the current one last.
    public func revisions(_ name: String) throws(DocumentError) -> [RevisionSummary] {
        let (currentFile, current, currentHash, kept) = try reading(name) { (file) throws(DocumentError) in file.stat }
        let revisions = try history(name, create: false)
        var result: [RevisionSummary] = []
        for entry in kept where entry.revision < current {
            if let record = entry.record {
                result.append(RevisionSummary(revision: entry.revision, bytes: record.length, modified: record.modified,
                                              current: false, sha256: record.sha256))
                continue
            }
            // An older history's file, hashed whole; one pruned since the listing is left out.
            guard let revisions, let file = try? openRegular(revisions.directory, entry.holder.name, document: name) else { continue }
            result.append(RevisionSummary(revision: entry.revision, bytes: file.stat.size, modified: Self.modified(file.stat),
                                          current: false, sha256: try hash(file, name)))
        }
        result.append(RevisionSummary(revision: current, bytes: currentFile.size, modified: Self.modified(currentFile), current: true,
                                      sha256: currentHash))
        return result
    }

    private static func modified(_ stat: Stat) -> Date {
        let time = stat.rawValue.st_mtim
        return Date(timeIntervalSince1970: Double(time.tv_sec) + Double(time.tv_nsec) / 1e9)
    }

    // MARK: Writing

    /// Puts `drawing` on `page`, as a new revision. Returns the new summary.
    ///
    /// `madeBy`, a key of hex digits naming the request, makes the save findable: run again with
    /// the same key, while the revision it made is kept, it answers that revision instead of
    /// saving again (for a request retried on another instance after the first lost it).
    public func flatten(_ name: String, page: Int, drawing: Drawing, expectedRevision: Int? = nil,
                        madeBy: String? = nil, fence: WriteFence? = nil) throws(DocumentError) -> DocumentSummary {
        try writing(name, expectedRevision: expectedRevision, madeBy: madeBy, fence: fence) { (current, history, kept) throws(DocumentError) in
            // A container's header is read once: it gives both where the PDF starts and the
            // metadata the save updates.
            // Read as a reader would (a document too slow to read is too slow to save), then
            // given the save's budget for the write.
            let (place, container) = try location(name, current)
            let prepared: Flattener.Prepared
            do throws(FlattenError) {
                prepared = try Flattener.prepare(place, page: page, adding: drawing, maxPagePoints: maxInkPointsPerPage)
            } catch {
                throw documentError(name, place, page, error)
            }
            prepared.allow(saveBudget)
            var head: [UInt8] = []
            if let container {
                head = YianaContainer.updated(container, pageCount: prepared.pageCount, now: Date()) + YianaContainer.separator
            }
            let increment: [UInt8]?
            if prepared.needsRewrite {
                increment = nil
            } else {
                do throws(FlattenError) {
                    increment = try prepared.increment()
                } catch {
                    throw documentError(name, place, page, error)
                }
            }
            // A .pdf's update only appends: the new file is the current one and the update, so it
            // continues the current revision's line and its hash. A container's metadata, at the
            // front, changes with every save, and a rewrite changes everything: a new line.
            if let increment, container == nil, let record = kept.record, saveMode == .append {
                return try append(name, history, current, kept, record, increment, pageCount: prepared.pageCount, madeBy: madeBy)
            }
            if let increment, container == nil, let record = kept.record {
                return try save(name, history, as: kept.revision + 1, extending: (record, current.descriptor), madeBy: madeBy, alreadyHashed: kept.hashedToRecord) { (out, hasher, cost) throws(DocumentError) in
                    do throws(Errno) {
                        try FileCopy.copyPrefix(current.descriptor, length: record.length, to: out, &cost)
                    } catch {
                        throw .system("copy \(name) for its new revision", error)
                    }
                    try write(out, increment, &hasher, &cost)
                    return Written(hashing: .fed, pageCount: prepared.pageCount)
                }
            }
            return try save(name, history, as: kept.revision + 1, extending: nil, madeBy: madeBy, alreadyHashed: kept.hashedToRecord) { (out, hasher, cost) throws(DocumentError) in
                try write(out, head, &hasher, &cost)
                if let increment {
                    try copy(current.descriptor, from: place.offset, to: out, &hasher, &cost)
                    try write(out, increment, &hasher, &cost)
                } else {
                    do throws(FlattenError) {
                        try prepared.rewrite(to: out)
                    } catch {
                        throw documentError(name, place, page, error)
                    }
                    return Written(hashing: .none, pageCount: prepared.pageCount)
                }
                return Written(hashing: .fed, pageCount: prepared.pageCount)
            }
        }
    }

    /// Makes an earlier revision the current one again, as a new revision (history only grows).
    /// Restoring the current revision changes nothing and answers the current summary.
    /// `madeBy` as for `flatten`.
    public func restore(_ name: String, revision: Int, expectedRevision: Int? = nil,
                        madeBy: String? = nil, fence: WriteFence? = nil) throws(DocumentError) -> DocumentSummary {
        try writing(name, expectedRevision: expectedRevision, madeBy: madeBy, fence: fence) { (current, history, kept) throws(DocumentError) in
            if revision == kept.revision {
                let sha256: String
                if let record = kept.record { sha256 = record.sha256 } else { sha256 = try hash(current, name) }
                return DocumentSummary(name: name, revision: kept.revision, pageCount: try pdf(name, current).pageCount, sha256: sha256)
            }
            guard let entry = try listing(history, name).kept.first(where: { $0.revision == revision }), revision < kept.revision else {
                throw .revisionNotFound(name: name, revision: revision)
            }
            let source = try openRegular(history.directory, entry.holder.name, document: name)
            guard source.stat.identity == entry.holder.stat.identity else {
                throw .io(operation: "restore revision \(revision) of \(name)", message: "its file was replaced from outside; try again")
            }
            // The restored bytes start a line of their own; their hash is the revision's.
            return try save(name, history, as: kept.revision + 1, extending: nil, madeBy: madeBy, alreadyHashed: kept.hashedToRecord) { (out, hasher, cost) throws(DocumentError) in
                let hashing: Written.Hashing
                if let record = entry.record {
                    do throws(Errno) {
                        try FileCopy.copyPrefix(source.descriptor, length: record.length, to: out, &cost)
                    } catch {
                        throw .system("copy revision \(revision) of \(name)", error)
                    }
                    hashing = .known(record.sha256, record.midstate)
                } else {
                    try copy(source.descriptor, from: 0, to: out, &hasher, &cost)
                    hashing = .fed
                }
                return Written(hashing: hashing, pageCount: try pageCount(name, out))
            }
        }
    }

    /// What a save checks once it is the document's only writer, before it writes anything (and
    /// after a save `madeBy` its request is looked for), and again just before it commits the
    /// new revision: that it may still be made. Throws to refuse it; refused at the commit, the
    /// save leaves nothing behind. canvasd's fence: the session the save is for is still this
    /// instance's, at the version it was saved from; an instance paused while it waited for the
    /// lock, or while it wrote, would otherwise save a drawing the client has since changed
    /// elsewhere. What it cannot see is a pause between its own answer and the commit's one
    /// system call (a rename, or a record's creation).
    public typealias WriteFence = @Sendable (_ name: String) throws(DocumentError) -> Void

    /// Runs `body` as the document's only writer: the current file open and locked, what a
    /// killed save left behind repaired, the current revision checked against `expectedRevision`.
    /// A save `madeBy` a request that already made a revision still kept answers that one, before
    /// `expectedRevision` is checked: it is what the request's first run would have answered.
    /// `fence`, if given, is asked next (see `WriteFence`).
    func writing(_ name: String, expectedRevision: Int?, madeBy: String? = nil, fence: WriteFence? = nil,
                 _ body: (OpenFile, RevisionHistory, RevisionHistory.Kept) throws(DocumentError) -> DocumentSummary) throws(DocumentError) -> DocumentSummary {
        let current = try lockCurrent(name)
        // A save supersedes this file, and the history no longer names it: its last close frees
        // its blocks (11 ms for 64 MB on ext4), which the reply need not wait for.
        defer { FileRelease.later(current) }
        guard let opened = try history(name, create: true) else { throw .io(operation: "open the revisions of \(name)", message: "missing") }
        var history = try endForeignHistory(name, current, opened)
        history.commitFence = fence
        let kept = try repair(name, current, history)
        let revision = kept.revision
        if let madeBy {
            // It becomes part of a file name, read back by splitting at dots.
            precondition(!madeBy.isEmpty && madeBy.utf8.count <= 64 && madeBy.utf8.allSatisfy { $0.isASCIILetterOrDigit },
                         "a save's key is 1 to 64 ASCII letters and digits")
            let marks = try listing(history, name).marks
            if let made = marks.last(where: { $0.key == madeBy && $0.revision <= revision }) {
                return DocumentSummary(name: name, revision: made.revision, pageCount: made.pageCount, sha256: made.sha256)
            }
        }
        try fence?(name)
        if let expectedRevision, expectedRevision != revision {
            throw .conflict(name: name, expected: expectedRevision, current: revision)
        }
        return try body(current, history, kept)
    }

    /// Opens and locks the current file of `name`. A save that replaced it while this waited
    /// leaves the lock on a file that is no longer the document: then the new one is locked.
    private func lockCurrent(_ name: String) throws(DocumentError) -> OpenFile {
        while true {
            let file = try openDocument(name)
            do {
                try FileLock.lock(file.descriptor)
            } catch {
                throw .system("lock \(name)", error)
            }
            let now: Stat?
            do {
                now = try root.stat(name)
            } catch {
                throw .system("inspect \(name)", error)
            }
            if let now, now.identity == file.stat.identity {
                // What the file is now that no writer can change it: a save that appended in
                // place while this waited made it longer under the same identity, and the stat
                // taken at the open would name the revision before that save.
                do {
                    return OpenFile(file.takeDescriptor(), try file.descriptor.stat())
                } catch {
                    throw .system("inspect \(name)", error)
                }
            }
            if now == nil { throw .notFound(name) }
        }
    }

    /// Puts right what a killed save of this document left, under its write lock (so no writer
    /// of it is alive but this one): abandoned temporary files go; files, records and marks
    /// numbered past the current file's revision (left by a save killed before its rename: never
    /// the document, never reported) go; a current file that is not kept (never saved, or a copy
    /// of the newest revision: `endForeignHistory` has set any other history aside) is kept under
    /// its number, with its record; and a current file of an older history (kept, but without a
    /// record) gets its record, so that the save can continue its line and its hash. Returns
    /// the current revision, with its record unless `migrate` is false (at start-up, where
    /// hashing every large document before serving would hold the server up: the first save of
    /// each does it). Killed itself, it leaves nothing the next repair cannot mend.
    func repair(_ name: String, _ current: OpenFile, _ history: RevisionHistory, migrate: Bool = true) throws(DocumentError) -> RevisionHistory.Kept {
        do {
            try history.removeAbandonedTemporaries()
            let listing = try history.listing()
            var found = listing.revision(of: current.stat.identity, size: current.stat.size)
            if found == nil, let committed = listing.committedPrefix(of: current.stat.identity, size: current.stat.size) {
                try cutTail(name, current, committed)
                found = committed
            }
            for intent in listing.intents { try history.directory.remove(intent.name) }
            let revision = found?.revision ?? (listing.kept.last?.revision ?? 0) + 1
            // Past the current revision, or (for a file not kept yet) at its number: a killed save's.
            let last = found == nil ? revision - 1 : revision
            for orphan in listing.files where orphan.revision > last { try history.directory.remove(orphan.name) }
            for orphan in listing.records.values where orphan.revision > last { try history.directory.remove(orphan.name) }
            for orphan in listing.marks where orphan.revision > last { try history.directory.remove(orphan.name) }
            if let found, found.record != nil { return found }
            var holder = found?.holder
            if holder == nil {
                let entry = history.entryName(revision, line: revision)
                try root.link(name, to: history.directory, as: entry)
                // The name is linked, not the descriptor: make sure it was the file we hold.
                guard try history.directory.stat(entry)?.identity == current.stat.identity else {
                    try history.directory.remove(entry)
                    throw DocumentError.io(operation: "keep revision \(revision) of \(name)",
                                           message: "the document was replaced from outside during the save; try again")
                }
                holder = RevisionHistory.Entry(revision: revision, line: revision, name: entry, stat: current.stat)
            }
            guard migrate else {
                try history.directory.sync()
                return RevisionHistory.Kept(revision: revision, length: current.stat.size, record: nil, holder: holder!)
            }
            // Hashed once, whole (unless a read of it did that already): the record's state lets
            // every later save hash only its increment.
            let (sha256, midstate, fed) = try hashes.hashWithState(current.descriptor, current.stat)
            let record = RevisionHistory.Record(revision: revision, line: found?.line ?? revision, length: current.stat.size,
                                                saved: Self.milliseconds(current.stat), sha256: sha256, midstate: midstate)
            try history.leave(record.name)
            try history.directory.sync()
            return RevisionHistory.Kept(revision: revision, length: record.length, record: record, holder: holder!,
                                        hashedToRecord: fed)
        } catch let error as Errno {
            throw .system("repair the revisions of \(name)", error)
        } catch let error as DocumentError {
            throw error
        } catch {
            throw .io(operation: "repair the revisions of \(name)", message: "\(error)")
        }
    }

    static func milliseconds(_ stat: Stat) -> Int64 {
        Int64(stat.rawValue.st_mtim.tv_sec) * 1000 + Int64(stat.rawValue.st_mtim.tv_nsec) / 1_000_000
    }

    /// What a save's body made: how its bytes were hashed, and the new revision's page count.
    struct Written {
        enum Hashing {
            /// Every byte of the file went through the hasher.
            case fed
            /// The bytes are an earlier revision's, whose hash and state are known.
            case known(String, SHA256Midstate)
            /// Not hashed: the file is read back and hashed whole.
            case none
        }

        var hashing: Hashing
        var pageCount: Int
    }

    /// The atomic save: `body` writes the new version into a temporary file in the document's
    /// history (and says how it hashed it). With `extending`, the new file begins with that
    /// record's bytes (the current file's) and the hasher given to `body` has hashed them
    /// already: from the record's state and the few bytes after its last whole block, so a save
    /// hashes its increment and not the document. The file is flushed, locked, kept as
    /// `revision` (a link and its record), and only then renamed over the document, so the
    /// current file always has its entry and a reader always finds its number; what the new
    /// file makes unneeded (the file it extends, revisions past `keepRevisions`) is pruned last.
    /// Killed at any point, the document is its old version or its new one, an acknowledged save
    /// is on disk, and the next writer's repair clears what was left. With `madeBy`, its mark is
    /// kept with the entry, in the same flush. Returns the new revision's summary.
    func save(_ name: String, _ history: RevisionHistory, as revision: Int,
              extending base: (record: RevisionHistory.Record, file: FileDescriptor)?, madeBy: String?, alreadyHashed: Int64 = 0,
              _ body: (FileDescriptor, inout SHA256Hasher, inout SaveCost) throws(DocumentError) -> Written) throws(DocumentError) -> DocumentSummary {
        let temporary = RevisionHistory.temporaryPrefix + "\(getpid()).\(UInt32.random(in: 0...UInt32.max))"
        let entry = history.entryName(revision, line: base?.record.line ?? revision)
        let out: FileDescriptor
        do {
            out = try history.directory.create(temporary, readable: true)
        } catch {
            throw .system("create a new revision of \(name)", error)
        }
        // Closing releases the lock taken below, once the file is in place and kept.
        defer { try? out.close() }
        var renamed = false, linked = false
        var mark: RevisionHistory.Mark?
        var record: RevisionHistory.Record?
        var cost = SaveCost()
        do {
            // Locked before it becomes the document, so the next writer waits for this one.
            try FileLock.lock(out)
            var hasher: SHA256Hasher
            if let base {
                hasher = SHA256Hasher(resuming: base.record.midstate)
                do {
                    try hasher.feed(base.file, from: base.record.midstate.length, to: base.record.length)
                } catch {
                    throw DocumentError.system("read the end of revision \(revision - 1) of \(name)", error)
                }
            } else {
                hasher = SHA256Hasher()
            }
            var clock = ContinuousClock.now
            let written = try body(out, &hasher, &cost)
            cost.writing = ContinuousClock.now - clock
            clock = ContinuousClock.now
            do {
                try Directory.check { fsync(out.rawValue) }
            } catch {
                throw DocumentError.system("flush the new revision of \(name)", error)
            }
            cost.flushing = ContinuousClock.now - clock
            let stat = try Errno.rethrowing { try out.stat() }
            let sha256: String, midstate: SHA256Midstate
            switch written.hashing {
            case .fed:
                cost.bytesHashed = hasher.bytesFed
                midstate = hasher.midstate
                sha256 = hasher.finish()
            case .known(let known, let state):
                (sha256, midstate) = (known, state)
            case .none:
                var whole = SHA256Hasher()
                try whole.feed(out, from: 0, to: stat.size)
                cost.bytesHashed = whole.bytesFed
                midstate = whole.midstate
                sha256 = whole.finish()
            }
            clock = ContinuousClock.now
            var now = timespec()
            clock_gettime(CLOCK_REALTIME, &now)
            record = RevisionHistory.Record(revision: revision, line: base?.record.line ?? revision, length: stat.size,
                                            saved: Int64(now.tv_sec) * 1000 + Int64(now.tv_nsec) / 1_000_000, sha256: sha256, midstate: midstate)
            do {
                try history.leave(record!.name)
                try history.directory.link(temporary, to: history.directory, as: entry)
                linked = true
                if let madeBy {
                    mark = RevisionHistory.Mark(revision: revision, key: madeBy, pageCount: written.pageCount, sha256: sha256)
                    try history.leave(mark!.name)
                }
                try history.directory.sync()
            } catch {
                throw DocumentError.system("keep revision \(revision) of \(name)", error)
            }
            try history.commitFence?(name)
            do {
                try history.directory.rename(temporary, to: root, as: name)
                renamed = true
                try root.sync()
            } catch {
                throw DocumentError.system("replace \(name)", error)
            }
            prune(history, current: stat.identity)
            cost.keeping = ContinuousClock.now - clock
            cost.bytesHashed += alreadyHashed
            costs.set(cost)
            return DocumentSummary(name: name, revision: revision, pageCount: written.pageCount, sha256: sha256)
        } catch {
            if !renamed {
                try? history.directory.remove(temporary)
                if linked { try? history.directory.remove(entry) }
                if let record { try? history.directory.remove(record.name) }
                if let mark { try? history.directory.remove(mark.name) }
            }
            switch error {
            case let error as DocumentError: throw error
            case let error as Errno: throw .system("save \(name)", error)
            default: throw .io(operation: "save \(name)", message: "\(error)")
            }
        }
    }

    /// Removes the revisions past what `keepRevisions` keeps, then every file no kept revision
    /// needs (the file a save extended, now the beginning of the new one; a line none of whose
    /// revisions is kept). Never the current file. The save has already happened: a failure
    /// here is mended by the next save's pruning, so it is not reported.
    func prune(_ history: RevisionHistory, current: FileIdentity) {
        guard let listing = try? history.listing() else { return }
        let victims = RevisionHistory.prunable(listing.kept, keep: keepRevisions)
        let pruned = Set(victims.map(\.revision))
        for file in RevisionHistory.unneededFiles(listing, dropping: pruned) where file.stat.identity != current {
            try? history.directory.remove(file.name)
        }
        for victim in victims {
            if let record = victim.record { try? history.directory.remove(record.name) }
        }
        // A mark outlives no entry: its request can only be answered from a kept revision.
        for mark in listing.marks where pruned.contains(mark.revision) {
            try? history.directory.remove(mark.name)
        }
    }

    func write(_ out: FileDescriptor, _ bytes: [UInt8], _ hasher: inout SHA256Hasher, _ cost: inout SaveCost) throws(DocumentError) {
        do {
            _ = try Errno.rethrowing { try out.writeAll(bytes) }
        } catch {
            throw .system("write", error)
        }
        hasher.update(bytes)
        cost.bytesWritten += Int64(bytes.count)
    }

    /// Copies the file from `offset` on to `out` in pieces, hashing them, so memory stays flat
    /// however large (for bytes that must be hashed anyway: a new line's).
    func copy(_ source: FileDescriptor, from offset: Int64, to out: FileDescriptor, _ hasher: inout SHA256Hasher,
              _ cost: inout SaveCost) throws(DocumentError) {
        try source.forEachPiece(from: offset, reading: "read") { (piece) throws(DocumentError) in
            do throws(Errno) {
                _ = try Errno.rethrowing { try out.writeAll(piece) }
            } catch {
                throw .system("write", error)
            }
            piece.withUnsafeBytes { hasher.update($0) }
            cost.bytesCopied += Int64(piece.count)
            cost.method = .readWrite
        }
    }

    /// The page count of a new revision's file, read before it becomes the document.
    func pageCount(_ name: String, _ file: FileDescriptor) throws(DocumentError) -> Int {
        var offset: Int64 = 0
        if Self.kind(name) == "yianazip" {
            do {
                offset = try YianaContainer.readHeader(file).pdfOffset
            } catch {
                throw .unreadable(name: name, reason: "damaged", message: error.description)
            }
        }
        do {
            return try PDFFile(file: file, name: name, offset: offset, budget: readBudget).pageCount
        } catch {
            throw unreadable(name, error)
        }
    }

    private func documentError(_ name: String, _ place: PDFLocation, _ page: Int, _ error: FlattenError) -> DocumentError {
        switch error {
        case .pdf(let pdfError) where pdfError.kind == .pageOutOfRange:
            let count = (try? place.open().pageCount) ?? 0
            return .pageOutOfRange(name: name, page: page, pageCount: count)
        case .pdf(let pdfError): return unreadable(name, pdfError)
        case .render(let message): return .io(operation: "flatten \(name)", message: message)
        case .storedDrawing(let message): return .unreadable(name: name, reason: "damaged", message: "the ink stored on page \(page): \(message)")
        case .tooMuchInk(let stored, let adding, let limit):
            return .inkLimit(name: name, page: page, stored: stored, adding: adding, limit: limit)
        }
    }

    /// At start-up, repairs each document that no writer holds (one that is being written, by
    /// this process or another, is left to its writer).
    private func repairIdleDocuments() {
        for name in (try? revisionsRoot.names()) ?? [] where (try? Self.check(name)) != nil {
            guard let opening = try? openDocument(name), (try? FileLock.tryLock(opening.descriptor)) == true,
                  (try? root.stat(name))?.identity == opening.stat.identity,
                  // As it is under the lock (see lockCurrent).
                  let locked = try? opening.descriptor.stat() else { continue }
            let file = OpenFile(opening.takeDescriptor(), locked)
            guard let opened = try? history(name, create: false),
                  let history = try? endForeignHistory(name, file, opened) else { continue }
            _ = try? repair(name, file, history, migrate: false)
        }
    }
}

/// The cost of the last save, set by the saving thread and read by a benchmark.
final class LastSaveCost: @unchecked Sendable {
    // @unchecked: `cost` is only touched under `lock`.
    private let lock = NSLock()
    private var cost = SaveCost()
    var value: SaveCost { lock.withLock { cost } }
    func set(_ new: SaveCost) { lock.withLock { cost = new } }
}

/// Closes files off the request's path: the last close of a large unlinked file frees its
/// blocks and its page cache, which takes time proportional to its size.
enum FileRelease {
    private static let queue = DispatchQueue(label: "canvas-bridge.document-release", qos: .utility)

    /// Unlocks `file` now (the next writer need not wait), and closes it on a background queue.
    static func later(_ file: DocumentStore.OpenFile) {
        FileLock.unlock(file.descriptor)
        let handed = Handed(file)
        queue.async { handed.drop() }
    }

    /// @unchecked Sendable: the file is handed over whole; nobody else touches it afterwards.
    private final class Handed: @unchecked Sendable {
        private var file: DocumentStore.OpenFile?
        init(_ file: DocumentStore.OpenFile) { self.file = file }
        func drop() { file = nil }
    }
}
