import Glibc
import PDFSurgery
import SystemPackage

extension DocumentStore {
    /// Checks an uploaded file as the store would read it, before anything is written: a
    /// `.yianazip` needs its metadata header, the PDF must open without repair (qpdf repairing
    /// it means it is damaged) and unencrypted, and every page must have a geometry. Returns
    /// the page count. The bytes are read from the upload's own temporary file (never in the
    /// document folder), so a refused upload never touches the folder. A refusal is `.refused`
    /// with its reason (`empty`, `container`, `notPDF`, `encrypted`, `damaged`,
    /// `damagedOrEncrypted`, or `timeout`: a read that ran past `readBudget` says nothing about
    /// the file's health, only that this server cannot read it in time, as it could not each
    /// time the document was opened); a check the machine could not make (the file unreadable)
    /// is `.io`, the server's fault and not the upload's.
    public func check(upload spool: UploadSpool, as name: String) throws(DocumentError) -> Int {
        func refuse(_ reason: String, _ message: String) -> DocumentError { .refused(name: name, reason: reason, message: message) }
        func unread(_ error: PDFError, _ what: String, otherwise reason: String) -> DocumentError {
            error.kind == .timeout
                ? refuse("timeout", "the PDF was not read in the time a read of a document has: \(error.message)")
                : refuse(reason, "\(what): \(error.message)")
        }
        guard try spool.size() > 0 else { throw refuse("empty", "the upload is empty") }
        let file = spool.file
        var offset: Int64 = 0
        if Self.kind(name) == "yianazip" {
            do {
                offset = try YianaContainer.readHeader(file).pdfOffset
            } catch {
                throw refuse("container", "not a .yianazip container: \(error)")
            }
        }
        guard try spool.bytes(at: offset, count: 5) == Array("%PDF-".utf8) else {
            throw refuse("notPDF", "the upload is not a PDF (it does not start with %PDF-)")
        }
        let pdf: PDFFile
        do throws(PDFError) {
            pdf = try PDFFile(file: file, name: name, offset: offset, budget: readBudget)
        } catch {
            throw unread(error, "the PDF cannot be read", otherwise: error.kind == .encrypted ? "encrypted" : "damaged")
        }
        guard !pdf.needsRewrite else {
            throw refuse("damagedOrEncrypted", "the PDF is encrypted, or damaged so that it opens only after repair; upload an intact, unencrypted file")
        }
        guard pdf.pageCount > 0 else { throw refuse("damaged", "the PDF has no pages") }
        for index in 0..<pdf.pageCount {
            do throws(PDFError) {
                _ = try pdf.page(index)
            } catch {
                throw unread(error, "page \(index) cannot be read", otherwise: "damaged")
            }
        }
        return pdf.pageCount
    }

    /// Throws `alreadyExists` when anything (a document, a link, a directory) has `name`: an
    /// upload of a new document asks before its bytes are sent, and again when it is linked in.
    public func requireFree(_ name: String) throws(DocumentError) {
        if (try? root.stat(name)) != nil { throw .alreadyExists(name: name) }
    }

    /// Throws `notFound` when `name` is not a document, and `conflict` when it is not at
    /// `expectedRevision`: an upload of a next revision asks before its bytes are sent, and
    /// again, under the document's lock, when it is stored. Reads no content of a document the
    /// history has seen as it is (an open, a stat and the history's log); one another program
    /// changed is settled first (see `reading`).
    public func require(_ name: String, at expectedRevision: Int) throws(DocumentError) {
        let (_, revision, _, _) = try reading(name, hashing: false) { (_) throws(DocumentError) in () }
        if revision != expectedRevision { throw .conflict(name: name, expected: expectedRevision, current: revision) }
    }

    /// Stores checked bytes: as the next revision of `name` when `expectedRevision` is given
    /// (the same atomic save as a flatten, under the document's lock), or as a new document,
    /// which must not exist yet (written aside, flushed, then linked under its name in one step
    /// that fails if the name was taken meanwhile). A name whose document was deleted from the
    /// folder still has its history: the upload continues it, as its next revision.
    public func store(upload spool: UploadSpool, as name: String, expectedRevision: Int?) throws(DocumentError) -> DocumentSummary {
        try Self.check(name)
        func saveUpload(_ current: OpenFile?, _ writer: HistoryWriter) throws(DocumentError) -> DocumentSummary {
            // Its pages are counted once it is the document (the caller's check counted them
            // in a copy); no key is kept with it, so the count the save is given is not kept.
            let saved = try save(name, writer, replacing: current, extending: nil, madeBy: nil, source: "upload") { (out, hasher, cost) throws(DocumentError) in
                try copy(spool.file, from: 0, to: out, &hasher, &cost)
                return Written(hashing: .fed, pageCount: 0)
            }
            let pages = try pdf(name, try openDocument(name)).pageCount
            return DocumentSummary(name: name, revision: saved.revision, pageCount: pages, sha256: saved.sha256, savedAt: saved.savedAt)
        }
        if let expectedRevision {
            return try writing(name, expectedRevision: expectedRevision) { (current, writer, _) throws(DocumentError) in
                try saveUpload(current, writer)
            }
        }
        try requireFree(name)
        if try history(name, create: false) != nil {
            return try writing(name, expectedRevision: nil, allowingNone: true) { (current, writer, _) throws(DocumentError) in
                guard current == nil else { throw .alreadyExists(name: name) }
                return try saveUpload(nil, writer)
            }
        }
        let temporary = Self.uploadPrefix + "\(getpid()).\(UInt32.random(in: 0...UInt32.max))"
        let out: FileDescriptor
        do {
            out = try root.create(temporary)
        } catch {
            throw .system("create \(name)", error)
        }
        defer {
            try? out.close()
            try? root.remove(temporary)
        }
        var hasher = SHA256Hasher()
        var cost = SaveCost()
        try copy(spool.file, from: 0, to: out, &hasher, &cost)
        do {
            try Directory.check { fsync(out.rawValue) }
            try root.link(temporary, to: root, as: name)
            try root.sync()
        } catch .fileExists {
            throw .alreadyExists(name: name)
        } catch {
            throw .system("store \(name)", error)
        }
        return try summary(name)
    }
}

extension DocumentStore {
    /// New documents being uploaded are written under names starting with this, in the folder.
    static let uploadPrefix = ".upload."
    /// An upload is written in one go from its spool: a file of it untouched for this long was
    /// left by a process killed while writing it, not one still at work (on this machine or
    /// another sharing the folder, where its process id would say nothing).
    static let abandonedUploadAge: Int = 3600

    /// Removes what uploads killed before their link left in the folder: hidden files, never
    /// documents, that would otherwise take their space for good.
    func removeAbandonedUploads() {
        let now = time(nil)
        for name in (try? root.names()) ?? [] where name.hasPrefix(Self.uploadPrefix) {
            guard let stat = try? root.stat(name), stat.rawValue.st_mode & S_IFMT == S_IFREG,
                  now - stat.rawValue.st_mtim.tv_sec > Self.abandonedUploadAge else { continue }
            try? root.remove(name)
        }
    }

    /// Refuses a name that is not a plain `.pdf` or `.yianazip` file name in the folder.
    public static func checkName(_ name: String) throws(DocumentError) { try check(name) }

    /// The hex SHA-256 of `bytes`, as documents' hashes are written.
    public static func sha256(_ bytes: [UInt8]) -> String {
        var hasher = SHA256Hasher()
        hasher.update(bytes)
        return hasher.finish()
    }
}
