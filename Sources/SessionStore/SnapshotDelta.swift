import Foundation

/// A change from one session snapshot to the next, as bytes: what the session store keeps in a
/// session's log instead of writing the whole snapshot again.
///
/// A delta is a list of "copy this range of the old snapshot" and "insert these bytes". Ranges
/// worth copying are found by a hash of 16 bytes at every 32nd offset of the old snapshot, then
/// checked byte for byte and grown as far as the two agree: a hash only suggests a range, so
/// a delta applied to its own old snapshot gives the new one exactly, whatever collides.
///
/// Written as `CBD1`, then as LEB128 numbers the version it makes, the old snapshot's length,
/// the new one's length, then 8 bytes (big-endian) of `checksum` of the new snapshot, then the
/// operations: 0, offset, length (copy) or 1, length, the bytes (insert). Anyone who can write
/// to the store can write a log entry, so `apply` checks every number against the old snapshot
/// and against the length it promises before it copies or allocates anything, and refuses a
/// delta whose result is not the one its checksum names (one applied to another old snapshot).
public enum SnapshotDelta {
    static let magic = Array("CBD1".utf8)
    /// Bytes hashed to suggest a match: long enough that the JSON's repeated punctuation rarely
    /// suggests one, short enough that a small unchanged run between two changes is still copied.
    static let key = 16
    /// The old snapshot is indexed at every `stride`-th offset: any run the two share of at least
    /// `stride + key - 1` bytes holds one indexed key, so it is found.
    static let stride = 32

    /// Why a delta was refused.
    public struct Refusal: Error, Sendable, Equatable, CustomStringConvertible {
        public let reason: String
        public var description: String { "a snapshot delta refused: \(reason)" }
        init(_ reason: String) { self.reason = reason }
    }

    /// What `make` says about a delta before it is applied: what it makes, from what.
    public struct Header: Sendable, Equatable {
        public var version: UInt64
        public var oldCount: Int
        public var newCount: Int

        public init(version: UInt64, oldCount: Int, newCount: Int) {
            self.version = version
            self.oldCount = oldCount
            self.newCount = newCount
        }
    }

    /// The delta that turns `old` into `new`, which is the session at `version`.
    public static func make(from old: [UInt8], to new: [UInt8], version: UInt64) -> [UInt8] {
        var out = magic
        appendNumber(version, to: &out)
        appendNumber(UInt64(old.count), to: &out)
        appendNumber(UInt64(new.count), to: &out)
        withUnsafeBytes(of: checksum(new).bigEndian) { out.append(contentsOf: $0) }
        old.withUnsafeBytes { old in
            new.withUnsafeBytes { new in
                var writer = OperationWriter(new: new)
                let index = Index(old)
                // A common start is found by comparing, not hashing.
                var at = sharedRun(old, 0, new, 0)
                if at > 0 { writer.copy(from: 0, count: at, endingAt: at, into: &out) }
                while at + key <= new.count {
                    guard let from = index.find(new, at, in: old) else {
                        at += 1
                        continue
                    }
                    // Grown back over what was to be inserted, and forward as far as they agree.
                    var start = at, source = from
                    while start > writer.pending && source > 0 && old[source - 1] == new[start - 1] {
                        start -= 1
                        source -= 1
                    }
                    let end = at + key + sharedRun(old, from + key, new, at + key)
                    writer.copy(from: source, count: end - start, endingAt: end, into: &out)
                    at = end
                }
                writer.finish(into: &out)
            }
        }
        return out
    }

    /// Reads a delta's header without applying it.
    public static func header(_ delta: [UInt8]) throws(Refusal) -> Header {
        var reader = Reader(bytes: delta)
        return try reader.header()
    }

    /// `old` with `delta` applied: the snapshot at the delta's version. Refused unless it was
    /// made from an `old` of this length, its result would be at most `maxCount` bytes, every
    /// operation stays inside `old` and inside the result, and the result is what was made.
    public static func apply(_ delta: [UInt8], to old: [UInt8], maxCount: Int) throws(Refusal) -> [UInt8] {
        var reader = Reader(bytes: delta)
        let header = try reader.header()
        guard header.oldCount == old.count else {
            throw Refusal("made from \(header.oldCount) bytes, applied to \(old.count)")
        }
        guard header.newCount <= maxCount else { throw Refusal("it makes \(header.newCount) bytes; the limit is \(maxCount)") }
        let sum = try reader.word()
        var out: [UInt8] = []
        out.reserveCapacity(header.newCount)
        while !reader.atEnd {
            let operation = try reader.byte()
            switch operation {
            case 0:
                let offset = try reader.count(), count = try reader.count()
                guard offset <= old.count, count <= old.count - offset else {
                    throw Refusal("a copy of \(count) bytes at \(offset) from \(old.count)")
                }
                guard count <= header.newCount - out.count else { throw Refusal("it copies past the \(header.newCount) bytes it makes") }
                out.append(contentsOf: old[offset..<offset + count])
            case 1:
                let count = try reader.count()
                guard count <= header.newCount - out.count else { throw Refusal("it inserts past the \(header.newCount) bytes it makes") }
                out.append(contentsOf: try reader.take(count))
            default:
                throw Refusal("operation \(operation)")
            }
        }
        guard out.count == header.newCount else { throw Refusal("it made \(out.count) bytes, not \(header.newCount)") }
        guard checksum(out) == sum else { throw Refusal("what it made is not what it was made for (another old snapshot?)") }
        return out
    }

    /// `old` with every delta of `log` applied in order, each to what the one before made: what
    /// `apply` entry after entry gives, without copying the whole snapshot once per entry. The
    /// session is kept as pieces of `old` and of the entries' inserted bytes, and written out
    /// once at the end; sooner only if the log cuts it into more pieces than bytes are worth
    /// (a log written by hand could ask for a piece per byte). Every entry is checked as `apply`
    /// checks it but for its checksum: only the last entry's result is made, so only its
    /// checksum is checked, and that is what matters: the bytes its writer had.
    public static func apply(log: [[UInt8]], to old: [UInt8], maxCount: Int) throws(Refusal) -> [UInt8] {
        guard !log.isEmpty else { return old }
        var base = old, count = old.count, sum: UInt64 = 0
        var pieces = old.isEmpty ? [] : [Piece(source: -1, offset: 0, count: old.count)]
        for (index, delta) in log.enumerated() {
            var reader = Reader(bytes: delta)
            let header = try reader.header()
            guard header.oldCount == count else { throw Refusal("entry \(index) was made from \(header.oldCount) bytes, applied to \(count)") }
            guard header.newCount <= maxCount else { throw Refusal("entry \(index) makes \(header.newCount) bytes; the limit is \(maxCount)") }
            sum = try reader.word()
            var starts: [Int] = []
            starts.reserveCapacity(pieces.count)
            var at = 0
            for piece in pieces {
                starts.append(at)
                at += piece.count
            }
            var next: [Piece] = [], made = 0
            while !reader.atEnd {
                let operation = try reader.byte()
                switch operation {
                case 0:
                    let offset = try reader.count(), length = try reader.count()
                    guard offset <= count, length <= count - offset else { throw Refusal("entry \(index) copies \(length) bytes at \(offset) from \(count)") }
                    guard length <= header.newCount - made else { throw Refusal("entry \(index) copies past the \(header.newCount) bytes it makes") }
                    guard length > 0 else { continue }
                    // The last piece starting at or before `offset`.
                    var low = 0, high = starts.count - 1
                    while low < high {
                        let middle = (low + high + 1) / 2
                        if starts[middle] <= offset { low = middle } else { high = middle - 1 }
                    }
                    var place = low, from = offset, left = length
                    while left > 0 {
                        let piece = pieces[place], within = from - starts[place]
                        let taken = min(left, piece.count - within)
                        next.append(Piece(source: piece.source, offset: piece.offset + within, count: taken))
                        from += taken
                        left -= taken
                        place += 1
                    }
                    made += length
                case 1:
                    let length = try reader.count()
                    guard length <= header.newCount - made else { throw Refusal("entry \(index) inserts past the \(header.newCount) bytes it makes") }
                    let start = reader.offset
                    _ = try reader.take(length)
                    if length > 0 { next.append(Piece(source: index, offset: start, count: length)) }
                    made += length
                default:
                    throw Refusal("entry \(index): operation \(operation)")
                }
            }
            guard made == header.newCount else { throw Refusal("entry \(index) made \(made) bytes, not \(header.newCount)") }
            pieces = next
            count = made
            if pieces.count > 4096 + count / 256 {
                base = written(pieces, count: count, base: base, log: log)
                guard checksum(base) == sum else { throw Refusal("what entry \(index) made is not what it was made for") }
                pieces = count == 0 ? [] : [Piece(source: -1, offset: 0, count: count)]
            }
        }
        let out = written(pieces, count: count, base: base, log: log)
        guard checksum(out) == sum else { throw Refusal("what the log made is not what its last entry was made for (another old snapshot?)") }
        return out
    }

    /// A range of a session being assembled: of the base (`source` -1) or of a log entry.
    private struct Piece {
        var source: Int
        var offset: Int
        var count: Int
    }

    private static func written(_ pieces: [Piece], count: Int, base: [UInt8], log: [[UInt8]]) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(count)
        for piece in pieces {
            let range = piece.offset..<piece.offset + piece.count
            if piece.source < 0 { out.append(contentsOf: base[range]) } else { out.append(contentsOf: log[piece.source][range]) }
        }
        return out
    }

    /// A 64-bit hash of the bytes, eight at a time: not a defence against anyone (who can write
    /// a delta can write its checksum), but a delta applied to any old snapshot but its own is
    /// caught instead of becoming the session.
    public static func checksum(_ bytes: [UInt8]) -> UInt64 {
        bytes.withUnsafeBytes { raw in
            var hash: UInt64 = 0xCBF2_9CE4_8422_2325 ^ UInt64(raw.count)
            var offset = 0
            while offset + 8 <= raw.count {
                hash = (hash ^ raw.loadUnaligned(fromByteOffset: offset, as: UInt64.self)) &* 0x9E37_79B9_7F4A_7C15
                hash ^= hash >> 29
                offset += 8
            }
            while offset < raw.count {
                hash = (hash ^ UInt64(raw[offset])) &* 0x100_0000_01B3
                offset += 1
            }
            return hash ^ (hash >> 32)
        }
    }

    // MARK: Making

    /// Operations as they are found, an insert written only when the copy after it is known.
    private struct OperationWriter {
        let new: UnsafeRawBufferPointer
        /// Where the bytes not yet written start.
        var pending = 0

        mutating func copy(from source: Int, count: Int, endingAt end: Int, into out: inout [UInt8]) {
            insertPending(upTo: end - count, into: &out)
            out.append(0)
            appendNumber(UInt64(source), to: &out)
            appendNumber(UInt64(count), to: &out)
            pending = end
        }

        mutating func finish(into out: inout [UInt8]) { insertPending(upTo: new.count, into: &out) }

        private mutating func insertPending(upTo end: Int, into out: inout [UInt8]) {
            guard end > pending else { return }
            out.append(1)
            appendNumber(UInt64(end - pending), to: &out)
            out.append(contentsOf: new[pending..<end])
            pending = end
        }
    }

    /// The old snapshot's keys: open addressing, a key's hash beside the offset it was first
    /// seen at (plus one; zero is empty; 32 bits, as snapshots are far below 2 GB). A key seen
    /// again is not added: repeats add nothing that growing the first match does not find.
    private struct Index {
        var hashes: [UInt64]
        var offsets: [Int32]
        let mask: Int

        init(_ old: UnsafeRawBufferPointer) {
            let keys = old.count >= SnapshotDelta.key ? (old.count - SnapshotDelta.key) / SnapshotDelta.stride + 1 : 0
            var capacity = 16
            while capacity < keys * 2 { capacity <<= 1 }
            mask = capacity - 1
            hashes = [UInt64](repeating: 0, count: capacity)
            offsets = [Int32](repeating: 0, count: capacity)
            hashes.withUnsafeMutableBufferPointer { hashes in
                offsets.withUnsafeMutableBufferPointer { offsets in
                    var offset = 0
                    while offset + SnapshotDelta.key <= old.count {
                        let hash = Self.hash(old, offset)
                        var slot = Int(truncatingIfNeeded: hash >> 7) & mask
                        while offsets[slot] != 0 && hashes[slot] != hash { slot = (slot + 1) & mask }
                        if offsets[slot] == 0 {
                            hashes[slot] = hash
                            offsets[slot] = Int32(offset + 1)
                        }
                        offset += SnapshotDelta.stride
                    }
                }
            }
        }

        /// An offset in `old` whose key is the same bytes as `new`'s at `at`, if one is indexed.
        func find(_ new: UnsafeRawBufferPointer, _ at: Int, in old: UnsafeRawBufferPointer) -> Int? {
            let hash = Self.hash(new, at)
            var slot = Int(truncatingIfNeeded: hash >> 7) & mask
            return offsets.withUnsafeBufferPointer { offsets in
                hashes.withUnsafeBufferPointer { hashes in
                    while offsets[slot] != 0 {
                        if hashes[slot] == hash {
                            let from = Int(offsets[slot]) - 1
                            // The hash only suggests it: the bytes decide.
                            return memcmp(old.baseAddress! + from, new.baseAddress! + at, SnapshotDelta.key) == 0 ? from : nil
                        }
                        slot = (slot + 1) & mask
                    }
                    return nil
                }
            }
        }

        static func hash(_ bytes: UnsafeRawBufferPointer, _ offset: Int) -> UInt64 {
            let low = bytes.loadUnaligned(fromByteOffset: offset, as: UInt64.self)
            let high = bytes.loadUnaligned(fromByteOffset: offset + 8, as: UInt64.self)
            let mixed = (low &* 0x9E37_79B9_7F4A_7C15) ^ (high &* 0xC2B2_AE3D_27D4_EB4F)
            return (mixed ^ (mixed >> 31)) | 1
        }
    }

    /// How many bytes from `old[from]` and `new[at]` on are the same: compared a block at a time
    /// with memcmp, then byte by byte inside the block that differs.
    private static func sharedRun(_ old: UnsafeRawBufferPointer, _ from: Int, _ new: UnsafeRawBufferPointer, _ at: Int) -> Int {
        let most = min(old.count - from, new.count - at)
        guard most > 0 else { return 0 }
        let a = old.baseAddress! + from, b = new.baseAddress! + at
        var run = 0
        while most - run >= 256 && memcmp(a + run, b + run, 256) == 0 { run += 256 }
        while run < most && old[from + run] == new[at + run] { run += 1 }
        return run
    }

    // MARK: Reading

    private struct Reader {
        let bytes: [UInt8]
        var offset = 0

        var atEnd: Bool { offset == bytes.count }

        mutating func header() throws(Refusal) -> Header {
            guard bytes.count >= SnapshotDelta.magic.count, bytes.starts(with: SnapshotDelta.magic) else { throw Refusal("not a snapshot delta") }
            offset = SnapshotDelta.magic.count
            let version = try number()
            return Header(version: version, oldCount: try count(), newCount: try count())
        }

        mutating func byte() throws(Refusal) -> UInt8 {
            guard offset < bytes.count else { throw Refusal("it ends early") }
            defer { offset += 1 }
            return bytes[offset]
        }

        mutating func take(_ count: Int) throws(Refusal) -> ArraySlice<UInt8> {
            guard count <= bytes.count - offset else { throw Refusal("it ends early") }
            defer { offset += count }
            return bytes[offset..<offset + count]
        }

        mutating func word() throws(Refusal) -> UInt64 {
            try take(8).reduce(0) { $0 << 8 | UInt64($1) }
        }

        mutating func number() throws(Refusal) -> UInt64 {
            guard let value = LEB128.read(bytes, at: &offset) else {
                throw Refusal(offset >= bytes.count ? "it ends early" : "a number past 64 bits")
            }
            return value
        }

        /// A number that counts bytes: within what an Int holds, so arithmetic on it cannot trap.
        mutating func count() throws(Refusal) -> Int {
            let value = try number()
            guard value <= UInt64(Int32.max) else { throw Refusal("a length or offset of \(value)") }
            return Int(value)
        }
    }

    private static func appendNumber(_ value: UInt64, to out: inout [UInt8]) { LEB128.append(value, to: &out) }
}
