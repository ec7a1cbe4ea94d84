import Foundation
#if canImport(Glibc)
import Glibc
#endif
import SystemPackage

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
        /// The log is not a regular file (a writer reads none but one).
        case notRegular

        func documentError(_ name: String) -> DocumentError {
            switch self {
            case .read(let error): return .system("read the revision log of \(name)", error)
            case .notRegular: return .unreadable(name: name, reason: "damaged", message: "its revision log is not a regular file")
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
        let stat = try status(of: log)
        guard stat.size <= HistoryLog.maxLogBytes else { throw .format(.tooLarge(stat.size)) }
        let known = lock.withLock { table[key] }
        // The same log, grown (or as it was): only what was added since is read. Another file
        // (a log written anew, or copied over this one in place: its header's salt differs) is
        // read whole, as is one whose new part does not continue the chain.
        if let known, known.identity == stat.identity, known.reading.end <= stat.size,
           try read(log, from: 0, to: Int64(HistoryLog.headerSize)) == known.header {
            if known.reading.end == stat.size { return known.state }
            if let extended = extend(known, with: try read(log, from: known.reading.end, to: stat.size), for: key) { return extended.state }
        }
        return try whole(try read(log, from: 0, to: stat.size), stat, for: key).state
    }

    /// The log as its writer reads it on taking the lock: all of it, with where it ends and
    /// the file's status. A writer must not append after damage, so unlike `state` it takes
    /// nothing on trust: the bytes read before are checked to be the same (their checksum chain
    /// ends where it ended, as it did; hashing, not decoding), and only the records added since
    /// are decoded. Decoding every record at every save made a save's cost grow with its
    /// document's history (under 16 clients' load, most of canvasd's time).
    func writing(_ log: FileDescriptor, for key: String) throws(Failure) -> (reading: HistoryLog.Reading, state: HistoryState, stat: Stat) {
        let stat = try status(of: log)
        guard stat.isRegularFile else { throw .notRegular }
        guard stat.size <= HistoryLog.maxLogBytes else { throw .format(.tooLarge(stat.size)) }
        let bytes = try read(log, from: 0, to: stat.size)
        if let known = lock.withLock({ table[key] }), known.identity == stat.identity, known.reading.end <= stat.size,
           HistoryLog.continues(bytes, to: known.reading.end, chain: known.reading.chain),
           let extended = extend(known, with: Array(bytes[Int(known.reading.end)...]), for: key) {
            return (extended.reading, extended.state, stat)
        }
        let (reading, state) = try whole(bytes, stat, for: key)
        return (reading, state, stat)
    }

    private func status(of log: FileDescriptor) throws(Failure) -> Stat {
        do {
            return try Errno.rethrowing { try log.stat() }
        } catch {
            throw .read(error)
        }
    }

    /// `known` with the records of `added` (the bytes past its end) applied, remembered; nil
    /// when they do not continue its chain.
    private func extend(_ known: Entry, with added: [UInt8], for key: String) -> (reading: HistoryLog.Reading, state: HistoryState)? {
        guard case .success(let more) = HistoryLog.parse(added, resuming: known.reading) else { return nil }
        var state = known.state
        for record in more.records { state.apply(record) }
        remember(key, Entry(identity: known.identity, header: known.header, reading: more, state: state))
        return (more, state)
    }

    /// The whole log `bytes` read, remembered.
    private func whole(_ bytes: [UInt8], _ stat: Stat, for key: String) throws(Failure) -> (reading: HistoryLog.Reading, state: HistoryState) {
        switch HistoryLog.parse(bytes) {
        case .failure(let error): throw .format(error)
        case .success(let reading):
            var state = HistoryState()
            for record in reading.records { state.apply(record) }
            remember(key, Entry(identity: stat.identity, header: Array(bytes.prefix(HistoryLog.headerSize)), reading: reading, state: state))
            return (reading, state)
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
