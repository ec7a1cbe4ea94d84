import Foundation
import SystemPackage

/// Whether a document's revision history is the history of the file now under its name.
///
/// The store keeps the current file under its own number from its first save on, so a current
/// file that no entry is the same file as is one the history never saw: a document copied or
/// uploaded under the name of one deleted from the folder, or put there by hand. It starts a
/// history of its own at revision 1: the old revisions are not its, and serving them as its
/// revision 1, or restoring them, would bring a deleted document back. One exception keeps a
/// folder copied without its hard links (or restored from a backup) working: a current file
/// with the bytes of the newest entry continues that history, as before.
///
/// The next writer moves an ended history out of reach, under the document's lock, into
/// `.canvas-revisions/.ended/` (never read by the store; delete it at will).
extension DocumentStore {
    static let endedFolderName = ".ended"

    /// The kept revisions of `name`'s history that are the current file's: all of them, or none
    /// when the file starts a new history.
    func lineage(_ file: OpenFile, _ name: String, _ history: RevisionHistory?,
                 _ listing: RevisionHistory.Listing) throws(DocumentError) -> [RevisionHistory.Kept] {
        let all = listing.kept
        guard let history, let newest = all.last, listing.revision(of: file.stat.identity, size: file.stat.size) == nil,
              listing.committedPrefix(of: file.stat.identity, size: file.stat.size) == nil else { return all }
        return try sameBytes(file, as: newest, in: history, name) ? all : []
    }

    /// Whether the file has the newest revision's bytes (sizes first: most files differ there).
    private func sameBytes(_ file: OpenFile, as newest: RevisionHistory.Kept, in history: RevisionHistory,
                           _ name: String) throws(DocumentError) -> Bool {
        guard newest.length == file.stat.size else { return false }
        if let record = newest.record { return try hash(file, name) == record.sha256 }
        guard let kept = try? openRegular(history.directory, newest.holder.name, document: name) else { return false }
        return try hash(kept, name) == hash(file, name)
    }

    /// Under the document's write lock: when the current file starts a new history, moves the
    /// old one out of reach and returns a fresh (empty) history; else returns `history`.
    func endForeignHistory(_ name: String, _ current: OpenFile, _ history: RevisionHistory) throws(DocumentError) -> RevisionHistory {
        let listing = try listing(history, name)
        guard !listing.kept.isEmpty, try lineage(current, name, history, listing).isEmpty else { return history }
        do {
            let ended = try revisionsRoot.directory(Self.endedFolderName, create: true)
            let stamp = "\(name).\(Int(Date().timeIntervalSince1970)).\(UInt32.random(in: 0...UInt32.max))"
            try revisionsRoot.rename(name, to: ended, as: stamp)
            try revisionsRoot.sync()
        } catch {
            throw .system("set aside the revisions of the deleted document \(name)", error)
        }
        guard let fresh = try self.history(name, create: true) else {
            throw .io(operation: "open the revisions of \(name)", message: "missing")
        }
        return fresh
    }
}
