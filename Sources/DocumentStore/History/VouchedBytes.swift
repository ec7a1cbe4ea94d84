import Foundation

/// Bytes this process knows to hash to a SHA-256: files it wrote or hashed itself, each as it
/// was then (device, inode, size, times) and up to a length.
///
/// A history's records say which file holds which revision's bytes (the document file as an
/// identity, a line file as a seal), with the sha256 those bytes have. Another program can
/// write such records too, checksums and all; a stat that matches a record proves nothing about
/// the bytes. So a record is believed once this process has seen the bytes hash to what it
/// says: at most one whole hash a file per process (a save's own file is known from its
/// writing, not hashed again), and never an answer that names a sha256 the bytes do not have.
final class VouchedBytes: @unchecked Sendable {
    private struct Entry: Equatable {
        let file: FileSnapshot
        let length: Int64
        let sha256: String
    }

    private let lock = NSLock()
    /// By file (a document's name, or a line's path in its history): the lengths vouched for in
    /// the file as it is now (a line holds several revisions, each a prefix of it).
    private var entries: [String: [Entry]] = [:]
    private var order: [String] = []
    /// Files remembered at most, the oldest forgotten first (a forgotten one is hashed again).
    static let capacity = 4096
    /// Lengths remembered a file at most.
    static let lengthsPerFile = 16

    /// Whether `file`'s first `length` bytes, as the file is now, were seen to hash to `sha256`.
    func holds(_ key: String, _ file: FileSnapshot, length: Int64, sha256: String) -> Bool {
        lock.withLock { entries[key]?.contains(Entry(file: file, length: length, sha256: sha256)) ?? false }
    }

    /// Says that `file`'s first `length` bytes hash to `sha256` (this process wrote or hashed
    /// them). A file whose snapshot changed forgets what was known of it before.
    func vouch(_ key: String, _ file: FileSnapshot, length: Int64, sha256: String) {
        let entry = Entry(file: file, length: length, sha256: sha256)
        lock.withLock {
            var known = (entries[key] ?? []).filter { $0.file == file && $0.length != length }
            if entries[key] == nil {
                order.append(key)
                if order.count > Self.capacity { entries[order.removeFirst()] = nil }
            }
            known.append(entry)
            entries[key] = Array(known.suffix(Self.lengthsPerFile))
        }
    }

    /// The key of a line file of `name`'s history.
    static func line(_ name: String, _ line: Int) -> String { "\(name)\u{0}\(RevisionHistory.lineName(line))" }
}
