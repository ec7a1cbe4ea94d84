public import CanvasCore
public import CanvasProtocol
public import Foundation
import PDFSurgery
#if canImport(Glibc)
import Glibc
#endif

/// Why a document operation failed. Each case says what a client did wrong or what went wrong
/// underneath, with the native cause.
public enum DocumentError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The name is not a plain `.pdf` or `.yianazip` file name inside the folder.
    case invalidName(String, reason: String)
    case notFound(String)
    case pageOutOfRange(name: String, page: Int, pageCount: Int)
    case revisionNotFound(name: String, revision: Int)
    /// `expectedRevision` is not the current one: someone else saved first.
    case conflict(name: String, expected: Int, current: Int)
    /// The file is damaged or encrypted, or its container is malformed.
    case unreadable(name: String, reason: String, message: String)
    /// A write or file-system call failed: the operation, the cause's text, and the errno when
    /// a system call gave one (0 otherwise).
    case io(operation: String, message: String, code: Int32 = 0)

    /// A failed system call: `code` is its errno.
    static func system(_ operation: String, _ code: Int32 = errno) -> DocumentError {
        .io(operation: operation, message: String(cString: strerror(code)), code: code)
    }

    public var description: String {
        switch self {
        case .invalidName(let name, let reason): return "\(name.debugDescription) is not a document name: \(reason)"
        case .notFound(let name): return "no document \(name.debugDescription)"
        case .pageOutOfRange(let name, let page, let count):
            return "\(name) has \(count) pages (numbered from 0); there is no page \(page)"
        case .revisionNotFound(let name, let revision): return "\(name) has no revision \(revision) (pruned or never made)"
        case .conflict(let name, let expected, let current):
            return "\(name) is at revision \(current), not \(expected): it was saved since"
        case .unreadable(let name, _, let message): return "\(name) cannot be read: \(message)"
        case .io(let operation, let message, _): return "\(operation): \(message)"
        }
    }

    /// A write that failed for want of room (a full disk, a quota, a file-size limit): the
    /// client can try again once space is made, so it is not an internal fault.
    public var isOutOfSpace: Bool {
        guard case .io(_, _, let code) = self else { return false }
        return [ENOSPC, EDQUOT, EFBIG].contains(code)
    }
}

public struct PageSummary: Sendable, Equatable {
    public let width: Double
    public let height: Double
    public let rotation: Int
}

public struct DocumentInfo: Sendable {
    public let summary: DocumentSummary
    public let pages: [PageSummary]
    /// A .yianazip document's metadata; nil for a .pdf.
    public let metadata: [String: JSONValue]?
}

public struct DocumentSummary: Sendable, Equatable {
    public let name: String
    public let revision: Int
    public let pageCount: Int
}

public struct RevisionSummary: Sendable, Equatable {
    public let revision: Int
    public let bytes: Int64
    public let modified: Date
    public let current: Bool
}

/// The document folder: every `.pdf` and `.yianazip` file in it is a document named by its file
/// name. Saves are atomic (a new file, flushed, renamed over the old one), each save keeps the
/// previous version as a revision in `.canvas-revisions/`, and one writer at a time works on a
/// document (an exclusive lock file, which also holds off other processes).
///
/// Sendable: its state is fixed at init. Concurrent use is safe because a writer holds the
/// document's lock for the whole save and readers only ever see whole files (a save renames a
/// finished file into place); the service runs its saves on one queue beside its loop.
public final class DocumentStore: Sendable {
    public let folder: URL
    /// Revisions kept per document, the current one included; never fewer than 2 (the original
    /// and the latest).
    public let keepRevisions: Int
    private let revisionsFolder: URL

    public static let extensions = ["pdf", "yianazip"]

    public init(folder: URL, keepRevisions: Int = 20) throws(DocumentError) {
        self.folder = folder.standardizedFileURL.resolvingSymlinksInPath()
        self.keepRevisions = max(2, keepRevisions)
        revisionsFolder = self.folder.appendingPathComponent(".canvas-revisions")
        do {
            try FileManager.default.createDirectory(at: revisionsFolder, withIntermediateDirectories: true)
        } catch {
            throw .io(operation: "create \(revisionsFolder.path)", message: "\(error)")
        }
        removeAbandonedTemporaries()
    }

    // MARK: Names

    /// The file of a document, refusing anything that is not a plain name of a file inside
    /// the folder (no separators, no `..`, no hidden files, no link that leads out).
    func file(_ name: String, mustExist: Bool = true) throws(DocumentError) -> URL {
        guard !name.isEmpty, name.utf8.count <= 255 else { throw .invalidName(name, reason: "empty or longer than 255 bytes") }
        guard !name.contains("/"), !name.contains("\0"), !name.contains("\\") else {
            throw .invalidName(name, reason: "it must be a file name, without a path")
        }
        guard !name.hasPrefix(".") else { throw .invalidName(name, reason: "hidden names are not documents") }
        let ext = (name as NSString).pathExtension.lowercased()
        guard Self.extensions.contains(ext) else { throw .invalidName(name, reason: "documents end in .pdf or .yianazip") }
        let url = folder.appendingPathComponent(name)
        guard FileManager.default.fileExists(atPath: url.path) else {
            if mustExist { throw .notFound(name) }
            return url
        }
        let real = url.resolvingSymlinksInPath().standardizedFileURL.path
        guard real.hasPrefix(folder.path + "/"), !real.dropFirst(folder.path.count + 1).contains("/") else {
            throw .invalidName(name, reason: "it is a link that leads out of the document folder")
        }
        return url
    }

    private func kind(_ name: String) -> String { (name as NSString).pathExtension.lowercased() }

    // MARK: Reading

    /// Every document in the folder; one that cannot be read is listed with the reason.
    public func list() -> [(name: String, summary: Result<DocumentSummary, DocumentError>)] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? []
        return names.sorted().compactMap { name in
            guard (try? file(name)) != nil else { return nil }
            do throws(DocumentError) {
                return (name, .success(try summary(name)))
            } catch {
                return (name, .failure(error))
            }
        }
    }

    public func summary(_ name: String) throws(DocumentError) -> DocumentSummary {
        let url = try file(name)
        let pdf = try open(name, url)
        return DocumentSummary(name: name, revision: currentRevision(name, url), pageCount: pdf.pageCount)
    }

    /// Everything `document.info` reports, from one read of the file.
    public func info(_ name: String) throws(DocumentError) -> DocumentInfo {
        let url = try file(name)
        let container = kind(name) == "yianazip" ? try header(name, url) : nil
        let pdf: PDFFile
        do {
            pdf = try PDFFile(path: url.path, offset: container?.pdfOffset ?? 0)
        } catch {
            throw unreadable(name, error)
        }
        var pages: [PageSummary] = []
        for index in 0..<pdf.pageCount {
            do {
                let page = try pdf.page(index)
                pages.append(PageSummary(width: page.width, height: page.height, rotation: page.rotation))
            } catch {
                throw unreadable(name, error)
            }
        }
        return DocumentInfo(summary: DocumentSummary(name: name, revision: currentRevision(name, url), pageCount: pdf.pageCount),
                            pages: pages, metadata: container?.metadata)
    }

    /// One page's display geometry.
    public func page(_ name: String, _ index: Int) throws(DocumentError) -> PageSummary {
        let pdf = try open(name, try file(name))
        guard index >= 0 && index < pdf.pageCount else { throw .pageOutOfRange(name: name, page: index, pageCount: pdf.pageCount) }
        do {
            let page = try pdf.page(index)
            return PageSummary(width: page.width, height: page.height, rotation: page.rotation)
        } catch {
            throw unreadable(name, error)
        }
    }

    private func header(_ name: String, _ url: URL) throws(DocumentError) -> YianaContainer.Header {
        do {
            let handle = try FileHandle(forReadingFrom: url)
            defer { try? handle.close() }
            return try YianaContainer.readHeader(handle)
        } catch let error as YianaContainer.ContainerError {
            throw .unreadable(name: name, reason: "damaged", message: error.description)
        } catch {
            throw .io(operation: "read \(url.path)", message: "\(error)")
        }
    }

    private func location(_ name: String, _ url: URL) throws(DocumentError) -> PDFLocation {
        PDFLocation(path: url.path, offset: kind(name) == "yianazip" ? try header(name, url).pdfOffset : 0)
    }

    private func open(_ name: String, _ url: URL) throws(DocumentError) -> PDFFile {
        let place = try location(name, url)
        do {
            return try PDFFile(path: place.path, offset: place.offset)
        } catch {
            throw unreadable(name, error)
        }
    }

    private func unreadable(_ name: String, _ error: PDFError) -> DocumentError {
        switch error.kind {
        case .encrypted: return .unreadable(name: name, reason: "encrypted", message: error.message)
        case .damaged: return .unreadable(name: name, reason: "damaged", message: error.message)
        default: return .io(operation: error.operation, message: error.message)
        }
    }

    // MARK: Revisions

    private func archive(_ name: String) -> URL { revisionsFolder.appendingPathComponent(name) }

    private func archived(_ name: String) -> [(revision: Int, url: URL)] {
        let folder = archive(name)
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? []
        return entries.compactMap { entry in
            guard let number = Int((entry as NSString).deletingPathExtension), number > 0 else { return nil }
            return (number, folder.appendingPathComponent(entry))
        }.sorted { $0.revision < $1.revision }
    }

    private func inode(_ url: URL) -> (UInt64, UInt64)? {
        var info = stat()
        guard stat(url.path, &info) == 0 else { return nil }
        return (UInt64(info.st_dev), UInt64(info.st_ino))
    }

    /// The current revision: one past the newest archived one. An archived entry that is the
    /// current file itself (a save killed between archiving and renaming) is left over and goes.
    public func currentRevision(_ name: String, _ url: URL) -> Int {
        var kept = archived(name)
        if let last = kept.last, let a = inode(last.url), let b = inode(url), a == b {
            try? FileManager.default.removeItem(at: last.url)
            kept.removeLast()
        }
        return (kept.last?.revision ?? 0) + 1
    }

    public func revisions(_ name: String) throws(DocumentError) -> [RevisionSummary] {
        let url = try file(name)
        let current = currentRevision(name, url)
        var result = archived(name).map { entry in
            let attributes = try? FileManager.default.attributesOfItem(atPath: entry.url.path)
            return RevisionSummary(revision: entry.revision, bytes: (attributes?[.size] as? NSNumber)?.int64Value ?? 0,
                                   modified: attributes?[.modificationDate] as? Date ?? Date(timeIntervalSince1970: 0), current: false)
        }
        let attributes = try? FileManager.default.attributesOfItem(atPath: url.path)
        result.append(RevisionSummary(revision: current, bytes: (attributes?[.size] as? NSNumber)?.int64Value ?? 0,
                                      modified: attributes?[.modificationDate] as? Date ?? Date(), current: true))
        return result
    }

    // MARK: Writing

    /// Puts `drawing` on `page`, as a new revision. Returns the new summary.
    public func flatten(_ name: String, page: Int, drawing: Drawing, expectedRevision: Int? = nil) throws(DocumentError) -> DocumentSummary {
        let url = try file(name)
        return try withLock(name) { () throws(DocumentError) -> DocumentSummary in
            let current = currentRevision(name, url)
            if let expectedRevision, expectedRevision != current {
                throw .conflict(name: name, expected: expectedRevision, current: current)
            }
            // A container's header is read once: it gives both where the PDF starts and the
            // metadata the save updates.
            let container = kind(name) == "yianazip" ? try header(name, url) : nil
            let place = PDFLocation(path: url.path, offset: container?.pdfOffset ?? 0)
            let prepared: Flattener.Prepared
            do throws(FlattenError) {
                prepared = try Flattener.prepare(place, page: page, adding: drawing)
            } catch {
                throw documentError(name, place, page, error)
            }
            var head: [UInt8] = []
            if let container {
                let metadata = YianaContainer.updated(container.metadata, pageCount: prepared.pageCount, now: Date())
                head = JSONCodec.serialize(.object(metadata)) + YianaContainer.separator
            }
            if prepared.needsRewrite {
                try save(name, url, current: current, head: head) { (fd) throws(DocumentError) in
                    do throws(FlattenError) {
                        try prepared.rewrite(to: fd)
                    } catch {
                        throw documentError(name, place, page, error)
                    }
                }
            } else {
                let increment: [UInt8]
                do throws(FlattenError) {
                    increment = try prepared.increment()
                } catch {
                    throw documentError(name, place, page, error)
                }
                try save(name, url, current: current, head: head) { (fd) throws(DocumentError) in
                    try copy(place, to: fd)
                    try writeAll(fd, increment)
                }
            }
            return DocumentSummary(name: name, revision: current + 1, pageCount: prepared.pageCount)
        }
    }

    /// Makes an earlier revision the current one again, as a new revision (history only grows).
    public func restore(_ name: String, revision: Int, expectedRevision: Int? = nil) throws(DocumentError) -> DocumentSummary {
        let url = try file(name)
        return try withLock(name) { () throws(DocumentError) -> DocumentSummary in
            let current = currentRevision(name, url)
            if let expectedRevision, expectedRevision != current {
                throw .conflict(name: name, expected: expectedRevision, current: current)
            }
            guard let source = archived(name).first(where: { $0.revision == revision }) else {
                throw .revisionNotFound(name: name, revision: revision)
            }
            try save(name, url, current: current, head: []) { (fd) throws(DocumentError) in
                try copy(PDFLocation(path: source.url.path), to: fd)
            }
            return try DocumentSummary(name: name, revision: current + 1, pageCount: open(name, url).pageCount)
        }
    }

    /// The atomic save: write the new version beside the folder's files, flush it, keep the
    /// current file as revision `current` (a hard link, so nothing is copied), rename the new
    /// version over the document, flush the folder. Killed at any point, the document is its
    /// old version or its new one, and an acknowledged save is on disk.
    private func save(_ name: String, _ url: URL, current: Int, head: [UInt8],
                      body: (Int32) throws(DocumentError) -> Void) throws(DocumentError) {
        let temporary = revisionsFolder.appendingPathComponent(".tmp-\(UUID().uuidString)-\(name)")
        do {
            try write(temporary, head: head, body: body)
        } catch {
            unlink(temporary.path)
            throw error
        }
        let folder = archive(name)
        do {
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        } catch {
            unlink(temporary.path)
            throw .io(operation: "create \(folder.path)", message: "\(error)")
        }
        let kept = folder.appendingPathComponent("\(current).\(kind(name))")
        unlink(kept.path)
        guard link(url.path, kept.path) == 0 else {
            let failure = DocumentError.system("keep revision \(current) of \(name)")
            unlink(temporary.path)
            throw failure
        }
        syncDirectory(folder)
        guard rename(temporary.path, url.path) == 0 else {
            let failure = DocumentError.system("replace \(name)")
            unlink(kept.path)
            unlink(temporary.path)
            throw failure
        }
        syncDirectory(self.folder)
        prune(name)
    }

    private func write(_ destination: URL, head: [UInt8], body: (Int32) throws(DocumentError) -> Void) throws(DocumentError) {
        let out = Glibc.open(destination.path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
        guard out >= 0 else { throw .system("create \(destination.path)") }
        defer { close(out) }
        try writeAll(out, head)
        try body(out)
        guard fsync(out) == 0 else { throw .system("flush \(destination.path)") }
    }

    private func writeAll(_ fd: Int32, _ bytes: [UInt8]) throws(DocumentError) {
        if let code = bytes.withUnsafeBytes({ Self.writeAll(fd, $0) }) { throw .system("write", code) }
    }

    /// Writes every byte, or returns the errno that stopped it.
    private static func writeAll(_ fd: Int32, _ bytes: UnsafeRawBufferPointer) -> Int32? {
        var done = 0
        while done < bytes.count {
            let n = Glibc.write(fd, bytes.baseAddress! + done, bytes.count - done)
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { return errno }
            done += n
        }
        return nil
    }

    /// Copies the PDF at `source` to `fd` in pieces, so memory stays flat however large it is.
    private func copy(_ source: PDFLocation, to fd: Int32) throws(DocumentError) {
        let input = Glibc.open(source.path, O_RDONLY | O_CLOEXEC)
        guard input >= 0 else { throw .system("open \(source.path)") }
        defer { close(input) }
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        var offset = off_t(source.offset)
        while true {
            let n = buffer.withUnsafeMutableBytes { pread(input, $0.baseAddress, $0.count, offset) }
            if n < 0 && errno == EINTR { continue }
            guard n >= 0 else { throw .system("read \(source.path)") }
            if n == 0 { break }
            if let code = buffer.withUnsafeBytes({ Self.writeAll(fd, UnsafeRawBufferPointer(rebasing: $0[0..<n])) }) {
                throw .system("write", code)
            }
            offset += off_t(n)
        }
    }

    private func documentError(_ name: String, _ place: PDFLocation, _ page: Int, _ error: FlattenError) -> DocumentError {
        switch error {
        case .pdf(let pdfError) where pdfError.kind == .pageOutOfRange:
            let count = (try? PDFFile(path: place.path, offset: place.offset).pageCount) ?? 0
            return .pageOutOfRange(name: name, page: page, pageCount: count)
        case .pdf(let pdfError): return unreadable(name, pdfError)
        case .render(let message), .storedDrawing(let message): return .io(operation: "flatten \(name)", message: message)
        }
    }

    private func syncDirectory(_ url: URL) {
        let fd = Glibc.open(url.path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { return }
        fsync(fd)
        close(fd)
    }

    /// Keeps the original (revision 1) and the newest archived ones, so that with the current
    /// file there are `keepRevisions` in all.
    private func prune(_ name: String) {
        let entries = archived(name)
        let room = keepRevisions - 1   // the current file is one
        guard entries.count > room else { return }
        let newest = entries.suffix(room - 1)
        for entry in entries.dropFirst() where !newest.contains(where: { $0.revision == entry.revision }) {
            try? FileManager.default.removeItem(at: entry.url)
        }
    }

    private func withLock<T>(_ name: String, _ body: () throws(DocumentError) -> T) throws(DocumentError) -> T {
        let lockPath = revisionsFolder.appendingPathComponent(".\(name).lock").path
        let fd = Glibc.open(lockPath, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw .system("open \(lockPath)") }
        defer { close(fd) }
        guard flock(fd, LOCK_EX) == 0 else { throw .system("lock \(name)") }
        defer { flock(fd, LOCK_UN) }
        return try body()
    }

    private func removeAbandonedTemporaries() {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: revisionsFolder.path)) ?? []
        for entry in entries where entry.hasPrefix(".tmp-") {
            try? FileManager.default.removeItem(at: revisionsFolder.appendingPathComponent(entry))
        }
    }
}
