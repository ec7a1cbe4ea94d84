import Foundation
#if canImport(Glibc)
import Glibc
#endif
import SystemPackage

/// One document's kept revisions, in `.canvas-revisions/<name>/`:
/// - `history.log`: every fact about them (see `HistoryLog`, `HistoryRecord`);
/// - `data.<L>`: the bytes, one file a line. An incremental update only appends, so each
///   revision of a `.pdf` saved from the one before is the beginning of the next: such
///   revisions share one line, each a length of its file. A revision made otherwise (a
///   `.yianazip` save, whose metadata at the front changes; qpdf's whole rewrite; an upload;
///   whatever another program made of the document) starts a line of its own, numbered after
///   it. A restored revision is the same bytes as the one it restores: it names that line and
///   length, and the save after it starts a new line unless the line ends there.
/// - `lock`: the document's one writer, across processes, holds `flock` on this file and then
///   on the folder: whatever another program does to the document file, or to this file, the
///   lock stays where it is.
/// Only canvasd writes these, and the document file never shares a byte of storage with them
/// (no hard link: a write into the document in place reaches no kept revision). Names that
/// are none of these are nobody's, and the next writer removes them.
struct RevisionHistory {
    let directory: Directory
    /// The document's name (for messages) and extension.
    let name: String
    /// The save's fence (`DocumentStore.WriteFence`), asked once more just before a new
    /// revision is committed: asked only before the save's work, it could not see a pause
    /// during that work.
    var commitFence: DocumentStore.WriteFence?

    static let lockName = "lock"
    static let temporaryPrefix = ".tmp."
    static let linePrefix = "data."

    static func lineName(_ line: Int) -> String { "\(linePrefix)\(line)" }

    /// The line of a `data.<L>` name; nil for any other name.
    static func line(ofFile name: String) -> Int? {
        guard name.hasPrefix(linePrefix), let line = Int(name.dropFirst(linePrefix.count)), line > 0, lineName(line) == name else { return nil }
        return line
    }

    /// The log as it is now; nil when there is none (a history no save has made yet, or one of
    /// an older layout, which the first holder of the lock migrates).
    func read(_ cache: HistoryCache) throws(DocumentError) -> HistoryState? {
        let log: FileDescriptor
        do {
            log = try directory.openForReading(HistoryLog.fileName)
        } catch .noSuchFileOrDirectory {
            return nil
        } catch .tooManySymbolicLinkLevels {
            throw .unreadable(name: name, reason: "damaged", message: "its revision log is a symbolic link, not a file canvasd wrote")
        } catch {
            throw .system("open the revision log of \(name)", error)
        }
        guard (try? log.stat())?.isRegularFile == true else {
            try? log.close()
            throw .unreadable(name: name, reason: "damaged", message: "its revision log is not a regular file")
        }
        defer { try? log.close() }
        do {
            return try cache.state(of: log, for: directory.path)
        } catch {
            throw error.documentError(name)
        }
    }

    /// Whether the folder holds files of an older layout (and no log).
    func hasLegacyFiles() -> Bool {
        ((try? directory.names()) ?? []).contains { LegacyHistory.isLegacyName($0) }
    }

    /// A folder with kept bytes (`data.<L>`) and no log, and no older layout's files (which a
    /// migration killed before its log was in place leaves beside them): the log was removed
    /// by hand. Starting again from revision 1 would hand out numbers a second time.
    func lostItsLog() throws(DocumentError) -> Bool {
        let names: [String]
        do {
            names = try directory.names()
        } catch {
            throw .system("list the revisions of \(name)", error)
        }
        // A migration killed before its log was in place leaves only the lines of the older
        // layout's files beside them; any other line is a history's whose log is gone.
        let legacyLines = Set(names.compactMap { LegacyHistory.fileNumbers($0)?.1 })
        return names.contains { name in RevisionHistory.line(ofFile: name).map { !legacyLines.contains($0) } ?? false }
    }

    static func logLost(_ name: String) -> DocumentError {
        .unreadable(name: name, reason: "damaged",
                    message: "its revision log is gone while kept revisions are there; move .canvas-revisions/\(name) away to start a new history")
    }
}

/// The parsed logs, each kept with where it ended, so that a read parses only what was added
/// since (a document listed a thousand times after a thousand saves reads each record once).
final class HistoryCache: @unchecked Sendable {
    // @unchecked: the table is only touched under `lock`.
    private struct Entry {
        var identity: FileIdentity
        var header: [UInt8]
        var reading: HistoryLog.Reading
        var state: HistoryState
    }

    private let lock = NSLock()
    private var table: [String: Entry] = [:]
    private let capacity = 4096

    enum Failure: Error {
        case read(Errno)
        case format(HistoryLog.ReadError)

        func documentError(_ name: String) -> DocumentError {
            switch self {
            case .read(let error): return .system("read the revision log of \(name)", error)
            case .format(.notALog): return .unreadable(name: name, reason: "damaged", message: "its revision log is not one (no header): move .canvas-revisions/\(name) away to start a new history")
            case .format(.newerVersion(let version)):
                return .unreadable(name: name, reason: "damaged", message: "its revision log is of format \(version), written by a newer canvas bridge")
            case .format(.damaged(let offset)):
                return .unreadable(name: name, reason: "damaged",
                                   message: "its revision log is damaged at byte \(offset) (a record there fails its checksum, with more after it): nothing is read past it or changed; move .canvas-revisions/\(name) away to start a new history")
            case .format(.tooLarge(let size)):
                return .unreadable(name: name, reason: "damaged", message: "its revision log is \(size) bytes, more than any canvasd writes")
            }
        }
    }

    func state(of log: FileDescriptor, for key: String) throws(Failure) -> HistoryState {
        let stat: Stat
        do {
            stat = try Errno.rethrowing { try log.stat() }
        } catch {
            throw .read(error)
        }
        guard stat.size <= HistoryLog.maxLogBytes else { throw .format(.tooLarge(stat.size)) }
        let known = lock.withLock { table[key] }
        // The same log, grown (or as it was): only what was added since is read. Another file
        // (a log written anew, or copied over this one in place: its header's salt differs) is
        // read whole, as is one whose new part does not continue the chain.
        if let known, known.identity == stat.identity, known.reading.end <= stat.size,
           try read(log, from: 0, to: Int64(HistoryLog.headerSize)) == known.header {
            if known.reading.end == stat.size { return known.state }
            let bytes = try read(log, from: known.reading.end, to: stat.size)
            if case .success(let more) = HistoryLog.parse(bytes, resuming: known.reading) {
                var state = known.state
                for record in more.records { state.apply(record) }
                remember(key, Entry(identity: stat.identity, header: known.header, reading: more, state: state))
                return state
            }
        }
        let bytes = try read(log, from: 0, to: stat.size)
        switch HistoryLog.parse(bytes) {
        case .failure(let error): throw .format(error)
        case .success(let reading):
            var state = HistoryState()
            for record in reading.records { state.apply(record) }
            remember(key, Entry(identity: stat.identity, header: Array(bytes.prefix(HistoryLog.headerSize)), reading: reading, state: state))
            return state
        }
    }

    /// Forgets a log written anew (a compaction or a migration renames a new file into place).
    func forget(_ key: String) {
        lock.withLock { table[key] = nil }
    }

    private func remember(_ key: String, _ entry: Entry) {
        lock.withLock {
            if table.count >= capacity, table[key] == nil { table.removeAll(keepingCapacity: true) }
            table[key] = entry
        }
    }

    private func read(_ log: FileDescriptor, from start: Int64, to end: Int64) throws(Failure) -> [UInt8] {
        do {
            return try log.bytes(from: start, to: end)
        } catch {
            throw .read(error)
        }
    }
}

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

    /// Takes the lock (waiting for it, or, with `wait` false, returning nil when another holds
    /// it) and opens the log: cutting a torn tail off, migrating an older layout, or starting an
    /// empty log where there is none.
    init?(_ history: RevisionHistory, wait: Bool, migrate: () throws -> [HistoryRecord]) throws(DocumentError) {
        self.history = history
        let name = history.name
        guard let taken = try Self.takeLock(history, wait: wait) else { return nil }
        held = taken
        do {
            if (try? history.directory.stat(HistoryLog.fileName)) == nil {
                if try history.lostItsLog() { throw RevisionHistory.logLost(name) }
                try Self.writeWhole(history, try migrate())
                // The log in place, an older layout's files are nobody's: they go now, so that none
                // of them is left sharing the document's inode.
                for file in try history.directory.names() where LegacyHistory.isLegacyName(file) {
                    try history.directory.remove(file)
                }
            }
            guard try history.directory.stat(HistoryLog.fileName)?.isRegularFile == true else {
                throw DocumentError.unreadable(name: name, reason: "damaged", message: "its revision log is not a regular file")
            }
            log = try history.directory.openForReadingAndWriting(HistoryLog.fileName)
            let (reading, size) = try Self.readLog(log, name)
            var state = HistoryState()
            for record in reading.records { state.apply(record) }
            self.state = state
            end = reading.end
            chain = reading.chain
            if reading.damagedTail || reading.end < size {
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

    /// The whole log, parsed, and its size on disk.
    private static func readLog(_ log: FileDescriptor, _ name: String) throws -> (HistoryLog.Reading, Int64) {
        let size = try Errno.rethrowing { try log.stat() }.size
        guard size <= HistoryLog.maxLogBytes else { throw HistoryCache.Failure.format(.tooLarge(size)).documentError(name) }
        switch HistoryLog.parse(try log.bytes(from: 0, to: size)) {
        case .failure(let error): throw HistoryCache.Failure.format(error).documentError(name)
        case .success(let reading): return (reading, size)
        }
    }

    deinit { close() }

    private var closed = false

    func close() {
        guard !closed else { return }
        closed = true
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
            let framed = HistoryLog.frame(record, after: next)
            bytes += framed.bytes
            next = framed.chain
        }
        guard end + Int64(bytes.count) <= HistoryLog.maxLogBytes - Int64(HistoryLog.maxTornBytes) else {
            throw .unreadable(name: history.name, reason: "tooLarge",
                              message: "its history's log would pass \(HistoryLog.maxLogBytes >> 20) MiB, more than canvasd reads; nothing was written (keep fewer revisions: --keep-revisions)")
        }
        do {
            _ = try Errno.rethrowing { try log.writeAll(toAbsoluteOffset: end, bytes) }
            if durable { try Directory.check { fdatasync(log.rawValue) } }
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
    func compactIfLong(_ cache: HistoryCache) {
        // Live: a record a revision, a seal a line, the identity. Compacted once most of the log
        // is about the past, however many revisions are kept: waiting for eight records a kept
        // revision let a log with many kept grow past what a reader reads.
        let live = state.revisions.count + state.lines.count + 2
        guard state.records >= HistoryState.compactionRecords, state.records >= 2 * live else { return }
        var records = [HistoryRecord.base(next: state.next)]
        // Each renamed long ago: a temporary name written again would read as a rename pending.
        records += state.kept.map { record in
            var settled = record
            settled.temporary = nil
            return settled
        }
        if let current = state.current, state.revisions[current.revision] != nil {
            records.append(.identity(current.revision, document: current.document))
        }
        for (line, file) in state.lines.sorted(by: { $0.key < $1.key }) where state.neededLines[line] != nil {
            records.append(.seal(line, file))
        }
        do {
            try Self.writeWhole(history, records)
            let reopened = try history.directory.openForReadingAndWriting(HistoryLog.fileName)
            try? log.close()
            log = reopened
            let (reading, _) = try Self.readLog(log, history.name)
            var state = HistoryState()
            for record in reading.records { state.apply(record) }
            (self.state, end, chain) = (state, reading.end, reading.chain)
            cache.forget(history.directory.path)
        } catch {
            // Not compacted: the long log is still whole and right.
        }
    }
}

extension FileDescriptor {
    /// The bytes from `start` up to `end`, or up to the file's end if it is shorter now (a log
    /// is read up to where it was when its size was taken).
    func bytes(from start: Int64, to end: Int64) throws(Errno) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: Int(max(0, end - start)))
        var done = 0
        while done < bytes.count {
            let count = try read(at: start + Int64(done), into: &bytes[done...])
            if count == 0 { break }
            done += count
        }
        return Array(bytes[..<done])
    }

    private func read(at offset: Int64, into slice: inout ArraySlice<UInt8>) throws(Errno) -> Int {
        try Errno.rethrowing { try slice.withUnsafeMutableBytes { try read(fromAbsoluteOffset: offset, into: $0) } }
    }
}

extension Directory {
    /// Opens the existing file `name` for reading and writing, never following a link.
    func openForReadingAndWriting(_ name: String) throws(Errno) -> FileDescriptor {
        FileDescriptor(rawValue: try Self.check {
            openat(descriptor.rawValue, name, O_RDWR | O_NOFOLLOW | O_CLOEXEC)
        })
    }
}

extension UInt8 {
    var isASCIILetterOrDigit: Bool {
        (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(self) || (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(self)
            || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(self)
    }
}
