import CFileCopy
#if canImport(Glibc)
import Glibc
#endif
import SystemPackage

/// Copies the beginning of one file into an empty one with the least work the file system
/// allows: a reflink (`FICLONE`: XFS, Btrfs) shares the blocks and copies nothing; else
/// `copy_file_range` copies inside the kernel (NFS and some others do it on the server, ext4
/// reads and writes the page cache without a trip through user space); else a read/write loop.
/// Each step falls back only on the errors that say "not here" (no support, another file
/// system), never on an I/O error.
enum FileCopy {
    /// Copies bytes `0..<length` of `source` into `out`, empty, and leaves `out`'s position at
    /// `length`, where the caller appends.
    static func copyPrefix(_ source: FileDescriptor, length: Int64, to out: FileDescriptor,
                           _ cost: inout SaveCost) throws(Errno) {
        defer { _ = lseek(out.rawValue, off_t(length), SEEK_SET) }
        if length == 0 { return }
        if canvas_clone_file(out.rawValue, source.rawValue) == 0 {
            // The clone is the whole file as it is now (appended to in place, it may have grown
            // past the revision): cut it back to the revision's length.
            try Directory.check { ftruncate(out.rawValue, off_t(length)) }
            cost.bytesCloned += length
            cost.method = .clone
            return
        } else if !notSupported(errno) {
            throw Errno(rawValue: errno)
        }
        var from: Int64 = 0, to: Int64 = 0
        while from < length {
            let copied = canvas_copy_range(source.rawValue, &from, out.rawValue, &to, UInt64(length - from))
            if copied > 0 {
                cost.bytesCopied += copied
                cost.method = .copyFileRange
                continue
            }
            if copied == 0 { throw .ioError }   // the source is shorter than the revision it holds
            if errno == EINTR { continue }
            guard notSupported(errno) else { throw Errno(rawValue: errno) }
            break
        }
        if from < length {
            try readWrite(source, from: from, to: length, into: out, at: to, &cost)
        }
    }

    /// Copies bytes `start..<end` of `source` to `out` at `target` (a save's increment, from
    /// the new file onto the end of its line in the history).
    static func copyRange(_ source: FileDescriptor, from start: Int64, to end: Int64, into out: FileDescriptor, at target: Int64,
                          _ cost: inout SaveCost) throws(Errno) {
        var from = start, to = target
        while from < end {
            let copied = canvas_copy_range(source.rawValue, &from, out.rawValue, &to, UInt64(end - from))
            if copied > 0 { continue }
            if copied == 0 { throw .ioError }
            if errno == EINTR { continue }
            guard notSupported(errno) else { throw Errno(rawValue: errno) }
            try readWrite(source, from: from, to: end, into: out, at: to, &cost)
            return
        }
    }

    private static func readWrite(_ source: FileDescriptor, from start: Int64, to end: Int64, into out: FileDescriptor, at target: Int64,
                                  _ cost: inout SaveCost) throws(Errno) {
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        var offset = start, position = target
        while offset < end {
            let want = Int(min(Int64(buffer.count), end - offset))
            let count = try source.read(at: offset, into: &buffer, count: want)
            if count == 0 { throw .ioError }
            _ = try Errno.rethrowing { try buffer.withUnsafeBytes { try out.writeAll(toAbsoluteOffset: position, UnsafeRawBufferPointer(rebasing: $0[0..<count])) } }
            offset += Int64(count)
            position += Int64(count)
            cost.bytesCopied += Int64(count)
        }
        cost.method = .readWrite
    }

    /// Errors by which a call says the file system (or the kernel) does not offer it here.
    private static func notSupported(_ code: Int32) -> Bool {
        [EOPNOTSUPP, ENOTSUP, EXDEV, EINVAL, ENOSYS, ENOTTY].contains(code)
    }
}

/// What one save read and wrote: the figures `canvasbench save-cost` prints.
public struct SaveCost: Sendable, Equatable {
    public enum Method: String, Sendable {
        case none, clone, copyFileRange = "copy_file_range", readWrite = "read/write"
    }

    /// Bytes fed to SHA-256 for the new revision's hash (and, on a document's first save, for
    /// the record of the revision it extends: one whole hash per document, once).
    public var bytesHashed: Int64 = 0
    /// Bytes the save copied from the revision before it (the kernel's or its own copy).
    public var bytesCopied: Int64 = 0
    /// Bytes shared with the revision before it by a reflink: nothing copied.
    public var bytesCloned: Int64 = 0
    /// Bytes the save wrote itself (an increment, a container's metadata, a whole rewrite).
    public var bytesWritten: Int64 = 0
    /// How the bytes shared with the revision before it were copied.
    public var method: Method = .none
    /// Time spent writing the new file (copying, appending), flushing it (`fsync`), and keeping
    /// it (its bytes in the history's line, the log's records, the rename, the folders' flushes).
    public var writing: Duration = .zero
    public var flushing: Duration = .zero
    public var keeping: Duration = .zero

    public init() {}

    /// Adds the bytes `other` hashed, copied and cloned (work done for the same save).
    mutating func add(_ other: SaveCost) {
        bytesHashed += other.bytesHashed
        bytesCopied += other.bytesCopied
        bytesCloned += other.bytesCloned
    }
}

extension FileDescriptor {
    /// Reads up to `count` bytes at `offset` into the start of `buffer`.
    func read(at offset: Int64, into buffer: inout [UInt8], count: Int) throws(Errno) -> Int {
        let result = buffer.withUnsafeMutableBytes { raw in
            Result { () throws(Errno) -> Int in
                try Errno.rethrowing { try self.read(fromAbsoluteOffset: offset, into: UnsafeMutableRawBufferPointer(rebasing: raw[0..<count])) }
            }
        }
        return try result.get()
    }
}
