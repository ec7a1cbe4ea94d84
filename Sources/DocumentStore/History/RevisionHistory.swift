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
        defer { try? log.close() }
        let stat: Stat
        do {
            stat = try Errno.rethrowing { try log.stat() }
        } catch {
            // Not "not a regular file": a log replaced by another machine's compaction since it
            // was opened gives ESTALE here, which a read retries.
            throw .system("read the revision log of \(name)", error)
        }
        guard stat.isRegularFile else {
            throw .unreadable(name: name, reason: "damaged", message: "its revision log is not a regular file")
        }
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
