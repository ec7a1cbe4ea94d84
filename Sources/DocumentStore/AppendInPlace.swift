import Foundation
#if canImport(Glibc)
import Glibc
#endif
public import SystemPackage

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
    /// The save in `append` mode, under the document's write lock: an intent (the journal) is
    /// made durable in the history, the update is written at the end of the current revision's
    /// bytes and flushed, and only then is the new revision's record made durable, which commits
    /// it. Killed before that, the document's file holds a tail past its last record that no
    /// reader takes for a revision, and that the next holder of the lock cuts off. The hash is
    /// continued from the record's state, as in the replacing save.
    func append(_ name: String, _ history: RevisionHistory, _ current: OpenFile, _ kept: RevisionHistory.Kept,
                _ record: RevisionHistory.Record, _ increment: [UInt8], pageCount: Int, madeBy: String?) throws(DocumentError) -> DocumentSummary {
        let revision = kept.revision + 1
        var cost = SaveCost()
        let writer: FileDescriptor
        do {
            writer = try root.openForWriting(name)
        } catch {
            throw .system("open \(name) to append to it", error)
        }
        defer { try? writer.close() }
        let intent = RevisionHistory.Intent(revision: revision, line: record.line, from: record.length)
        var committed = false, wrote = false
        var made: [String] = []
        do {
            guard try Errno.rethrowing({ try writer.stat() }).identity == current.stat.identity else {
                throw DocumentError.io(operation: "append to \(name)", message: "the document was replaced from outside during the save; try again")
            }
            var clock = ContinuousClock.now
            try history.leave(intent.name)
            made.append(intent.name)
            try history.directory.sync()
            var hasher = SHA256Hasher(resuming: record.midstate)
            try hasher.feed(current.descriptor, from: record.midstate.length, to: record.length)
            wrote = true
            _ = try Errno.rethrowing { try writer.writeAll(toAbsoluteOffset: record.length, increment) }
            hasher.update(increment)
            cost.bytesWritten = Int64(increment.count)
            cost.bytesHashed = hasher.bytesFed + kept.hashedToRecord
            cost.writing = ContinuousClock.now - clock
            clock = ContinuousClock.now
            try Directory.check { fdatasync(writer.rawValue) }
            cost.flushing = ContinuousClock.now - clock
            clock = ContinuousClock.now
            let length = record.length + Int64(increment.count)
            var now = timespec()
            clock_gettime(CLOCK_REALTIME, &now)
            let midstate = hasher.midstate
            let sha256 = hasher.finish()
            let next = RevisionHistory.Record(revision: revision, line: record.line, length: length,
                                              saved: Int64(now.tv_sec) * 1000 + Int64(now.tv_nsec) / 1_000_000, sha256: sha256, midstate: midstate)
            try history.commitFence?(name)
            // The mark before the record that commits: killed between the two, a mark with no
            // record is cleared by the next repair (it names a revision past the current one),
            // where a record with no mark would be a revision its request, run again on another
            // instance, could not find, and would save a second time.
            if let madeBy {
                let mark = RevisionHistory.Mark(revision: revision, key: madeBy, pageCount: pageCount, sha256: sha256)
                try history.leave(mark.name)
                made.append(mark.name)
            }
            try history.leave(next.name)
            made.append(next.name)
            try history.directory.sync()
            committed = true
            try? history.directory.remove(intent.name)
            prune(history, current: current.stat.identity)
            cost.keeping = ContinuousClock.now - clock
            recordCost(cost)
            return DocumentSummary(name: name, revision: revision, pageCount: pageCount, sha256: sha256)
        } catch {
            if !committed {
                // Not committed: take the tail back now rather than leave it to the next writer.
                if wrote, ftruncate(writer.rawValue, off_t(record.length)) == 0 { _ = fsync(writer.rawValue) }
                for name in made.reversed() { try? history.directory.remove(name) }
            }
            switch error {
            case let error as DocumentError: throw error
            case let error as Errno: throw .system("append to \(name)", error)
            default: throw .io(operation: "append to \(name)", message: "\(error)")
            }
        }
    }

    /// Under the document's write lock: cuts the tail a killed append left past `committed`.
    func cutTail(_ name: String, _ current: OpenFile, _ committed: RevisionHistory.Kept) throws(DocumentError) {
        do {
            let writer = try root.openForWriting(name)
            defer { try? writer.close() }
            guard try Errno.rethrowing({ try writer.stat() }).identity == current.stat.identity else {
                throw DocumentError.io(operation: "repair \(name)", message: "the document was replaced from outside; try again")
            }
            try Directory.check { ftruncate(writer.rawValue, off_t(committed.length)) }
            try Directory.check { fsync(writer.rawValue) }
        } catch let error as Errno {
            throw .system("cut the uncommitted end of \(name)", error)
        } catch let error as DocumentError {
            throw error
        } catch {
            throw .io(operation: "cut the uncommitted end of \(name)", message: "\(error)")
        }
    }

    /// A reader met a tail past the last committed revision: an append under way (its writer
    /// holds the lock: wait 5 ms; an append and its two flushes take a few), or one a killed save left (nobody holds the lock: cut it
    /// now, under the lock, as the next writer would; SQLite's readers do the same with a hot
    /// journal). The caller reads again either way.
    func settleTail(_ name: String, _ file: OpenFile, _ committed: RevisionHistory.Kept, _ history: RevisionHistory) {
        guard (try? FileLock.tryLock(file.descriptor)) == true else {
            usleep(5_000)
            return
        }
        defer { FileLock.unlock(file.descriptor) }
        // Under the lock, look again: a writer may have committed, or replaced the file, meanwhile.
        guard (try? root.stat(name))?.identity == file.stat.identity, let now = try? file.descriptor.stat(),
              let listing = try? history.listing(), listing.revision(of: now.identity, size: now.size) == nil,
              let still = listing.committedPrefix(of: now.identity, size: now.size), still.length == committed.length else { return }
        try? cutTail(name, file, still)
    }
}
