import Foundation
#if canImport(Glibc)
import Glibc
#endif
import SystemPackage

/// How a save that appends an incremental update reaches the disk.
public enum SaveMode: String, Sendable, CaseIterable {
    /// The new version is written to a new file (a copy of the old and the update), flushed and
    /// renamed over the document: a reader of the folder sees the old file or the new one.
    case replace
    /// The update is appended to the document in place (PDF's incremental update, Acrobat's fast
    /// save): nothing is copied, so a save costs its increment whatever the document's size. A
    /// reader of the folder may see the old version followed by part of the update while it is
    /// written, and after a crash until the next writer cuts it (see `append`).
    case append
}

extension DocumentStore {
    /// The save in `append` mode, under the document's lock: an intent in the log (naming the
    /// document as it is and where the update goes) is made durable, the update is written at
    /// the end of the document and flushed, the same bytes at the end of the revision's line in
    /// the history and flushed, and only then is the commit record made durable. Killed before
    /// that, the document has a tail past the revision the log names, which the next holder of
    /// the lock cuts off (`settle`). The hash is continued from the revision's state.
    func append(_ name: String, _ writer: HistoryWriter, _ current: OpenFile, _ kept: KeptRevision,
                _ increment: [UInt8], pageCount: Int, madeBy: String?) throws(DocumentError) -> DocumentSummary {
        let (line, length, midstate, revision) = (kept.line, kept.length, kept.midstate, kept.revision)
        let history = writer.history
        let number = try writer.nextRevision()
        var cost = SaveCost()
        let document: FileDescriptor, target: FileDescriptor
        do {
            document = try root.openForWriting(name)
        } catch {
            throw .system("open \(name) to append to it", error)
        }
        defer { try? document.close() }
        do {
            target = try history.directory.openForReadingAndWriting(RevisionHistory.lineName(line))
        } catch {
            throw .system("open the history of \(name) to append to it", error)
        }
        defer { try? target.close() }
        var intended = false, wrote = false, committed = false, outsideChanged = false
        do {
            let before = FileSnapshot(try Errno.rethrowing { try document.stat() })
            guard before == FileSnapshot(current.stat) else {
                throw DocumentError.changedDuringSave(name)
            }
            var clock = ContinuousClock.now
            // Continued from the record's state, checked before anything is written.
            var hasher = SHA256Hasher(resuming: midstate)
            try hasher.feed(target, from: midstate.length, to: length)
            guard hasher.digestSoFar() == kept.sha256 else { throw Self.forgedState(name, kept) }
            try writer.append([.intent(number, from: length, document: before, line: line)], durable: true)
            intended = true
            FaultPoint.appendIntended.reach()
            wrote = true
            _ = try Errno.rethrowing { try document.writeAll(toAbsoluteOffset: length, increment) }
            // The document as this write left it: the identity the commit records. Taken now, and
            // compared again just before the commit, so that another program's write in between
            // is never recorded as this revision.
            let written = FileSnapshot(try Errno.rethrowing { try document.stat() })
            hasher.update(increment)
            cost.bytesWritten = Int64(increment.count)
            cost.bytesHashed = hasher.bytesFed
            cost.writing = ContinuousClock.now - clock
            clock = ContinuousClock.now
            try Directory.check { fdatasync(document.rawValue) }
            FaultPoint.appendWritten.reach()
            _ = try Errno.rethrowing { try target.writeAll(toAbsoluteOffset: length, increment) }
            FaultPoint.appendLineWritten.reach()
            try Directory.check { fdatasync(target.rawValue) }
            cost.flushing = ContinuousClock.now - clock
            clock = ContinuousClock.now
            // The fence first (it may wait on the session store): the check against another
            // program's write then comes last, just before the commit, as in a replacing save.
            try history.commitFence?(name)
            let after = FileSnapshot(try Errno.rethrowing { try document.stat() })
            guard after == written else {
                outsideChanged = true
                throw DocumentError.changedDuringSave(name)
            }
            let lineFile = FileSnapshot(try Errno.rethrowing { try target.stat() })
            let state = hasher.midstate
            let sha256 = hasher.finish()
            let savedAt = Self.now()
            try writer.append([.revision(number, line: line, length: length + Int64(increment.count), sha256: sha256, state: state,
                                         saved: savedAt, source: "save", document: after, lineFile: lineFile,
                                         madeBy: madeBy, pageCount: madeBy == nil ? nil : pageCount)], durable: true)
            committed = true
            // Written and hashed here, the document and its line alike: a read or the next save
            // need not hash them again.
            vouched.vouch(name, after, length: length + Int64(increment.count), sha256: sha256)
            vouched.vouch(VouchedBytes.line(name, line), lineFile, length: length + Int64(increment.count), sha256: sha256)
            FaultPoint.appendCommitted.reach()
            prune(writer)
            cost.keeping = ContinuousClock.now - clock
            cost.add(writer.keptCost)
            recordCost(cost)
            return DocumentSummary(name: name, revision: number, pageCount: pageCount, sha256: sha256, savedAt: savedAt)
        } catch {
            if !committed && wrote {
                // Not committed: take the tail back now rather than leave it to the next writer,
                // and say which file the document is once more. When another program wrote the
                // document meanwhile, only where the file is still exactly the revision followed
                // by this save's bytes (the other program changed its times, not its bytes);
                // whatever else it holds is that program's, kept as the next revision by the next
                // settle. Either way the intent is settled here: left in the log, the next holder
                // of the lock would cut a tail the other program wrote after the revision.
                var records: [HistoryRecord] = []
                if !outsideChanged || onlyThisSave(name, document, kept, increment),
                   ftruncate(document.rawValue, off_t(length)) == 0, fsync(document.rawValue) == 0,
                   let now = try? document.stat() {
                    records.append(.identity(revision, document: FileSnapshot(now)))
                }
                if ftruncate(target.rawValue, off_t(length)) == 0, let now = try? target.stat() {
                    records.append(.seal(line, FileSnapshot(now)))
                }
                if outsideChanged { records.append(.abandoned(number)) }
                try? writer.append(records, durable: true)
            } else if intended && !committed {
                try? writer.append([.abandoned(number)], durable: false)
            }
            switch error {
            case let error as DocumentError: throw error
            case let error as Errno: throw .system("append to \(name)", error)
            default: throw .io(operation: "append to \(name)", message: "\(error)")
            }
        }
    }

    /// Whether the document, changed by another program during an append, is still exactly
    /// the revision appended to followed by the append's own bytes (under its name, the file
    /// the save opened), so that cutting those bytes off takes nothing of the other program's.
    private func onlyThisSave(_ name: String, _ document: FileDescriptor, _ kept: KeptRevision, _ increment: [UInt8]) -> Bool {
        // `document` is open for writing only: the bytes are read through a descriptor of their
        // own, checked to be the same file.
        let length = kept.length
        guard let stat = try? document.stat(), stat.size == length + Int64(increment.count),
              let reading = try? root.openForReading(name) else { return false }
        defer { try? reading.close() }
        guard let named = try? reading.stat(), named.identity == stat.identity, named.size == stat.size else { return false }
        var tail = [UInt8](repeating: 0, count: increment.count)
        guard (try? reading.read(at: length, into: &tail, count: increment.count)) == increment.count, tail == increment else { return false }
        return (try? SHA256Hasher.prefixDigests(reading, lengths: [length]))?[length]?.0 == kept.sha256
    }
}
