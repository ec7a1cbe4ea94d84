import CanvasCore
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
///   document (or, in `SaveMode.append`, the update is appended to it in place, behind an intent
///   in the history's log). The history in `.canvas-revisions/<name>/` keeps the revisions'
///   bytes in files of its own, each line of revisions one file and each revision a length of
///   it, and every fact about them in one log (see `RevisionHistory`, `HistoryLog`): N saves that
///   append cost the increments, not N copies, and nothing done to the document's file reaches
///   a kept revision.
/// - One writer per document, across processes: a writer holds the history's lock file.
/// - Readers take no lock: they open the current file and name its revision by its identity,
///   which the log recorded. A file the log has not seen (another program changed it) is made
///   the next revision by whoever next holds the lock, a reader included (see `settle`).
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
    let hashes = ContentHashes()
    /// What this process has seen the bytes of files hash to (`VouchedBytes`): a record of the
    /// history is believed only as far as that.
    let vouched = VouchedBytes()
    let histories = HistoryCache()
    /// The logs as writers last read them (`HistoryCache.writing`), apart from the readers':
    /// a writer checks every byte it read before by its chain, a reader takes what it read
    /// before as it was, and what writers read must not become what readers take on trust.
    let writtenHistories = HistoryCache()
    let settledFolders = SettledFolders()
    private let costs = LastSaveCost()
    /// Where failures of work nobody waits on are told.
    let housekeeping: Housekeeping

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
                saveMode: SaveMode = .replace, housekeeping: Housekeeping = Housekeeping()) throws(DocumentError) {
        self.saveMode = saveMode
        self.housekeeping = housekeeping
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
            _ = try root.directory(Self.revisionsFolderName, create: true)
        } catch {
            throw .system("open \(self.folder.path)/\(Self.revisionsFolderName)", error)
        }
        settleLeftovers()
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

    func location(_ name: String, _ file: OpenFile) throws(DocumentError) -> (PDFLocation, YianaContainer.Header?) {
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
        case .tooLarge: return .unreadable(name: name, reason: "tooLarge", message: error.message)
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

    /// The page's size and its canvas ink, edit by edit, as `canvas.open` reopens it.
    /// With `otherInk`, other programs' /Ink annotations are among the page's edits.
    public func pageInk(_ name: String, _ index: Int, otherInk: Bool = false) throws(DocumentError) -> (page: PageSummary, ink: PageInk) {
        let pdf = try pdf(name, try openDocument(name))
        guard index >= 0 && index < pdf.pageCount else { throw .pageOutOfRange(name: name, page: index, pageCount: pdf.pageCount) }
        do {
            let page = try pdf.page(index)
            return (PageSummary(width: page.width, height: page.height, rotation: page.rotation), PageInk(edits: try Flattener.edits(of: pdf, page: index, maxPagePoints: maxInkPointsPerPage, otherInk: otherInk)))
        } catch let error as PDFError {
            throw unreadable(name, error)
        } catch let error as FlattenError {
            throw documentError(name, PDFLocation(path: name), index, error)
        } catch {
            throw .unreadable(name: name, reason: "damaged", message: "the ink stored on page \(index): \(error)")
        }
    }

    /// Throws `inkChanged` unless every edit `digests` names (`PageInk.Edit.digest`) is still
    /// on the page.
    public func checkInk(_ name: String, _ index: Int, still digests: [String]) throws(DocumentError) {
        let ink = try pageInk(name, index, otherInk: true).ink
        do throws(FlattenError) {
            _ = try Flattener.replaced(digests, among: ink.edits, page: index)
        } catch {
            throw .inkChanged(name: name, page: index)
        }
    }

    static func modified(_ stat: Stat) -> Date {
        let time = stat.rawValue.st_mtim
        return Date(timeIntervalSince1970: Double(time.tv_sec) + Double(time.tv_nsec) / 1e9)
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

    func documentError(_ name: String, _ place: PDFLocation, _ page: Int, _ error: FlattenError) -> DocumentError {
        switch error {
        case .pdf(let pdfError) where pdfError.kind == .pageOutOfRange:
            let count = (try? place.open().pageCount) ?? 0
            return .pageOutOfRange(name: name, page: page, pageCount: count)
        case .pdf(let pdfError): return unreadable(name, pdfError)
        case .render(let message): return .io(operation: "flatten \(name)", message: message)
        case .storedDrawing(let message): return .unreadable(name: name, reason: "damaged", message: "the ink stored on page \(page): \(message)")
        case .tooMuchInk(let stored, let adding, let limit):
            return .inkLimit(name: name, page: page, stored: stored, adding: adding, limit: limit)
        case .inkChanged(let page): return .inkChanged(name: name, page: page)
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

    /// Closes `file` on a background queue.
    static func later(_ file: DocumentStore.OpenFile) {
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
