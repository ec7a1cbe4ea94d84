import SystemPackage

/// A piece of one revision's bytes, as `document.get` sends it.
public struct DocumentBytes: Sendable {
    public let name: String
    public let revision: Int
    /// The whole revision's size and SHA-256, whatever piece this is.
    public let size: Int64
    public let sha256: String
    public let offset: Int64
    public let bytes: [UInt8]
}

extension DocumentStore {
    /// `length` bytes from `offset` of the current revision, or of `revision` while it is kept
    /// (revision 1, the original, always is), also of a document deleted from the folder. Takes
    /// no lock, like every read (but settles a document another program changed, see `reading`).
    public func bytes(_ name: String, revision: Int? = nil, offset: Int64, length: Int) throws(DocumentError) -> DocumentBytes {
        try againWhenStale { () throws(DocumentError) in try bytesOnce(name, revision: revision, offset: offset, length: length) }
    }

    private func bytesOnce(_ name: String, revision: Int?, offset: Int64, length: Int) throws(DocumentError) -> DocumentBytes {
        let state: HistoryState
        do throws(DocumentError) {
            let ((size, piece), current, sha256, _) = try reading(name) { (file) throws(DocumentError) in
                (file.stat.size, try Self.read(file, name, offset: offset, length: length, size: file.stat.size))
            }
            guard let revision, revision != current else {
                return DocumentBytes(name: name, revision: current, size: size, sha256: sha256, offset: offset, bytes: piece)
            }
            guard case .log(let seen) = try seen(try history(name, create: false)), revision < current else {
                throw DocumentError.revisionNotFound(name: name, revision: revision)
            }
            state = seen
        } catch where revision != nil {
            // No document at the name now (deleted, or no plain file there): its history is
            // still served.
            guard let seen = try historyWithoutDocument(name, after: error) else { throw error }
            state = seen
        }
        guard let revision, let record = state.revisions[revision] else {
            throw .revisionNotFound(name: name, revision: revision ?? 0)
        }
        let (size, sha256) = (record.length, record.sha256)
        let file = try openKept(name, record, state)
        return DocumentBytes(name: name, revision: revision, size: size, sha256: sha256, offset: offset,
                             bytes: try Self.read(file, name, offset: offset, length: length, size: size))
    }

    /// Up to `length` bytes at `offset` of the first `size` bytes of the file.
    private static func read(_ file: OpenFile, _ name: String, offset: Int64, length: Int, size: Int64) throws(DocumentError) -> [UInt8] {
        let count = max(0, min(Int64(length), size - offset))
        guard count > 0 else { return [] }
        do {
            // Shorter than its stat said: a file being replaced; the hash check catches it.
            return try file.descriptor.bytes(from: offset, to: offset + count)
        } catch {
            throw .system("read \(name)", error)
        }
    }
}
