import Foundation
#if canImport(Glibc)
import Glibc
#endif
import SystemPackage

/// A history's one writer: holds the document's lock from `init` to `close()` (or its last
/// reference), and appends to its log.
final class HistoryWriter {
    let history: RevisionHistory
    private let held: HeldLock
    private var log: FileDescriptor
    private(set) var state: HistoryState
    /// What settling cost before the save (keeping the document as a revision: its hash and its
    /// copy), counted in the save's cost.
    var keptCost = SaveCost()
    private var end: Int64
    private var chain: [UInt8]
    /// The version of the log as it was opened: records are appended in it. An older log is
    /// written whole at the current version at the next compaction point (`compactIfLong`).
    private var version: UInt32
    /// The log as this writer opened it, before any record of its own.
    private(set) var openedAs: FileSnapshot
    /// Set when tidying after a save failed (a pruned line that could not be removed, a log not
    /// compacted): the next writer then looks through the folder (`SettledFolders`).
    var untidy = false

    /// Takes the lock (waiting for it, or, with `wait` false, returning nil when another holds
    /// it) and opens the log: cutting a torn tail off, migrating an older layout, or starting an
    /// empty log where there is none.
    /// `cache`: the logs as the store's writers last read them, so that only what was added
    /// since is decoded (`HistoryCache.writing`).
    init?(_ history: RevisionHistory, wait: Bool, cache: HistoryCache, migrate: () throws -> [HistoryRecord]) throws(DocumentError) {
        self.history = history
        let name = history.name
        guard let taken = try Self.takeLock(history, wait: wait) else { return nil }
        held = taken
        do {
            // Opened as it is, and looked at through the descriptor: on a network file system each
            // look by name is a round trip. Only a log that is not there is none: any other
            // failure to open it (a network file system's ESTALE, EIO) taken for none would start
            // the numbering again from 1.
            var opened = try Self.openLog(history)
            if opened == nil {
                if try history.lostItsLog() { throw RevisionHistory.logLost(name) }
                try Self.writeWhole(history, try migrate())
                // The log in place, an older layout's files are nobody's: they go now, so that none
                // of them is left sharing the document's inode.
                for file in try history.directory.names() where LegacyHistory.isLegacyName(file) {
                    try history.directory.remove(file)
                }
                opened = try Self.openLog(history)
            }
            guard let opened else { throw Errno.noSuchFileOrDirectory }
            log = opened
            let (reading, state, stat): (HistoryLog.Reading, HistoryState, Stat)
            do {
                (reading, state, stat) = try cache.writing(log, for: history.directory.path)
            } catch {
                throw error.documentError(name)
            }
            let file = FileSnapshot(stat)
            openedAs = file
            self.state = state
            end = reading.end
            chain = reading.chain
            version = reading.version
            if reading.damagedTail || reading.end < file.size {
                // A record torn by a killed writer (or damage): what follows the last good
                // record is no record. Cut it before appending, or the new records would
                // follow bytes no reader gets past.
                try Directory.check { ftruncate(log.rawValue, off_t(reading.end)) }
                try Directory.check { fdatasync(log.rawValue) }
            }
        } catch let error as DocumentError {
            held.release()
            throw error
        } catch let error as Errno {
            held.release()
            throw .system("open the revision log of \(name)", error)
        } catch {
            held.release()
            throw .io(operation: "open the revision log of \(name)", message: "\(error)")
        }
    }

    /// The document's lock, held: the history folder itself and its `lock` file.
    struct HeldLock {
        let folder: FileDescriptor
        let file: FileDescriptor

        func release() {
            FileLock.unlock(file)
            try? file.close()
            FileLock.unlock(folder)
            try? folder.close()
        }
    }

    /// Takes the document's lock; nil when another holds it and `wait` is false. The lock is
    /// `flock` on the `lock` file, which is where tools and people look for it (holding it holds
    /// every writer), and then on the history's folder, which no `rm` of a file in it undoes: a
    /// `lock` file removed by hand, as people remove stale lock files, would otherwise let a
    /// second writer in beside the first, on a new file of the same name.
    private static func takeLock(_ history: RevisionHistory, wait: Bool) throws(DocumentError) -> HeldLock? {
        let folder: FileDescriptor, file: FileDescriptor
        do {
            folder = FileDescriptor(rawValue: try Directory.check {
                openat(history.directory.descriptor.rawValue, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)
            })
        } catch {
            throw .system("open the revisions of \(history.name) to lock them", error)
        }
        do {
            file = FileDescriptor(rawValue: try Directory.check {
                openat(history.directory.descriptor.rawValue, RevisionHistory.lockName, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0o644)
            })
        } catch {
            try? folder.close()
            throw .system("open the lock of \(history.name)", error)
        }
        let lock = HeldLock(folder: folder, file: file)
        do {
            // The file first: a writer waits there holding nothing, so that one paused while it
            // waits (SIGSTOP, a debugger) holds up nobody once the lock is given up.
            for descriptor in [file, folder] {
                if wait {
                    try FileLock.lock(descriptor)
                } else if try !FileLock.tryLock(descriptor) {
                    lock.release()
                    return nil
                }
            }
            return lock
        } catch {
            lock.release()
            throw .system("lock \(history.name)", error)
        }
    }

    /// The log, open for appending; nil when there is none. Never a link, nor anything but a
    /// regular file (checked on the descriptor by `readLog`).
    private static func openLog(_ history: RevisionHistory) throws -> FileDescriptor? {
        do {
            return try history.directory.openForReadingAndWriting(HistoryLog.fileName)
        } catch .noSuchFileOrDirectory {
            return nil
        } catch .tooManySymbolicLinkLevels, .isDirectory {
            throw notRegular(history.name)
        }
    }

    private static func notRegular(_ name: String) -> DocumentError {
        .unreadable(name: name, reason: "damaged", message: "its revision log is not a regular file")
    }

    /// The whole log, parsed, and the file as it was read.
    private static func readLog(_ log: FileDescriptor, _ name: String) throws -> (HistoryLog.Reading, FileSnapshot) {
        let stat = try Errno.rethrowing { try log.stat() }
        guard stat.isRegularFile else { throw notRegular(name) }
        let size = stat.size
        guard size <= HistoryLog.maxLogBytes else { throw HistoryCache.Failure.format(.tooLarge(size)).documentError(name) }
        switch HistoryLog.parse(try log.bytes(from: 0, to: size)) {
        case .failure(let error): throw HistoryCache.Failure.format(error).documentError(name)
        case .success(let reading): return (reading, FileSnapshot(stat))
        }
    }

    /// The log as it is now (after this writer's records); nil when it cannot be looked at.
    func logSnapshot() -> FileSnapshot? {
        (try? log.stat()).map(FileSnapshot.init)
    }

    deinit { close() }

    private var closed = false
    /// Whether records were appended since the log was last flushed.
    private var unflushed = false

    func close() {
        guard !closed else { return }
        closed = true
        // Flushed before the lock is let go, whatever was appended last: on a network file
        // system the client may hold the write back (GlusterFS's write-behind, and a close that
        // returns before its flush), and the next writer, on another machine, would read the log
        // without those records, append where they go, and then have them land over its own.
        if unflushed { fdatasync(log.rawValue) }
        try? log.close()
        held.release()
    }

    /// Appends records to the log; with `durable`, flushed before it returns (what follows
    /// depends on them being there after a crash). Never past what a reader reads
    /// (`HistoryLog.maxLogBytes`): a log that no canvasd could read again would take every
    /// revision it holds out of reach.
    func append(_ records: [HistoryRecord], durable: Bool) throws(DocumentError) {
        var bytes: [UInt8] = []
        var next = chain
        for record in records {
            let framed = HistoryLog.frame(record, after: next, version: version)
            bytes += framed.bytes
            next = framed.chain
        }
        guard end + Int64(bytes.count) <= HistoryLog.maxLogBytes - Int64(HistoryLog.maxTornBytes) else {
            throw .unreadable(name: history.name, reason: "tooLarge",
                              message: "its history's log would pass \(HistoryLog.maxLogBytes >> 20) MiB, more than canvasd reads; nothing was written (keep fewer revisions: --keep-revisions)")
        }
        do {
            unflushed = true
            _ = try Errno.rethrowing { try log.writeAll(toAbsoluteOffset: end, bytes) }
            if durable {
                try Directory.check { fdatasync(log.rawValue) }
                unflushed = false
            }
        } catch {
            // Whatever part of it reached the file is a torn tail, which readers stop before and
            // the next writer cuts: the records were not made.
            throw .system("write the revision log of \(history.name)", error)
        }
        end += Int64(bytes.count)
        chain = next
        for record in records { state.apply(record) }
    }

    /// The number the next revision gets: refused once it would be past what the protocol can
    /// name (`HistoryLog.maxRevision`), rather than acknowledge a revision no client can ask for.
    func nextRevision() throws(DocumentError) -> Int {
        guard state.next <= HistoryLog.maxRevision else {
            throw .unreadable(name: history.name, reason: "tooLarge",
                              message: "its history has handed out every revision number the protocol can name (\(HistoryLog.maxRevision))")
        }
        return state.next
    }

    /// Writes the log anew from `records` (a migration's, or the live part of a long one), and
    /// puts it in place in one rename.
    static func writeWhole(_ history: RevisionHistory, _ records: [HistoryRecord]) throws(Errno) {
        let temporary = RevisionHistory.temporaryPrefix + "log.\(getpid()).\(UInt32.random(in: 0...UInt32.max))"
        let out = try history.directory.create(temporary)
        defer { try? out.close() }
        var (bytes, chain) = HistoryLog.header(salt: HistoryLog.newSalt())
        for record in records {
            let framed = HistoryLog.frame(record, after: chain)
            bytes += framed.bytes
            chain = framed.chain
        }
        do {
            _ = try Errno.rethrowing { try out.writeAll(bytes) }
            try Directory.check { fsync(out.rawValue) }
            try history.directory.rename(temporary, to: history.directory, as: HistoryLog.fileName)
            try history.directory.sync()
        } catch {
            try? history.directory.remove(temporary)
            throw error
        }
    }

    /// Writes the log again with only what is live once it is long and mostly about the past:
    /// a log that only grew would cost every first read of it more with each save.
    /// Throws when the log could not be written again: the long log is still whole and right.
    func compactIfLong(_ cache: HistoryCache) throws {
        // Live: a record a revision, a seal a line, the identity. Compacted once most of the log
        // is about the past, however many revisions are kept: waiting for eight records a kept
        // revision let a log with many kept grow past what a reader reads.
        let live = state.revisions.count + state.lines.count + 2
        let long = state.records >= HistoryState.compactionRecords && state.records >= 2 * live
        // A log of an older version is converted here, where a save has just settled it whole.
        guard long || version < HistoryLog.version else { return }
        var records = [HistoryRecord.base(next: state.next)]
        // Each renamed long ago: a temporary name written again would read as a rename pending.
        records += state.kept.map { record in
            var settled = record
            settled.temporary = nil
            return .revision(settled)
        }
        if let current = state.current, state.revisions[current.revision] != nil {
            records.append(.identity(current.revision, document: current.document))
        }
        for (line, file) in state.lines.sorted(by: { $0.key < $1.key }) where state.neededLines[line] != nil {
            records.append(.seal(line, file))
        }
        try Self.writeWhole(history, records)
        let reopened = try history.directory.openForReadingAndWriting(HistoryLog.fileName)
        try? log.close()
        log = reopened
        unflushed = false
        let (reading, _) = try Self.readLog(log, history.name)
        var state = HistoryState()
        for record in reading.records { state.apply(record) }
        (self.state, end, chain, version) = (state, reading.end, reading.chain, reading.version)
        cache.forget(history.directory.path)
    }
}
