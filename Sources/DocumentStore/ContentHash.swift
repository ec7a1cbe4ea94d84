import CCrypto
import Foundation
import SystemPackage

/// SHA-256 of bytes fed in pieces (OpenSSL's, which uses the CPU's SHA instructions), which can
/// say where it stands (`midstate`) and start again from there: a revision's record keeps the
/// state at its end, so the save that appends to it hashes what it appends, not the document.
struct SHA256Hasher: ~Copyable {
    private var context = SHA256_CTX()
    /// Bytes fed since `init()` or `init(resuming:)`: what this hasher read.
    private(set) var bytesFed: Int64 = 0

    init() {
        guard SHA256_Init(&context) == 1 else { fatalError("OpenSSL could not set up SHA-256") }
    }

    /// Continues a hash whose first `state.length` bytes were hashed already.
    init(resuming state: SHA256Midstate) {
        self.init()
        withUnsafeMutableBytes(of: &context.h) { raw in
            for (index, word) in state.words.enumerated() { raw.storeBytes(of: word, toByteOffset: index * 4, as: UInt32.self) }
        }
        let bits = UInt64(state.length) &* 8
        context.Nl = UInt32(truncatingIfNeeded: bits)
        context.Nh = UInt32(truncatingIfNeeded: bits >> 32)
        context.num = 0
    }

    mutating func update(_ bytes: UnsafeRawBufferPointer) {
        guard let base = bytes.baseAddress, bytes.count > 0 else { return }
        SHA256_Update(&context, base, bytes.count)
        bytesFed += Int64(bytes.count)
    }

    mutating func update(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { update($0) }
    }

    /// The state after the last whole 64-byte block fed: what `init(resuming:)` continues from,
    /// once the bytes after that block (fewer than 64) are fed again.
    var midstate: SHA256Midstate {
        var words: [UInt32] = []
        withUnsafeBytes(of: context.h) { raw in
            for index in 0..<8 { words.append(raw.load(fromByteOffset: index * 4, as: UInt32.self)) }
        }
        let bits = UInt64(context.Nh) << 32 | UInt64(context.Nl)
        return SHA256Midstate(words: words, length: Int64(bits / 8) - Int64(context.num))
    }

    /// The digest in lowercase hex.
    consuming func finish() -> String { finishBytes().hex }

    /// The digest of what was fed so far, the hasher left as it is: a state resumed from a
    /// record is checked against the digest the record names before anything is built on it.
    borrowing func digestSoFar() -> String {
        var copy = context
        var digest = [UInt8](repeating: 0, count: Int(SHA256_DIGEST_LENGTH))
        SHA256_Final(&digest, &copy)
        return digest.hex
    }

    /// The digest's 32 bytes.
    consuming func finishBytes() -> [UInt8] {
        var digest = [UInt8](repeating: 0, count: Int(SHA256_DIGEST_LENGTH))
        SHA256_Final(&digest, &context)
        return digest
    }
}

/// SHA-256's running state at a 64-byte boundary: eight words and how many bytes they cover.
struct SHA256Midstate: Equatable, Sendable {
    let words: [UInt32]
    /// A multiple of 64.
    let length: Int64

    /// The words as 64 hex digits (the length is kept beside it, as the revision's).
    var hex: String {
        words.flatMap { word in [UInt8(word >> 24), UInt8(word >> 16 & 0xFF), UInt8(word >> 8 & 0xFF), UInt8(word & 0xFF)] }.hex
    }

    init(words: [UInt32], length: Int64) {
        self.words = words
        self.length = length
    }

    /// The state of the first `length` bytes rounded down to a block, from `hex` (64 digits).
    init?(hex: Substring, coveringAtMost length: Int64) {
        // Hex digits only: `UInt32(_:radix:)` alone would take a sign (`+2016f14…`).
        guard hex.utf8.count == 64, hex.utf8.allSatisfy({ $0.isHexDigit }) else { return nil }
        var words: [UInt32] = []
        var index = hex.startIndex
        for _ in 0..<8 {
            let next = hex.index(index, offsetBy: 8)
            guard let word = UInt32(hex[index..<next], radix: 16) else { return nil }
            words.append(word)
            index = next
        }
        self.init(words: words, length: length - length % 64)
    }
}

extension Array where Element == UInt8 {
    public var hex: String {
        map { byte in
            let digits = String(byte, radix: 16)
            return byte < 16 ? "0" + digits : digits
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
    /// The digest and the state after the last whole block, for a first save to continue.
    private var table: [Key: (String, SHA256Midstate)] = [:]
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
        try hashWithState(file, stat, budget: budget).0
    }

    /// The hash, and SHA-256's state after the file's last whole block: what a revision's record
    /// keeps, so the first save of a document that was read before does not hash it again.
    /// `fed` says how many bytes this call read (0 when remembered).
    func hashWithState(_ file: FileDescriptor, _ stat: Stat, budget: Duration? = nil) throws(Errno) -> (String, SHA256Midstate, fed: Int64) {
        let key = Self.key(stat)
        if let known = lock.withLock({ table[key] }) { return (known.0, known.1, 0) }
        var hasher = SHA256Hasher()
        try hasher.feed(file, from: 0, deadline: budget.map { ContinuousClock.now + $0 })
        let midstate = hasher.midstate
        let fed = hasher.bytesFed
        let digest = hasher.finish()
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        let changed = max(stat.rawValue.st_ctim.tv_sec, stat.rawValue.st_mtim.tv_sec)
        if Int(now.tv_sec) - Int(changed) >= settled {
            lock.withLock {
                if table.updateValue((digest, midstate), forKey: key) == nil {
                    order.append(key)
                    if order.count > capacity { table[order.removeFirst()] = nil }
                }
            }
        }
        return (digest, midstate, fed)
    }
}

extension SHA256Hasher {
    /// Feeds the file's bytes from `start` up to `end` (its end when nil), read at offsets;
    /// past `deadline`, stops with `timedOut`.
    mutating func feed(_ file: FileDescriptor, from start: Int64, to end: Int64? = nil,
                       deadline: ContinuousClock.Instant? = nil) throws(Errno) {
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        var offset = start
        while end.map({ offset < $0 }) ?? true {
            if let deadline, ContinuousClock.now >= deadline { throw .timedOut }
            let want = end.map { Int(min(Int64(buffer.count), $0 - offset)) } ?? buffer.count
            let count = try file.read(at: offset, into: &buffer, count: want)
            if count == 0 {
                if end != nil { throw .ioError }   // shorter than the revision it holds
                break
            }
            buffer.withUnsafeBytes { update(UnsafeRawBufferPointer(rebasing: $0[0..<count])) }
            offset += Int64(count)
        }
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

extension UInt8 {
    var isLowercaseHexDigit: Bool {
        (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(self) || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains(self)
    }
    /// Either case: a midstate written by hand in capitals is still the same state.
    var isHexDigit: Bool { isLowercaseHexDigit || (UInt8(ascii: "A")...UInt8(ascii: "F")).contains(self) }
}
