import CCrypto
import Foundation
import SystemPackage

/// SHA-256 of bytes fed in pieces (OpenSSL's digest, which uses the CPU's SHA instructions).
struct SHA256Hasher: ~Copyable {
    private let context: OpaquePointer

    init() {
        guard let context = EVP_MD_CTX_new(), EVP_DigestInit_ex(context, EVP_sha256(), nil) == 1 else {
            fatalError("OpenSSL could not set up SHA-256")
        }
        self.context = context
    }

    deinit { EVP_MD_CTX_free(context) }

    mutating func update(_ bytes: UnsafeRawBufferPointer) {
        guard let base = bytes.baseAddress, bytes.count > 0 else { return }
        EVP_DigestUpdate(context, base, bytes.count)
    }

    mutating func update(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { update($0) }
    }

    /// The digest in lowercase hex.
    consuming func finish() -> String {
        var digest = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var length: UInt32 = 0
        EVP_DigestFinal_ex(context, &digest, &length)
        return digest.prefix(Int(length)).map { byte in
            let hex = String(byte, radix: 16)
            return byte < 16 ? "0" + hex : hex
        }.joined()
    }
}

/// The SHA-256 of files the store reads, remembered by file identity.
///
/// The store never changes a file it has made (a save writes a new one and renames it into
/// place, revisions are links to those), so a file's identity, size and times name its bytes,
/// with one catch: a freed inode number is soon given to a new file, which may have the same
/// size and, within one tick of the file system's coarse clock, the same times. So only a file
/// whose last change is some seconds old is remembered: any file that later reuses its inode
/// is changed after that moment, and so has other times.
final class ContentHashes: @unchecked Sendable {
    // @unchecked: the table is only touched under `lock`.
    private struct Key: Hashable {
        let identity: FileIdentity
        let size: Int64
        let changed: timespec.Key
        let modified: timespec.Key
    }

    private let lock = NSLock()
    private var table: [Key: String] = [:]
    private var order: [Key] = []
    private let capacity = 4096
    /// How old a change must be for its file to be remembered: far more than a clock tick.
    private let settled: Int = 2

    private static func key(_ stat: Stat) -> Key {
        Key(identity: stat.identity, size: stat.size, changed: stat.rawValue.st_ctim.key, modified: stat.rawValue.st_mtim.key)
    }

    /// The hash of the open file `file`, read from its start unless it is remembered. With a
    /// `budget`, reading stops once it has passed, with `.timedOut`: a file can be far larger
    /// than the disk space it takes (a sparse file), and hashing it must not hold a worker for
    /// minutes.
    func hash(_ file: FileDescriptor, _ stat: Stat, budget: Duration? = nil) throws(Errno) -> String {
        let key = Self.key(stat)
        if let known = lock.withLock({ table[key] }) { return known }
        let deadline = budget.map { ContinuousClock.now + $0 }
        var hasher = SHA256Hasher()
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        var offset: Int64 = 0
        while true {
            if let deadline, ContinuousClock.now >= deadline { throw .timedOut }
            let count = try file.read(at: offset, into: &buffer)
            if count == 0 { break }
            buffer.withUnsafeBytes { hasher.update(UnsafeRawBufferPointer(rebasing: $0[0..<count])) }
            offset += Int64(count)
        }
        let digest = hasher.finish()
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        let changed = max(stat.rawValue.st_ctim.tv_sec, stat.rawValue.st_mtim.tv_sec)
        if Int(now.tv_sec) - Int(changed) >= settled {
            lock.withLock {
                if table.updateValue(digest, forKey: key) == nil {
                    order.append(key)
                    if order.count > capacity { table[order.removeFirst()] = nil }
                }
            }
        }
        return digest
    }
}

extension timespec {
    struct Key: Hashable {
        let seconds: Int
        let nanoseconds: Int
    }

    var key: Key { Key(seconds: Int(tv_sec), nanoseconds: Int(tv_nsec)) }
}

extension Errno {
    /// Runs one of swift-system's calls, which throw only `Errno` but say `throws`.
    static func rethrowing<T>(_ body: () throws -> T) throws(Errno) -> T {
        do {
            return try body()
        } catch let error as Errno {
            throw error
        } catch {
            throw .ioError
        }
    }
}

extension FileDescriptor {
    /// Hands the file from `offset` to its end to `body` in pieces of 1 MiB, so memory stays flat
    /// however large it is. A failed read is `.system(operation, errno)`.
    func forEachPiece(from offset: Int64, reading operation: String,
                      _ body: (ArraySlice<UInt8>) throws(DocumentError) -> Void) throws(DocumentError) {
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        var position = offset
        while true {
            let count: Int
            do {
                count = try read(at: position, into: &buffer)
            } catch {
                throw .system(operation, error)
            }
            if count == 0 { return }
            try body(buffer[0..<count])
            position += Int64(count)
        }
    }

    /// Reads up to `buffer.count` bytes at `offset` (without moving the file position).
    func read(at offset: Int64, into buffer: inout [UInt8]) throws(Errno) -> Int {
        let result = buffer.withUnsafeMutableBytes { raw in
            Result { () throws(Errno) -> Int in try Errno.rethrowing { try self.read(fromAbsoluteOffset: offset, into: raw) } }
        }
        return try result.get()
    }
}
