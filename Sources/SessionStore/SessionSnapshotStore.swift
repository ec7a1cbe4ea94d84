import Foundation

/// Session snapshots in Redis, shared by every canvasd instance, with compare-and-set.
///
/// A session is one hash, `canvas:session:{<id>}` (the id is the hash tag of all its keys):
/// `holder` (the instance acting on it), `owner` (the client key that opened it, empty without
/// authentication), `version` (counts up by one per write), `base` (a whole snapshot, opaque
/// bytes) and `baseVersion` (its version); and beside it `<key>:log`, the changes written since
/// the base (operation entries or byte deltas, `OperationEntry`, `SnapshotDelta`), oldest first,
/// one per version: the session at `version` is the base with the log applied. A change is one
/// more log entry, or a new base with the log emptied (written whole, or a fold). A write
/// lands only if the session is still at the version the writer read and the writer is still
/// its holder, so two instances never both acknowledge a change to one session: an instance
/// that took a session over makes every later write of the instance it took it from fail. The
/// keys expire after the idle timeout unless written or touched, which is the session's lease
/// running out. `protocol/session-store.md` gives every key and byte.
///
/// Beside it, the session's answered requests: `<key>:answered`, a hash from a key naming
/// each request to what its retry is to be told, and `<key>:order`, those keys oldest first.
/// A write that records a request lands only if the request is not recorded already, in the
/// same script as the compare-and-set: whichever instances run a request, and however late a
/// paused one wakes with it, its change is acknowledged once. The last `answersKept` are kept.
///
/// Sessions an earlier canvasd stored are read too: under untagged keys (`canvas:session:<id>`),
/// moved to the tagged ones when taken over; with a whole snapshot in `snapshot` and no base or
/// log, read as that snapshot with an empty log (the first write moves it to `base`: a new name,
/// so that a canvasd older still, which reads `snapshot` alone, finds none rather than a base
/// without its log).
///
/// Each operation is one Lua script, atomic in Redis, run by its SHA-1 once loaded.
public final class SessionSnapshotStore {
    /// What a write came to.
    public enum WriteOutcome: Sendable, Equatable {
        case written(version: UInt64)
        /// Another instance holds the session now, or it is at another version, or it expired:
        /// the local copy is stale and must not be acknowledged.
        case lost(holder: String?, version: UInt64?)
        /// The request the write records was answered already (by this instance or another):
        /// nothing was written, and `entry` is what was recorded for it.
        case answered(entry: [UInt8])
        /// A delta was refused, nothing written: the session's log in the store does not lead
        /// from its base to the version the delta follows (the log's key was evicted, or
        /// expired apart from the session's). The change must be written whole.
        case wholeNeeded
    }

    /// How a change is written: the whole snapshot; or a log entry, which the store appends
    /// to the session's log: a byte delta from the snapshot before (`SnapshotDelta`), or the
    /// operations that made the change (`OperationEntry`).
    public enum Change: Sendable, Equatable {
        case whole([UInt8])
        case delta([UInt8])
        case operations([UInt8])

        /// Whether it goes on the log.
        public var isLogged: Bool {
            switch self {
            case .whole: return false
            case .delta, .operations: return true
            }
        }

        /// What goes to the store.
        public var bytes: [UInt8] {
            switch self {
            case .whole(let bytes), .delta(let bytes), .operations(let bytes): return bytes
            }
        }
    }

    /// A session as a take-over found it: a whole snapshot and the log after it.
    public struct Snapshot: Sendable, Equatable {
        public var version: UInt64
        /// The last whole snapshot written, at `baseVersion`.
        public var bytes: [UInt8]
        public var baseVersion: UInt64
        /// The changes since, oldest first, one version each.
        public var log: [[UInt8]]
        /// What was recorded for the request the take-over asked about, if it was answered.
        public var answer: [UInt8]?

        public init(version: UInt64, bytes: [UInt8], baseVersion: UInt64? = nil, log: [[UInt8]] = [], answer: [UInt8]? = nil) {
            self.version = version
            self.bytes = bytes
            self.baseVersion = baseVersion ?? version
            self.log = log
            self.answer = answer
        }

        /// The session at `version`: the whole snapshot with the log's byte deltas applied in
        /// order, and the operation entries after them (`OperationEntry`), which the service
        /// replays on the session those bytes hold. Each entry is checked to be the next version,
        /// the byte deltas to be made from what the one before made, none after an operation
        /// entry, and nothing larger than `maxCount` bytes.
        public func assembled(maxCount: Int) throws(SnapshotDelta.Refusal) -> Assembled {
            guard bytes.count <= maxCount else { throw SnapshotDelta.Refusal("the whole snapshot is \(bytes.count) bytes; the limit is \(maxCount)") }
            guard baseVersion <= version, version - baseVersion == UInt64(log.count) else {
                throw SnapshotDelta.Refusal("a log of \(log.count) after version \(baseVersion) does not make version \(version)")
            }
            // No writer of this store leaves a longer log (it folds first), nor one larger than a
            // session: anything past that was written by someone else, and applying it could hold
            // the lane (each delta walks the pieces made so far) or its memory.
            let logBytes = log.reduce(0) { $0 + $1.count }
            guard log.count <= 2 * StoredSnapshot.maxOperationEntries, logBytes <= maxCount else {
                throw SnapshotDelta.Refusal("a log of \(log.count) entries and \(logBytes) bytes; at most \(2 * StoredSnapshot.maxOperationEntries) and \(maxCount) are read")
            }
            var deltas = 0
            for (index, entry) in log.enumerated() {
                let made: UInt64
                if OperationEntry.isEntry(entry) {
                    made = try OperationEntry.version(of: entry).version
                } else {
                    guard deltas == index else { throw SnapshotDelta.Refusal("a byte delta logged after an operation entry") }
                    made = try SnapshotDelta.header(entry).version
                    deltas += 1
                }
                guard made == baseVersion + UInt64(index) + 1 else {
                    throw SnapshotDelta.Refusal("version \(made) logged after \(baseVersion + UInt64(index))")
                }
            }
            guard deltas <= 2 * StoredSnapshot.maxLogEntries else {
                throw SnapshotDelta.Refusal("\(deltas) byte deltas; at most \(2 * StoredSnapshot.maxLogEntries) are read")
            }
            let session = try SnapshotDelta.apply(log: Array(log[..<deltas]), to: bytes, maxCount: maxCount)
            let operations = Array(log[deltas...])
            return Assembled(version: version, bytes: session, operations: operations,
                             stored: StoredSnapshot(version: version, bytes: operations.isEmpty ? session : nil, wholeCount: bytes.count,
                                                    logEntries: log.count, logBytes: logBytes))
        }
    }

    /// A stored session put together (`Snapshot.assembled`): the whole snapshot at
    /// `version - operations.count`, and the operation entries that make `version` from it.
    public struct Assembled: Sendable, Equatable {
        public var version: UInt64
        public var bytes: [UInt8]
        public var operations: [[UInt8]]
        /// What its holder keeps to write the next change against.
        public var stored: StoredSnapshot
    }

    /// A request a write records as answered: `key` names it within its session (the service
    /// makes it from the request's id), `entry` is what a retry of it is to be told.
    public struct Answer: Sendable, Equatable {
        public var key: [UInt8]
        public var entry: [UInt8]

        public init(key: [UInt8], entry: [UInt8]) {
            self.key = key
            self.entry = entry
        }
    }

    /// Answered requests kept per session. The reply cache a snapshot carries holds far fewer
    /// (64): a request that a paused instance wakes up with, after that many more were
    /// acknowledged elsewhere, must still be found answered.
    public static let answersKept = 4096

    public let instance: String
    public let ttl: Duration
    private let connection: RedisConnection
    private let keyPrefix: String
    private var loaded: [Script: String] = [:]
    /// The instance name and the time to live in milliseconds as script arguments, made once:
    /// nearly every request of a shared session sends them.
    private let holder: [UInt8]
    private let ttlMilliseconds: [UInt8]

    /// Replicas that must confirm each write (`WAIT`) before it counts; 0: the primary's word.
    public let replicas: Int
    private let replicaWait: [UInt8]

    /// `instance`: this process's name as holder (unique among instances); `ttl`: how long an
    /// untouched session lives (canvasd's idle timeout). `replicas`: each write counts only once
    /// that many replicas confirm it within `replicaTimeout`, and fails otherwise
    /// (`RedisError.Cause.unreplicated`); the connection's own timeout is lengthened to leave the
    /// wait its time.
    public init(url: String, instance: String, ttl: Duration, keyPrefix: String = "canvas:session:",
                timeout: Duration = .seconds(2), replicas: Int = 0, replicaTimeout: Duration = .milliseconds(250)) throws(RedisError) {
        connection = try RedisConnection(url: RedisURL(url), timeout: replicas > 0 ? timeout + replicaTimeout : timeout)
        self.replicas = max(0, replicas)
        replicaWait = Array(String(Self.milliseconds(replicaTimeout)).utf8)
        self.instance = instance
        self.ttl = ttl
        self.keyPrefix = keyPrefix
        holder = Array(instance.utf8)
        ttlMilliseconds = Array(String(Self.milliseconds(ttl)).utf8)
        _ = try connection.command(["PING"], doing: "checking the session store at \(connection.url)")
    }

    public var address: String { connection.url.description }

    private func key(_ session: String) -> [UInt8] { keys(session)[0] }

    /// The session's hash, its answered requests, their order and its log: every script gets
    /// all four. The id is their hash tag (`canvas:session:{ID}`), so that a sharded Redis keeps
    /// a session's keys on one node, where its scripts can reach them all.
    private func keys(_ session: String) -> [[UInt8]] { Self.keys(keyPrefix + "{" + session + "}") }

    /// The same keys as canvasd wrote them before the hash tag (`canvas:session:ID`).
    private func untaggedKeys(_ session: String) -> [[UInt8]] { Self.keys(keyPrefix + session) }

    private static func keys(_ base: String) -> [[UInt8]] {
        [Array(base.utf8), Array((base + ":answered").utf8), Array((base + ":order").utf8), Array((base + ":log").utf8)]
    }

    /// Moves a session an earlier canvasd kept under the untagged keys to the tagged ones, if
    /// it is there and nothing is under the tagged ones. True when it moved. (One script over
    /// keys of two hash slots: a single Redis runs it; the earlier canvasd ran on nothing else.)
    private func moveUntagged(_ session: String) throws(RedisError) -> Bool {
        try run(.moveUntagged, keys: untaggedKeys(session) + keys(session), [], doing: "moving session \(session) to its tagged keys") == .integer(1)
    }

    /// Stores a new session at version 1, held by this instance. False if the id is taken.
    public func create(_ session: String, owner: String?, snapshot: [UInt8]) throws(RedisError) -> Bool {
        let reply = try run(.create, keys: keys(session),
                            [holder, Array((owner ?? "").utf8), snapshot, ttlMilliseconds],
                            doing: "storing new session \(session)")
        return reply == .integer(1)
    }

    /// Writes the session's next version, if it is still at `expected` and held by this instance,
    /// and `answering` (the request that made the change) was not answered before.
    public func write(_ session: String, snapshot: [UInt8], expected: UInt64, answering: Answer? = nil) throws(RedisError) -> WriteOutcome {
        try write(session, .whole(snapshot), expected: expected, answering: answering)
    }

    /// Writes the session's next version as `change`: a whole snapshot, or a delta from the
    /// session at `expected` (which the store then holds at `expected` only if this instance
    /// wrote or took over that very version, so the delta's writer knows what it applies to).
    public func write(_ session: String, _ change: Change, expected: UInt64, answering: Answer? = nil) throws(RedisError) -> WriteOutcome {
        let doing = "writing session \(session) at version \(expected + 1)"
        let kind: [UInt8]
        switch change {
        case .whole: kind = Array("whole".utf8)
        case .delta, .operations: kind = Array("delta".utf8)
        }
        let reply = try run(.write, keys: keys(session),
                            [holder, Array(String(expected).utf8), change.bytes, ttlMilliseconds,
                             answering?.key ?? [], answering?.entry ?? [], Array(String(Self.answersKept).utf8), kind],
                            doing: doing)
        if case .array(let fields) = reply, fields.count == 4, fields[0] == .integer(2), case .bytes(let entry) = fields[3] {
            return .answered(entry: entry)
        }
        if case .array(let fields) = reply, fields.count == 3, fields[0] == .integer(3) { return .wholeNeeded }
        if case .array(let fields) = reply, fields.count == 5, fields[0] == .integer(1), case .integer(let entries) = fields[3],
           case .integer(let baseBytes) = fields[4] {
            lastLog = (Int(entries), Int(baseBytes))
        }
        guard case .array(let fields) = reply, fields.count == 3 || fields.count == 5 else {
            throw RedisError(doing: doing, cause: .unexpectedReply("\(reply)"))
        }
        let heldBy = fields[1].string.flatMap { $0.isEmpty ? nil : $0 }
        let version = fields[2].string.flatMap { UInt64($0) }
        if fields[0] == .integer(1), let version { return .written(version: version) }
        return .lost(holder: heldBy, version: version)
    }

    /// The session's log and whole snapshot as the last write that landed left them: the log's
    /// entries (fewer than the writer counted when a fold landed between, `fold`) and the whole
    /// snapshot's bytes (a fold's, then).
    public private(set) var lastLog: (entries: Int, baseBytes: Int) = (0, 0)

    /// Folds the session's log into a new whole snapshot, `base`, which is the session at
    /// `version`: lands only if the store still has this instance holding it at that version
    /// (a later write, or another holder, makes it moot). Changes nothing a reader sees but how
    /// much it reads. False when it did not land.
    @discardableResult
    public func fold(_ session: String, version: UInt64, base: [UInt8]) throws(RedisError) -> Bool {
        try run(.fold, keys: keys(session), [holder, Array(String(version).utf8), base, ttlMilliseconds],
                doing: "folding the log of session \(session) at version \(version)") == .integer(1)
    }

    /// Takes the session over: this instance becomes its holder, and gets its last whole
    /// snapshot and the log after it (`Snapshot.assembled` makes the session of them), with
    /// what was recorded for the request `asking` names if it was answered. nil when there is
    /// no such session, or it belongs to another client (told apart from nothing, so ids
    /// cannot be probed).
    public func takeOver(_ session: String, owner: String?, asking: [UInt8]? = nil) throws(RedisError) -> Snapshot? {
        let doing = "taking session \(session) over"
        let arguments = [holder, Array((owner ?? "").utf8), ttlMilliseconds, asking ?? []]
        var reply = try run(.takeOver, keys: keys(session), arguments, doing: doing)
        if reply == .null, try moveUntagged(session) { reply = try run(.takeOver, keys: keys(session), arguments, doing: doing) }
        return try Self.snapshot(reply, doing: doing)
    }

    /// The session as stored, without taking it over: for tests and tools.
    public func read(_ session: String) throws(RedisError) -> Snapshot? {
        let doing = "reading session \(session)"
        let reply = try run(.read, keys: keys(session), [], doing: doing)
        return try Self.snapshot(reply == .null ? try run(.read, keys: untaggedKeys(session), [], doing: doing) : reply, doing: doing)
    }

    /// A take-over's or a read's reply: {version, whole snapshot, its version, log, [answer]}.
    private static func snapshot(_ reply: RedisValue, doing: String) throws(RedisError) -> Snapshot? {
        switch reply {
        case .null: return nil
        case .array(let fields) where fields.count == 4 || fields.count == 5:
            guard let version = fields[0].string.flatMap({ UInt64($0) }), case .bytes(let bytes) = fields[1],
                  let baseVersion = fields[2].string.flatMap({ UInt64($0) }), case .array(let entries) = fields[3] else {
                throw RedisError(doing: doing, cause: .unexpectedReply("\(reply)"))
            }
            var log: [[UInt8]] = []
            for entry in entries {
                guard case .bytes(let delta) = entry else { throw RedisError(doing: doing, cause: .unexpectedReply("a log entry \(entry)")) }
                log.append(delta)
            }
            var answer: [UInt8]?
            if fields.count == 5, case .bytes(let entry) = fields[4] { answer = entry }
            return Snapshot(version: version, bytes: bytes, baseVersion: baseVersion, log: log, answer: answer)
        default:
            throw RedisError(doing: doing, cause: .unexpectedReply("\(reply)"))
        }
    }

    /// What removing a session found.
    public enum Removal: Sendable, Equatable {
        /// This instance held it; it is gone now.
        case removed
        /// Another instance holds it: nothing was removed.
        case heldElsewhere
        /// The store had let it go already (its key expired or was evicted, or the store
        /// restarted without it): nobody holds it.
        case absent
    }

    /// Removes the session if this instance holds it.
    @discardableResult
    public func remove(_ session: String) throws(RedisError) -> Removal {
        let doing = "removing session \(session)"
        switch try run(.remove, keys: keys(session), [holder], doing: doing) {
        case .integer(1): return .removed
        case .integer(0): return .heldElsewhere
        case .integer(-1): return .absent
        case let other: throw RedisError(doing: doing, cause: .unexpectedReply("\(other)"))
        }
    }

    /// Whether this instance still holds the session at version `expected`, renewing its time
    /// to live if so: what a read must know before it answers from a local copy, and a side
    /// effect (a save) before it starts. With `unanswered`, also whether that request (named as
    /// in `Answer.key`) is still unanswered: a save must not start for one already acknowledged.
    public func confirm(_ session: String, expected: UInt64, unanswered: [UInt8]? = nil) throws(RedisError) -> Bool {
        try run(.confirm, keys: keys(session), [holder, Array(String(expected).utf8), ttlMilliseconds, unanswered ?? []],
                doing: "confirming session \(session) at version \(expected)") == .integer(1)
    }

    /// Whose session this is (the owner given at creation; "" without authentication), or nil
    /// when there is none.
    public func owner(of session: String) throws(RedisError) -> String? {
        let doing = "reading the owner of session \(session)"
        let owner = try connection.command([Array("HGET".utf8), key(session), Array("owner".utf8)], doing: doing).string
        if let owner { return owner }
        return try connection.command([Array("HGET".utf8), untaggedKeys(session)[0], Array("owner".utf8)], doing: doing).string
    }

    /// The holder and version as stored, for tests and tools.
    public func inspect(_ session: String) throws(RedisError) -> (holder: String, version: UInt64)? {
        let reply = try connection.command([Array("HMGET".utf8), key(session), Array("holder".utf8), Array("version".utf8)],
                                           doing: "reading session \(session)")
        guard case .array(let fields) = reply, fields.count == 2, let holder = fields[0].string,
              let version = fields[1].string.flatMap({ UInt64($0) }) else { return nil }
        return (holder, version)
    }

    // MARK: The instance's name

    /// What claiming this instance's name found.
    public enum Claim: Equatable, Sendable {
        case held
        /// Another live process holds the name; its lease ends within this many milliseconds
        /// unless it is renewed.
        case taken(expiresInMilliseconds: Int64)
    }

    /// Claims (or renews) this instance's name as a lease of `lease`, under `token` (random per
    /// process): two processes with one name would each take the other's sessions for its own
    /// and let them expire, so the second must not start.
    public func claimInstance(token: String, lease: Duration) throws(RedisError) -> Claim {
        let milliseconds = Self.milliseconds(lease)
        let reply = try run(.claim, keys: [Array((keyPrefix + "instance:" + instance).utf8)],
                            [Array(token.utf8), Array(String(milliseconds).utf8)], doing: "claiming the instance name \(instance)")
        switch reply {
        case .integer(let left) where left < 0: return .held
        case .integer(let left): return .taken(expiresInMilliseconds: left)
        default: throw RedisError(doing: "claiming the instance name \(instance)", cause: .unexpectedReply("\(reply)"))
        }
    }

    /// Gives the name up, if this process (`token`) still holds it.
    public func releaseInstance(token: String) throws(RedisError) {
        _ = try run(.release, keys: [Array((keyPrefix + "instance:" + instance).utf8)], [Array(token.utf8)],
                    doing: "releasing the instance name \(instance)")
    }

    // MARK: Scripts

    /// Whole milliseconds, at least one: what Redis's PX and PEXPIRE take.
    private static func milliseconds(_ duration: Duration) -> Int64 {
        max(1, duration.components.seconds * 1000 + duration.components.attoseconds / 1_000_000_000_000_000)
    }

    private func run(_ script: Script, keys: [[UInt8]], _ arguments: [[UInt8]], doing: String) throws(RedisError) -> RedisValue {
        let reply = try connection.evaluate(script.source, sha: &loaded[script], keys: keys, arguments: arguments, doing: doing)
        // A script that may have written counts once the replicas asked for have it: a write on
        // the primary alone is lost with the primary (Sentinel promotes a replica without it),
        // so it is failed here and never acknowledged. Its caller treats it as any failed write
        // whose outcome is unknown (the next write of that copy finds the version it left, or
        // not). A script that wrote nothing makes WAIT answer at once.
        guard replicas > 0, script != .read else { return reply }
        let waited = try connection.command([Array("WAIT".utf8), Array(String(replicas).utf8), replicaWait],
                                            doing: "\(doing): waiting for \(replicas) replicas")
        guard case .integer(let confirmed) = waited else { throw RedisError(doing: doing, cause: .unexpectedReply("WAIT answered \(waited)")) }
        guard confirmed >= replicas else { throw RedisError(doing: doing, cause: .unreplicated(wanted: replicas, confirmed: Int(confirmed))) }
        return reply
    }

    private enum Script: CaseIterable {
        case create, write, fold, takeOver, read, remove, confirm, claim, release, moveUntagged

        var source: String {
            switch self {
            // KEYS: the session, its answered requests, their order, its log (see the type's
            // comment). Every key a script touches gets the same time to live.
            case .create:
                // A session's answered requests and log start empty, whatever an earlier one of
                // the id left.
                return """
                if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
                redis.call('HSET', KEYS[1], 'holder', ARGV[1], 'owner', ARGV[2], 'version', '1', 'base', ARGV[3], 'baseVersion', '1')
                redis.call('PEXPIRE', KEYS[1], ARGV[4])
                redis.call('DEL', KEYS[2], KEYS[3], KEYS[4])
                return 1
                """
            case .write:
                // ARGV: holder, expected version, the change, ttl, answered key ('' for none), its
                // entry, how many answers to keep, 'whole' or 'delta'. {2, ..., entry}: the
                // request was answered. A delta goes on the log; a whole snapshot replaces the
                // base and empties it. {3, ...}: the log does not lead from the base to the
                // version the delta follows (its key evicted or expired apart from the hash),
                // so nothing is written and the change must come whole. A session last written by an earlier canvasd has its whole
                // snapshot in 'snapshot': that is the base a first delta follows.
                return """
                local current = redis.call('HMGET', KEYS[1], 'holder', 'version')
                if current[1] ~= ARGV[1] or current[2] ~= ARGV[2] then
                  return {0, current[1] or '', current[2] or ''}
                end
                if ARGV[5] ~= '' then
                  local found = redis.call('HGET', KEYS[2], ARGV[5])
                  if found then return {2, current[1], current[2], found} end
                end
                local version = string.format('%d', tonumber(ARGV[2]) + 1)
                if ARGV[8] == 'delta' then
                  local whole = redis.call('HGET', KEYS[1], 'snapshot')
                  if whole then
                    redis.call('HSET', KEYS[1], 'base', whole, 'baseVersion', ARGV[2])
                    redis.call('HDEL', KEYS[1], 'snapshot')
                    redis.call('DEL', KEYS[4])
                  end
                  local since = redis.call('HGET', KEYS[1], 'baseVersion')
                  if not since or redis.call('LLEN', KEYS[4]) ~= tonumber(ARGV[2]) - tonumber(since) then
                    return {3, current[1], current[2]}
                  end
                  redis.call('RPUSH', KEYS[4], ARGV[3])
                  redis.call('HSET', KEYS[1], 'version', version)
                else
                  redis.call('HSET', KEYS[1], 'version', version, 'base', ARGV[3], 'baseVersion', version)
                  redis.call('HDEL', KEYS[1], 'snapshot')
                  redis.call('DEL', KEYS[4])
                end
                redis.call('PEXPIRE', KEYS[1], ARGV[4])
                redis.call('PEXPIRE', KEYS[4], ARGV[4])
                if ARGV[5] ~= '' then
                  redis.call('HSET', KEYS[2], ARGV[5], ARGV[6])
                  if redis.call('RPUSH', KEYS[3], ARGV[5]) > tonumber(ARGV[7]) then
                    redis.call('HDEL', KEYS[2], redis.call('LPOP', KEYS[3]))
                  end
                end
                redis.call('PEXPIRE', KEYS[2], ARGV[4])
                redis.call('PEXPIRE', KEYS[3], ARGV[4])
                return {1, ARGV[1], version, redis.call('LLEN', KEYS[4]), redis.call('HSTRLEN', KEYS[1], 'base')}
                """
            case .fold:
                // ARGV: holder, the version the base is, the base, ttl. 1: folded; 0: the session
                // moved on (a later version, another holder, or gone), and the log stays.
                return """
                local current = redis.call('HMGET', KEYS[1], 'holder', 'version')
                if current[1] ~= ARGV[1] or current[2] ~= ARGV[2] then return 0 end
                redis.call('HSET', KEYS[1], 'base', ARGV[3], 'baseVersion', ARGV[2])
                redis.call('HDEL', KEYS[1], 'snapshot')
                redis.call('DEL', KEYS[4])
                redis.call('PEXPIRE', KEYS[1], ARGV[4])
                return 1
                """
            case .takeOver:
                // {version, whole snapshot, its version, log, [answer]}. A session an earlier
                // canvasd wrote is its 'snapshot' with an empty log.
                return """
                local current = redis.call('HMGET', KEYS[1], 'owner', 'version', 'snapshot', 'base', 'baseVersion')
                if not current[2] or current[1] ~= ARGV[2] then return false end
                redis.call('HSET', KEYS[1], 'holder', ARGV[1])
                redis.call('PEXPIRE', KEYS[1], ARGV[3])
                redis.call('PEXPIRE', KEYS[2], ARGV[3])
                redis.call('PEXPIRE', KEYS[3], ARGV[3])
                redis.call('PEXPIRE', KEYS[4], ARGV[3])
                local taken
                if current[3] then
                  taken = {current[2], current[3], current[2], {}}
                else
                  taken = {current[2], current[4] or '', current[5] or current[2], redis.call('LRANGE', KEYS[4], 0, -1)}
                end
                if ARGV[4] ~= '' then
                  local found = redis.call('HGET', KEYS[2], ARGV[4])
                  if found then taken[5] = found end
                end
                return taken
                """
            case .read:
                return """
                local current = redis.call('HMGET', KEYS[1], 'version', 'snapshot', 'base', 'baseVersion')
                if not current[1] then return false end
                if current[2] then return {current[1], current[2], current[1], {}} end
                return {current[1], current[3] or '', current[4] or current[1], redis.call('LRANGE', KEYS[4], 0, -1)}
                """
            case .remove:
                // 1: removed; 0: another instance holds it; -1: no session (what it left goes).
                return """
                local holder = redis.call('HGET', KEYS[1], 'holder')
                if holder == false then
                  redis.call('DEL', KEYS[2], KEYS[3], KEYS[4])
                  return -1
                end
                if holder ~= ARGV[1] then return 0 end
                redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4])
                return 1
                """
            case .confirm:
                return """
                local current = redis.call('HMGET', KEYS[1], 'holder', 'version')
                if current[1] ~= ARGV[1] or current[2] ~= ARGV[2] then return 0 end
                if ARGV[4] ~= '' and redis.call('HEXISTS', KEYS[2], ARGV[4]) == 1 then return 0 end
                redis.call('PEXPIRE', KEYS[2], ARGV[3])
                redis.call('PEXPIRE', KEYS[3], ARGV[3])
                redis.call('PEXPIRE', KEYS[4], ARGV[3])
                return redis.call('PEXPIRE', KEYS[1], ARGV[3])
                """
            case .moveUntagged:
                // KEYS: the four untagged keys, then the four tagged ones. Each key that exists
                // keeps its time to live through RENAME.
                return """
                if redis.call('EXISTS', KEYS[1]) == 0 or redis.call('EXISTS', KEYS[5]) == 1 then return 0 end
                for index = 1, 4 do
                  if redis.call('EXISTS', KEYS[index]) == 1 then redis.call('RENAME', KEYS[index], KEYS[index + 4]) end
                end
                return 1
                """
            case .claim:
                // -1: held by this token (claimed or renewed); else the other holder's time left.
                return """
                local holder = redis.call('GET', KEYS[1])
                if holder == false or holder == ARGV[1] then
                  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
                  return -1
                end
                return math.max(0, redis.call('PTTL', KEYS[1]))
                """
            case .release:
                return """
                if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
                return 0
                """
            }
        }
    }
}

extension RedisError {
    var isNoScript: Bool {
        if case .server(let message) = cause { return message.hasPrefix("NOSCRIPT") }
        return false
    }
}
