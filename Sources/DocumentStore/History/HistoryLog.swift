import Foundation
#if canImport(Glibc)
import Glibc
#endif
import SystemPackage

/// The one file that says what a document's history holds: `history.log` in its folder.
///
/// Everything the history knows is a record in this log; no state lives in a file name. The
/// shape is SQLite's write-ahead log's, cut down to one writer that only appends:
/// - a header: the magic `89 43 42 48 0D 0A 1A 0A` ("\x89CBH\r\n\x1a\n": a file sent through a
///   text-mode transfer or cut at a line end no longer starts with it), the format's version
///   (a 32-bit little-endian number, now 1), 8 random bytes (the salt), and a checksum of the
///   three;
/// - then records, each: its length (32-bit little-endian), its payload (a JSON object, one
///   `HistoryRecord`), and a checksum: the first 8 bytes of SHA-256 over the checksum before it
///   (the header's, for the first record), the length and the payload.
/// The chain makes a record valid only where it was written: a torn write, a flipped bit, or a
/// record copied from another log (another salt) ends the log there, and what follows is
/// ignored. Readers take the log up to its last good record; the next writer, under the
/// document's lock, cuts the rest off before it appends.
///
/// A writer makes a record durable (`fdatasync`) before it does what depends on it: the order
/// of an intent, the data, a flush and the commit record, as a write-ahead log's.
enum HistoryLog {
    static let fileName = "history.log"
    static let magic: [UInt8] = [0x89, 0x43, 0x42, 0x48, 0x0D, 0x0A, 0x1A, 0x0A]
    static let version: UInt32 = 1
    static let headerSize = 28
    static let checksumSize = 8
    /// No record is near this: one that says it is longer is damage.
    static let maxRecordBytes = 1 << 20
    /// A log is written again, smaller, long before this (`HistoryState.compactionRecords`): a
    /// larger one is refused unread (a sparse file can claim any size).
    static let maxLogBytes: Int64 = 64 << 20
    /// The most a write cut short can leave past the last good record (one write of records).
    static let maxTornBytes = 64 << 10
    /// Numbers and lengths in records stay below this (JSON's exact integers): a forged or
    /// damaged record cannot overflow the arithmetic done with them.
    static let maxNumber: Int64 = (1 << 53) - 1
    /// The highest revision (and line) number: the protocol names revisions as 32-bit signed
    /// integers. A record past it is forgery or damage; a history that reached it saves no more.
    static let maxRevision = Int(Int32.max)

    /// The header of a new log, and the checksum its first record continues.
    static func header(salt: [UInt8]) -> (bytes: [UInt8], chain: [UInt8]) {
        var bytes = magic + littleEndian(version) + salt
        let chain = checksum(bytes)
        bytes += chain
        return (bytes, chain)
    }

    static func newSalt() -> [UInt8] { (0..<8).map { _ in UInt8.random(in: 0...255) } }

    /// One record, framed, and the checksum the next record continues.
    /// `version`: the log's, whose payload format the record is written in.
    static func frame(_ record: HistoryRecord, after chain: [UInt8], version: UInt32 = version) -> (bytes: [UInt8], chain: [UInt8]) {
        let payload = record.encoded(version: version)
        let length = littleEndian(UInt32(payload.count))
        let sum = checksum(chain + length + payload)
        return (length + payload + sum, sum)
    }

    /// What reading a log found.
    struct Reading: Equatable {
        /// The version its header names: how its records' payloads are read.
        var version = HistoryLog.version
        var records: [HistoryRecord] = []
        /// Where the last good record ends: a writer appends here, after cutting the rest.
        var end: Int64 = 0
        /// The checksum the next record continues.
        var chain: [UInt8] = []
        /// Bytes past `end` that are not a good record: the last record, torn by a writer killed
        /// while it wrote (its length runs past the end of the file, or it ends exactly there).
        var damagedTail = false
    }

    enum ReadError: Error, Equatable {
        /// Not a history log at all (no magic, or a damaged header).
        case notALog
        /// A record that fails its checksum, or is no record, with more of the log after it: not
        /// a write cut short (which is always the last thing in the file) but damage, or an edit.
        /// The log is the history's only account of itself: nothing after the damage can be
        /// trusted, and nothing before it may be taken for the whole.
        case damaged(at: Int64)
        /// Larger than any log a writer leaves (`maxLogBytes`).
        case tooLarge(Int64)
        /// Written by a newer canvas bridge, whose records this one cannot be sure to read.
        case newerVersion(UInt32)
    }

    /// Parses `bytes` (a whole log, or the part of one past `resuming.end`).
    static func parse(_ bytes: [UInt8], resuming: Reading? = nil) -> Result<Reading, ReadError> {
        var reading: Reading
        var offset = 0
        if let resuming {
            reading = resuming
            reading.records = []
            reading.damagedTail = false
        } else {
            guard bytes.count >= headerSize, Array(bytes[0..<8]) == magic else { return .failure(.notALog) }
            let version = UInt32(bytes[8]) | UInt32(bytes[9]) << 8 | UInt32(bytes[10]) << 16 | UInt32(bytes[11]) << 24
            guard Array(bytes[20..<28]) == checksum(Array(bytes[0..<20])) else { return .failure(.notALog) }
            // A reader reads its own version and every older one (`HistoryRecord(decoding:version:)`);
            // a newer one may mean records it would misread.
            guard version >= 1 else { return .failure(.notALog) }
            guard version <= Self.version else { return .failure(.newerVersion(version)) }
            reading = Reading(version: version, records: [], end: Int64(headerSize), chain: Array(bytes[20..<28]))
            offset = headerSize
        }
        let base = reading.end - Int64(offset)
        while offset < bytes.count {
            // What a killed writer can leave is the end of one write: a few records at most.
            let torn = bytes.count - offset <= maxTornBytes
            guard bytes.count - offset >= 4 else { reading.damagedTail = true; break }
            let length = Int(UInt32(bytes[offset]) | UInt32(bytes[offset + 1]) << 8 | UInt32(bytes[offset + 2]) << 16 | UInt32(bytes[offset + 3]) << 24)
            let end = offset + 4 + length + checksumSize
            guard length <= maxRecordBytes, end <= bytes.count else {
                guard torn else { return .failure(.damaged(at: base + Int64(offset))) }
                reading.damagedTail = true
                break
            }
            let sum = checksum(reading.chain + Array(bytes[offset..<(offset + 4 + length)]))
            guard Array(bytes[(offset + 4 + length)..<end]) == sum,
                  let record = HistoryRecord(decoding: Array(bytes[(offset + 4)..<(offset + 4 + length)]), version: reading.version) else {
                guard end == bytes.count else { return .failure(.damaged(at: base + Int64(offset))) }
                reading.damagedTail = true
                break
            }
            reading.records.append(record)
            reading.chain = sum
            offset = end
            reading.end = base + Int64(end)
        }
        return .success(reading)
    }

    /// Whether `bytes` (a whole log) holds good records, header on, ending exactly at `end` with
    /// the checksum `chain`: the log a reading that ended there read, byte for byte (the chain
    /// is SHA-256 over every byte before it), checked without decoding a record.
    static func continues(_ bytes: [UInt8], to end: Int64, chain: [UInt8]) -> Bool {
        guard bytes.count >= headerSize, end >= Int64(headerSize), end <= Int64(bytes.count),
              Array(bytes[0..<8]) == magic, Array(bytes[20..<28]) == checksum(Array(bytes[0..<20])) else { return false }
        var sum = Array(bytes[20..<28])
        var offset = headerSize
        while offset < Int(end) {
            guard Int(end) - offset >= 4 else { return false }
            let length = Int(UInt32(bytes[offset]) | UInt32(bytes[offset + 1]) << 8 | UInt32(bytes[offset + 2]) << 16 | UInt32(bytes[offset + 3]) << 24)
            let recordEnd = offset + 4 + length + checksumSize
            guard length <= maxRecordBytes, recordEnd <= Int(end) else { return false }
            let made = checksum(sum + Array(bytes[offset..<(offset + 4 + length)]))
            guard bytes[(offset + 4 + length)..<recordEnd].elementsEqual(made) else { return false }
            sum = made
            offset = recordEnd
        }
        return sum == chain
    }

    static func checksum(_ bytes: [UInt8]) -> [UInt8] {
        var hasher = SHA256Hasher()
        hasher.update(bytes)
        return Array(hasher.finishBytes().prefix(checksumSize))
    }

    static func littleEndian(_ value: UInt32) -> [UInt8] {
        [UInt8(value & 0xFF), UInt8(value >> 8 & 0xFF), UInt8(value >> 16 & 0xFF), UInt8(value >> 24)]
    }
}

