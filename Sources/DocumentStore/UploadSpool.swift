import Glibc
import SystemPackage

/// The bytes of one upload as they arrive, kept in an anonymous temporary file instead of in
/// memory: four uploads of 32 MiB under way held 128 MiB of the server's memory, and the check
/// at the commit wrote them all out to a file anyway. The file is unlinked as soon as it is
/// made, so it has no name anyone could open, never appears in the document folder, and goes
/// with the last descriptor, whatever ends the upload (commit, abort, expiry, a crash).
public final class UploadSpool: Sendable {
    let file: FileDescriptor

    /// In `$TMPDIR`, or `/tmp`.
    public init() throws(DocumentError) {
        let folder = getenv("TMPDIR").map { String(cString: $0) }.flatMap { $0.isEmpty ? nil : $0 } ?? "/tmp"
        var template = Array("\(folder)/canvasd-upload-XXXXXX".utf8CString)
        let raw = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
        guard raw >= 0 else { throw .system("create a temporary file for an upload in \(folder)", Errno(rawValue: errno)) }
        template.withUnsafeBufferPointer { _ = unlink($0.baseAddress!) }
        file = FileDescriptor(rawValue: raw)
    }

    deinit { try? file.close() }

    /// Gives the file's space back now, not when the last reference goes: a commit calls it
    /// before its reply, so a client told the upload is done finds the room free again.
    public func discard() {
        _ = ftruncate(file.rawValue, 0)
    }

    /// Writes `frames`, one after the other, from `offset` on.
    public func write(_ frames: [[UInt8]], at offset: Int) throws(DocumentError) {
        var position = Int64(offset)
        for frame in frames {
            do throws(Errno) {
                _ = try Errno.rethrowing { try file.writeAll(toAbsoluteOffset: position, frame) }
            } catch {
                throw .system("write an upload's part to its temporary file", error)
            }
            position += Int64(frame.count)
        }
    }

    /// The hex SHA-256 of what was written, read back in pieces so memory stays flat.
    public func sha256() throws(DocumentError) -> String {
        var hasher = SHA256Hasher()
        try file.forEachPiece(from: 0, reading: "read an upload back from its temporary file") { piece in
            piece.withUnsafeBytes { hasher.update($0) }
        }
        return hasher.finish()
    }

    /// The bytes at `offset`, at most `count` of them (fewer at the end).
    func bytes(at offset: Int64, count: Int) throws(DocumentError) -> [UInt8] {
        var buffer = [UInt8](repeating: 0, count: count)
        do {
            let read = try file.read(at: offset, into: &buffer)
            return Array(buffer[0..<read])
        } catch {
            throw .system("read an upload back from its temporary file", error)
        }
    }

    /// How many bytes the file holds.
    func size() throws(DocumentError) -> Int64 {
        var status = stat()
        guard fstat(file.rawValue, &status) == 0 else {
            throw .system("inspect an upload's temporary file", Errno(rawValue: errno))
        }
        return Int64(status.st_size)
    }
}
