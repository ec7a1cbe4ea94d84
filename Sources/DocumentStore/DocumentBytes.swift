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
    /// (revision 1, the original, always is). Takes no lock, like every read.
    public func bytes(_ name: String, revision: Int? = nil, offset: Int64, length: Int) throws(DocumentError) -> DocumentBytes {
        for _ in 0..<Self.readAttempts {
            let ((size, piece), current, sha256, kept) = try reading(name) { (file) throws(DocumentError) in
                (file.stat.size, try Self.read(file, name, offset: offset, length: length, size: file.stat.size))
            }
            guard let revision, revision != current else {
                return DocumentBytes(name: name, revision: current, size: size, sha256: sha256, offset: offset, bytes: piece)
            }
            guard let entry = kept.first(where: { $0.revision == revision }), revision < current,
                  let history = try history(name, create: false) else {
                throw .revisionNotFound(name: name, revision: revision)
            }
            // The file holding it may have been replaced by a longer one of its line since the
            // listing (a save extended it): then look again.
            guard let file = try? openRegular(history.directory, entry.holder.name, document: name),
                  file.stat.identity == entry.holder.stat.identity, file.stat.size >= entry.length else { continue }
            let digest: String
            if let record = entry.record { digest = record.sha256 } else { digest = try hash(file, name) }
            return DocumentBytes(name: name, revision: revision, size: entry.length, sha256: digest,
                                 offset: offset, bytes: try Self.read(file, name, offset: offset, length: length, size: entry.length))
        }
        throw .unreadable(name: name, reason: "busy", message: "it was saved over \(Self.readAttempts) times while being read; try again")
    }

    /// Up to `length` bytes at `offset` of the first `size` bytes of the file.
    private static func read(_ file: OpenFile, _ name: String, offset: Int64, length: Int, size: Int64) throws(DocumentError) -> [UInt8] {
        let count = Int(max(0, min(Int64(length), size - offset)))
        guard count > 0 else { return [] }
        var bytes = [UInt8](repeating: 0, count: count)
        var done = 0
        while done < count {
            let read: Int
            do throws(Errno) {
                read = try Errno.rethrowing {
                    try bytes.withUnsafeMutableBytes { buffer in
                        try file.descriptor.read(fromAbsoluteOffset: offset + Int64(done),
                                                 into: UnsafeMutableRawBufferPointer(rebasing: buffer[done...]))
                    }
                }
            } catch {
                throw .system("read \(name)", error)
            }
            if read == 0 { break }   // shorter than its stat said: a file being replaced; hash check catches it
            done += read
        }
        return Array(bytes[..<done])
    }
}
