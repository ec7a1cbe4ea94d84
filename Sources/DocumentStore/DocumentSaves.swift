public import CanvasCore
import Foundation
import PDFSurgery
import SystemPackage
#if canImport(Glibc)
import Glibc
#endif

/// Saves: each makes a new revision, under the document's lock, in the order of a write-ahead
/// log (the bytes written and flushed, the log's commit record flushed, then the document
/// replaced), so that killed at any point the document is its old revision or its new one and
/// an acknowledged revision is on disk.
extension DocumentStore {
    /// Puts `drawing` on `page`, as a new revision, in `form`. Returns the new summary. `replacing`: the
    /// digests of the edits a reopened drawing came from (`PageInk`), which the page stops
    /// drawing; each must still be on the page (`DocumentError.inkChanged`).
    ///
    /// `madeBy`, a key of ASCII letters and digits naming the request, makes the save findable:
    /// run again with the same key, while the revision it made is kept, it answers that revision
    /// instead of saving again (for a request retried after its reply was lost).
    public func flatten(_ name: String, page: Int, drawing: Drawing, form: InkForm = .paper, replacing: [String]? = nil, expectedRevision: Int? = nil,
                        madeBy: String? = nil, fence: WriteFence? = nil) throws(DocumentError) -> DocumentSummary {
        try writing(name, expectedRevision: expectedRevision, madeBy: madeBy, fence: fence) { (document, writer, kept) throws(DocumentError) in
            guard let current = document, let kept else { throw .notFound(name) }
            // A container's header is read once: it gives both where the PDF starts and the
            // metadata the save updates. Read as a reader would (a document too slow to read is
            // too slow to save), then given the save's budget for the write.
            let (place, container) = try location(name, current)
            let prepared: Flattener.Prepared
            do throws(FlattenError) {
                prepared = try Flattener.prepare(place, page: page, adding: drawing, form: form, replacing: replacing, maxPagePoints: maxInkPointsPerPage)
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
            // Not into a file with other names (`cp -al`, `ln`): writing in place would change
            // every one of them. Such a document is saved by replace, which leaves them as they
            // were.
            if let increment, container == nil, saveMode == .append, current.stat.rawValue.st_nlink == 1, lineEnds(at: kept, writer) {
                return try append(name, writer, current, kept, increment, pageCount: prepared.pageCount, madeBy: madeBy)
            }
            if let increment, container == nil {
                let length = kept.length
                return try save(name, writer, replacing: current, extending: kept, madeBy: madeBy, source: "save") { (out, hasher, cost) throws(DocumentError) in
                    do throws(Errno) {
                        try FileCopy.copyPrefix(current.descriptor, length: length, to: out, &cost)
                    } catch {
                        throw .system("copy \(name) for its new revision", error)
                    }
                    try write(out, increment, &hasher, &cost)
                    return Written(hashing: .fed, pageCount: prepared.pageCount)
                }
            }
            return try save(name, writer, replacing: current, extending: nil, madeBy: madeBy, source: "save") { (out, hasher, cost) throws(DocumentError) in
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
    /// Restoring the current revision changes nothing and answers the current summary. A
    /// document deleted from the folder is brought back. `madeBy` as for `flatten`.
    public func restore(_ name: String, revision: Int, expectedRevision: Int? = nil,
                        madeBy: String? = nil, fence: WriteFence? = nil) throws(DocumentError) -> DocumentSummary {
        try writing(name, expectedRevision: expectedRevision, madeBy: madeBy, fence: fence, allowingNone: true) { (current, writer, kept) throws(DocumentError) in
            if let current, let kept, revision == kept.revision {
                return DocumentSummary(name: name, revision: revision, pageCount: try pdf(name, current).pageCount, sha256: kept.sha256)
            }
            guard let entry = writer.state.revisions[revision] else { throw .revisionNotFound(name: name, revision: revision) }
            let (length, sha256, midstate) = (entry.length, entry.sha256, entry.midstate)
            let source = try openKept(name, entry, writer.state, in: writer.history)
            return try save(name, writer, replacing: current, extending: nil, sameBytesAs: entry, madeBy: madeBy, source: "restore") { (out, hasher, cost) throws(DocumentError) in
                do throws(Errno) {
                    try FileCopy.copyPrefix(source.descriptor, length: length, to: out, &cost)
                } catch {
                    throw .system("copy revision \(revision) of \(name)", error)
                }
                return Written(hashing: .known(sha256, midstate), pageCount: try pageCount(name, out))
            }
        }
    }

    /// What a save checks once it is the document's only writer, before it writes anything (and
    /// after a save `madeBy` its request is looked for), and again just before it commits the
    /// new revision: that it may still be made. Throws to refuse it; refused at the commit, the
    /// save leaves nothing behind. canvasd's fence: the session the save is for is still this
    /// instance's, at the version it was saved from; an instance paused while it waited for the
    /// lock, or while it wrote, would otherwise save a drawing the client has since changed
    /// elsewhere. What it cannot see is a pause between its own answer and the commit record.
    public typealias WriteFence = @Sendable (_ name: String) throws(DocumentError) -> Void

    /// Runs `body` as the document's only writer: the history's lock held, the history settled
    /// (see `settle`: the document file is now a kept revision), the current revision checked
    /// against `expectedRevision`. `body` gets the document (nil only with `allowingNone`, for
    /// a document deleted from the folder), the writer, and the current revision.
    /// A save `madeBy` a request that already made a revision still kept answers that one, before
    /// `expectedRevision` is checked: it is what the request's first run answered.
    /// `fence`, if given, is asked next (see `WriteFence`).
    ///
    /// Run again from the start when a file was replaced under it by another machine (ESTALE,
    /// `againWhenStale`): a failed save has left no revision (an error after the commit abandons
    /// it, and nothing after the rename fails), so the run again is the request's only one.
    func writing(_ name: String, expectedRevision: Int?, madeBy: String? = nil, fence: WriteFence? = nil, allowingNone: Bool = false,
                 _ body: (OpenFile?, HistoryWriter, KeptRevision?) throws(DocumentError) -> DocumentSummary) throws(DocumentError) -> DocumentSummary {
        try againWhenStale { () throws(DocumentError) in
            try writingOnce(name, expectedRevision: expectedRevision, madeBy: madeBy, fence: fence, allowingNone: allowingNone, body)
        }
    }

    private func writingOnce(_ name: String, expectedRevision: Int?, madeBy: String?, fence: WriteFence?, allowingNone: Bool,
                             _ body: (OpenFile?, HistoryWriter, KeptRevision?) throws(DocumentError) -> DocumentSummary) throws(DocumentError) -> DocumentSummary {
        try Self.check(name)
        // A document saved before has its history: opened as it is (on a network file system
        // each look costs a round trip, and a save of a known document makes none it can skip).
        // Otherwise the document first: a name that is no document, and never was one, makes no
        // history folder. One deleted from the folder still has its history, where a request
        // run again finds what its first run made; the settle below opens the document again,
        // under the lock, and refuses what is no document there.
        var history: RevisionHistory
        if let existing = try self.history(name, create: false) {
            history = existing
        } else {
            _ = try openDocument(name)
            guard let made = try self.history(name, create: true) else { throw .io(operation: "open the revisions of \(name)", message: "missing") }
            history = made
        }
        history.commitFence = fence
        guard let writer = try writer(name, history, wait: true) else { throw .io(operation: "lock \(name)", message: "not taken") }
        defer { writer.close() }
        let current = try settle(name, writer)
        // A save supersedes this file, and the history shares nothing with it: its last close
        // frees its blocks (11 ms for 64 MB on ext4), which the reply need not wait for.
        defer { if let current { FileRelease.later(current) } }
        let kept = current.flatMap { writer.state.revision(of: FileSnapshot($0.stat)) }
        if current != nil, kept == nil {
            throw .unreadable(name: name, reason: "damaged", message: "it is empty")
        }
        if let madeBy {
            precondition(!madeBy.isEmpty && madeBy.utf8.count <= 64 && madeBy.utf8.allSatisfy { $0.isASCIILetterOrDigit },
                         "a save's key is 1 to 64 ASCII letters and digits")
            if let made = writer.state.kept.last(where: { $0.madeBy == madeBy }) {
                return DocumentSummary(name: name, revision: made.revision, pageCount: made.pageCount ?? 0, sha256: made.sha256, madeBefore: true,
                                       savedAt: made.saved)
            }
        }
        guard current != nil || allowingNone else { throw .notFound(name) }
        try fence?(name)
        let revision = kept?.revision ?? writer.state.newest?.revision ?? 0
        if let expectedRevision, expectedRevision != revision {
            throw .conflict(name: name, expected: expectedRevision, current: revision)
        }
        do {
            let summary = try body(current, writer, kept)
            // What this save left is all the history holds: the next writer of this process need
            // not look through the folder again unless something else changed it (`settle`).
            settledFolders.remember(writer)
            return summary
        } catch {
            // Another program's write that lands while the save reads the document can fail the
            // save anywhere (a copy that reads short, a PDF cut mid-read, a file gone): whatever
            // the failure, the document is no longer the revision this save started from, so the
            // answer is the one a client retries, and the retry keeps that write as a revision.
            if let current, error != .changedDuringSave(name), changedSince(name, current) {
                throw .changedDuringSave(name)
            }
            throw error
        }
    }

    /// Whether the document's name no longer holds the file `current` was when it was opened
    /// (another inode, size or time, or no file at all).
    func changedSince(_ name: String, _ current: OpenFile) -> Bool {
        do {
            guard let now = try root.stat(name) else { return true }
            return FileSnapshot(now) != FileSnapshot(current.stat)
        } catch {
            return false   // not known to have changed: the save's own failure is the answer
        }
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

    /// A record whose hash state, continued over its last bytes, is not the hash it names: forged
    /// or damaged, and never built on (the next revision's sha256 would be a lie).
    static func forgedState(_ name: String, _ revision: KeptRevision) -> DocumentError {
        .unreadable(name: name, reason: "damaged",
                    message: "its history's record of revision \(revision.revision) keeps a hash state its bytes do not have; nothing was written")
    }

    /// Whether `revision`'s line ends where it does, and is the file the log last saw, so that
    /// the next revision can continue its bytes and its hash.
    func lineEnds(at revision: KeptRevision, _ writer: HistoryWriter) -> Bool {
        let (line, length) = (revision.line, revision.length)
        guard let stat = try? writer.history.directory.stat(RevisionHistory.lineName(line)) else { return false }
        return stat.size == length && writer.state.lines[line] == FileSnapshot(stat)
    }

    /// The replacing save: `body` writes the new version into a temporary file in the history's
    /// folder (and says how it hashed it). With `extending`, the new file begins with that
    /// revision's bytes and the hasher given to `body` has hashed them already (from the
    /// revision's state and the few bytes after its last whole block), so a save hashes its
    /// increment, not the document. The new revision's bytes go into the history: appended to
    /// the line it extends, the same line as `sameBytesAs` (a restore), or a line of their own.
    /// Then the log's commit record, which names the temporary file, and only then the rename
    /// over the document (or a link, where it was deleted): killed after the commit, the next
    /// holder of the lock finishes the rename. With `madeBy`, the request's key is in the commit.
    func save(_ name: String, _ writer: HistoryWriter, replacing current: OpenFile?, extending base: KeptRevision?,
              sameBytesAs restored: KeptRevision? = nil, madeBy: String?, source: String,
              _ body: (FileDescriptor, inout SHA256Hasher, inout SaveCost) throws(DocumentError) -> Written) throws(DocumentError) -> DocumentSummary {
        let history = writer.history
        let number = try writer.nextRevision()
        let temporary = RevisionHistory.temporaryPrefix + "\(getpid()).\(UInt32.random(in: 0...UInt32.max))"
        let out: FileDescriptor
        do {
            out = try history.directory.create(temporary, readable: true)
        } catch {
            throw .system("create a new revision of \(name)", error)
        }
        defer { try? out.close() }
        var committed = false, placed = false
        var madeLine: String?
        var extended: (line: Int, length: Int64)?
        var cost = SaveCost()
        do {
            var hasher = SHA256Hasher()
            // The hash continues from the revision's state only over the line's bytes as the log
            // last saw them (or checked against its sha256); else the new file is hashed whole.
            var resumed = false
            if let base, let kept = try? openKept(name, base, writer.state, in: history) {
                let (length, midstate) = (base.length, base.midstate)
                resumed = true
                hasher = SHA256Hasher(resuming: midstate)
                do {
                    try hasher.feed(kept.descriptor, from: midstate.length, to: length)
                } catch {
                    throw DocumentError.system("read the end of revision \(base.revision) of \(name)", error)
                }
                guard hasher.digestSoFar() == base.sha256 else { throw Self.forgedState(name, base) }
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
            FaultPoint.saveWritten.reach()
            let stat = try Errno.rethrowing { try out.stat() }
            let sha256: String, midstate: SHA256Midstate
            switch written.hashing {
            case .fed where base == nil || resumed:
                cost.bytesHashed = hasher.bytesFed
                midstate = hasher.midstate
                sha256 = hasher.finish()
            case .known(let known, let state):
                (sha256, midstate) = (known, state)
            case .none, .fed:
                var whole = SHA256Hasher()
                try whole.feed(out, from: 0, to: stat.size)
                cost.bytesHashed = whole.bytesFed
                midstate = whole.midstate
                sha256 = whole.finish()
            }
            clock = ContinuousClock.now
            // The new revision's bytes, kept where only canvasd writes.
            let line: Int, lineFile: FileSnapshot?
            if let restored {
                let same = restored.line
                (line, lineFile) = (same, writer.state.lines[same])
            } else if let base, stat.size > base.length, lineEnds(at: base, writer) {
                let (baseLine, length) = (base.line, base.length)
                let target = try history.directory.openForWriting(RevisionHistory.lineName(baseLine))
                defer { try? target.close() }
                // Said first, and durable: bytes past a line's last record with no save announced
                // are bytes of records the log lost, which nobody may cut.
                try writer.append([.extending(number, line: baseLine, from: length)], durable: true)
                extended = (baseLine, length)
                try FileCopy.copyRange(out, from: length, to: stat.size, into: target, at: length, &cost)
                try Directory.check { fdatasync(target.rawValue) }
                (line, lineFile) = (baseLine, FileSnapshot(try Errno.rethrowing { try target.stat() }))
            } else {
                let copyName = RevisionHistory.temporaryPrefix + "line.\(getpid()).\(UInt32.random(in: 0...UInt32.max))"
                let copy = try history.directory.create(copyName, readable: true)
                defer { try? copy.close() }
                var copying = SaveCost()
                do {
                    try FileCopy.copyPrefix(out, length: stat.size, to: copy, &copying)
                    try Directory.check { fsync(copy.rawValue) }
                    try history.directory.rename(copyName, to: history.directory, as: RevisionHistory.lineName(number))
                } catch {
                    try? history.directory.remove(copyName)
                    throw error
                }
                madeLine = RevisionHistory.lineName(number)
                cost.bytesCopied += copying.bytesCopied
                cost.bytesCloned += copying.bytesCloned
                (line, lineFile) = (number, FileSnapshot(try Errno.rethrowing { try copy.stat() }))
            }
            // The temporary file's and a new line's names, durable before the commit names them.
            try history.directory.sync()
            FaultPoint.saveLineKept.reach()
            try history.commitFence?(name)
            // Another program wrote the document during the save: renaming over it would lose
            // that. Not saved; the next try keeps that change as a revision first.
            if let current, try root.stat(name).map(FileSnapshot.init) != FileSnapshot(current.stat) {
                throw DocumentError.changedDuringSave(name)
            }
            let savedAt = Self.now()
            try writer.append([.revision(number, line: line, length: stat.size, sha256: sha256, state: midstate, saved: savedAt,
                                         source: source, document: FileSnapshot(stat), lineFile: lineFile, temporary: temporary,
                                         madeBy: madeBy, pageCount: madeBy == nil ? nil : written.pageCount)], durable: true)
            committed = true
            // The line holds the bytes just hashed: a new line copied from them, or a line
            // extended from a prefix checked to be the base revision's (a restore's line was
            // vouched for by openKept, as the file it is).
            if let lineFile, madeLine != nil || resumed {
                vouched.vouch(VouchedBytes.line(name, line), lineFile, length: stat.size, sha256: sha256)
            }
            FaultPoint.saveCommitted.reach()
            // Asked again after the commit's flush, so that the window in which another
            // program's write could be renamed over is the rename alone: written meanwhile, the
            // save is abandoned (its number never used) and that change is kept by the next try.
            if let current, try root.stat(name).map(FileSnapshot.init) != FileSnapshot(current.stat) {
                throw DocumentError.changedDuringSave(name)
            }
            try place(temporary, history, as: name, replacing: current != nil)
            placed = true
            FaultPoint.saveRenamed.reach()
            // The revision is the file this save wrote, whatever the name holds a moment later:
            // the log learns it as it is after the rename (which changed its change time), or,
            // when another program wrote or replaced it since, as this save left it, so that the
            // other program's file is the next revision, never this one (lost in a crash, the
            // next settle finds the same). Until this record, the commit is pending.
            // (A stat that fails here fails no save: the revision is committed and in place.)
            let made = FileSnapshot(stat)
            var identity = made
            if let found = try? root.stat(name), FileSnapshot(found).isStill(made) { identity = FileSnapshot(found) }
            housekeeping.tidy(.cleanup, "logging revision \(number) as the document", document: name) {
                try writer.append([.identity(number, document: identity)], durable: false)
            }
            // The file this save wrote, whose bytes it hashed: a read of it needs no hash.
            vouched.vouch(name, identity, length: stat.size, sha256: sha256)
            prune(writer)
            cost.keeping = ContinuousClock.now - clock
            cost.add(writer.keptCost)
            recordCost(cost)
            return DocumentSummary(name: name, revision: number, pageCount: written.pageCount, sha256: sha256, savedAt: savedAt)
        } catch {
            if !placed {
                // Undone as far as it can be; what is left, the next writer's settle finds.
                // Each step on its own: one that fails leaves the others to do.
                let doing = "undoing a failed save of revision \(number)"
                if committed { housekeeping.tidy(.cleanup, doing, document: name) { try writer.append([.abandoned(number)], durable: true) } }
                housekeeping.tidy(.cleanup, doing, document: name) {
                    if try history.directory.stat(temporary) != nil { try history.directory.remove(temporary) }
                }
                if let madeLine { housekeeping.tidy(.cleanup, doing, document: name) { try history.directory.remove(madeLine) } }
                if !committed, let extended {
                    housekeeping.tidy(.cleanup, doing, document: name) {
                        // The line back to the revision it continued, and sealed as it is again.
                        if let snapshot = try shorten(RevisionHistory.lineName(extended.line), history, to: extended.length) {
                            try writer.append([.seal(extended.line, snapshot)], durable: false)
                        }
                    }
                }
            }
            switch error {
            case let error as DocumentError: throw error
            case let error as Errno: throw .system("save \(name)", error)
            default: throw .io(operation: "save \(name)", message: "\(error)")
            }
        }
    }
}
