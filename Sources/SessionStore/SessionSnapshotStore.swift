import Foundation

/// Session snapshots in Redis, shared by every canvasd instance, with compare-and-set.
///
/// A session is one hash, `canvas:session:<id>`: `holder` (the instance acting on it),
/// `owner` (the client key that opened it, empty without authentication), `version` (counts
/// up by one per write) and `snapshot` (opaque bytes). A write lands only if the session is
/// still at the version the writer read and the writer is still its holder, so two instances
/// never both acknowledge a change to one session: an instance that took a session over makes
/// every later write of the instance it took it from fail. The key expires after the idle
/// timeout unless written or touched, which is the session's lease running out.
///
/// Beside it, the session's answered requests: `<key>:answered`, a hash from a key naming
/// each request to what its retry is to be told, and `<key>:order`, those keys oldest first.
/// A write that records a request lands only if the request is not recorded already, in the
/// same script as the compare-and-set: whichever instances run a request, and however late a
/// paused one wakes with it, its change is acknowledged once. The last `answersKept` are kept.
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
    }

    public struct Snapshot: Sendable, Equatable {
        public var version: UInt64
        public var bytes: [UInt8]
        /// What was recorded for the request the take-over asked about, if it was answered.
        public var answer: [UInt8]?

        public init(version: UInt64, bytes: [UInt8], answer: [UInt8]? = nil) {
            self.version = version
            self.bytes = bytes
            self.answer = answer
        }
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

    /// `instance`: this process's name as holder (unique among instances); `ttl`: how long an
    /// untouched session lives (canvasd's idle timeout).
    public init(url: String, instance: String, ttl: Duration, keyPrefix: String = "canvas:session:",
                timeout: Duration = .seconds(2)) throws(RedisError) {
        connection = try RedisConnection(url: RedisURL(url), timeout: timeout)
        self.instance = instance
        self.ttl = ttl
        self.keyPrefix = keyPrefix
        holder = Array(instance.utf8)
        ttlMilliseconds = Array(String(Self.milliseconds(ttl)).utf8)
        _ = try connection.command(["PING"], doing: "checking the session store at \(connection.url)")
    }

    public var address: String { connection.url.description }

    private func key(_ session: String) -> [UInt8] { Array((keyPrefix + session).utf8) }

    /// The session's hash, its answered requests and their order: every script gets all three.
    private func keys(_ session: String) -> [[UInt8]] {
        let base = keyPrefix + session
        return [Array(base.utf8), Array((base + ":answered").utf8), Array((base + ":order").utf8)]
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
        let doing = "writing session \(session) at version \(expected + 1)"
        let reply = try run(.write, keys: keys(session),
                            [holder, Array(String(expected).utf8), snapshot, ttlMilliseconds,
                             answering?.key ?? [], answering?.entry ?? [], Array(String(Self.answersKept).utf8)],
                            doing: doing)
        if case .array(let fields) = reply, fields.count == 4, fields[0] == .integer(2), case .bytes(let entry) = fields[3] {
            return .answered(entry: entry)
        }
        guard case .array(let fields) = reply, fields.count == 3 else {
            throw RedisError(doing: doing, cause: .unexpectedReply("\(reply)"))
        }
        let heldBy = fields[1].string.flatMap { $0.isEmpty ? nil : $0 }
        let version = fields[2].string.flatMap { UInt64($0) }
        if fields[0] == .integer(1), let version { return .written(version: version) }
        return .lost(holder: heldBy, version: version)
    }

    /// Takes the session over: this instance becomes its holder, and gets its latest snapshot,
    /// with what was recorded for the request `asking` names if it was answered. nil when there
    /// is no such session, or it belongs to another client (told apart from nothing, so ids
    /// cannot be probed).
    public func takeOver(_ session: String, owner: String?, asking: [UInt8]? = nil) throws(RedisError) -> Snapshot? {
        let doing = "taking session \(session) over"
        let reply = try run(.takeOver, keys: keys(session),
                            [holder, Array((owner ?? "").utf8), ttlMilliseconds, asking ?? []], doing: doing)
        switch reply {
        case .null: return nil
        case .array(let fields) where fields.count == 2 || fields.count == 3:
            guard let version = fields[0].string.flatMap({ UInt64($0) }), case .bytes(let bytes) = fields[1] else {
                throw RedisError(doing: doing, cause: .unexpectedReply("\(reply)"))
            }
            var answer: [UInt8]?
            if fields.count == 3, case .bytes(let entry) = fields[2] { answer = entry }
            return Snapshot(version: version, bytes: bytes, answer: answer)
        default:
            throw RedisError(doing: doing, cause: .unexpectedReply("\(reply)"))
        }
    }

    /// Removes the session if this instance holds it. Returns whether it did.
    @discardableResult
    public func remove(_ session: String) throws(RedisError) -> Bool {
        try run(.remove, keys: keys(session), [holder], doing: "removing session \(session)") == .integer(1)
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
        try connection.command([Array("HGET".utf8), key(session), Array("owner".utf8)], doing: "reading the owner of session \(session)").string
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
        try connection.evaluate(script.source, sha: &loaded[script], keys: keys, arguments: arguments, doing: doing)
    }

    private enum Script: CaseIterable {
        case create, write, takeOver, remove, confirm, claim, release

        var source: String {
            switch self {
            // KEYS: the session, its answered requests, their order (see the type's comment).
            case .create:
                // A session's answered requests start empty, whatever an earlier one of the id left.
                return """
                if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
                redis.call('HSET', KEYS[1], 'holder', ARGV[1], 'owner', ARGV[2], 'version', '1', 'snapshot', ARGV[3])
                redis.call('PEXPIRE', KEYS[1], ARGV[4])
                redis.call('DEL', KEYS[2], KEYS[3])
                return 1
                """
            case .write:
                // ARGV: holder, expected version, snapshot, ttl, answered key ('' for none), its
                // entry, how many answers to keep. {2, ..., entry}: the request was answered.
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
                redis.call('HSET', KEYS[1], 'version', version, 'snapshot', ARGV[3])
                redis.call('PEXPIRE', KEYS[1], ARGV[4])
                if ARGV[5] ~= '' then
                  redis.call('HSET', KEYS[2], ARGV[5], ARGV[6])
                  if redis.call('RPUSH', KEYS[3], ARGV[5]) > tonumber(ARGV[7]) then
                    redis.call('HDEL', KEYS[2], redis.call('LPOP', KEYS[3]))
                  end
                end
                redis.call('PEXPIRE', KEYS[2], ARGV[4])
                redis.call('PEXPIRE', KEYS[3], ARGV[4])
                return {1, ARGV[1], version}
                """
            case .takeOver:
                return """
                local current = redis.call('HMGET', KEYS[1], 'owner', 'version', 'snapshot')
                if not current[2] or current[1] ~= ARGV[2] then return false end
                redis.call('HSET', KEYS[1], 'holder', ARGV[1])
                redis.call('PEXPIRE', KEYS[1], ARGV[3])
                redis.call('PEXPIRE', KEYS[2], ARGV[3])
                redis.call('PEXPIRE', KEYS[3], ARGV[3])
                if ARGV[4] ~= '' then
                  local found = redis.call('HGET', KEYS[2], ARGV[4])
                  if found then return {current[2], current[3], found} end
                end
                return {current[2], current[3]}
                """
            case .remove:
                return """
                if redis.call('HGET', KEYS[1], 'holder') == ARGV[1] then return redis.call('DEL', KEYS[1], KEYS[2], KEYS[3]) > 0 and 1 or 0 end
                return 0
                """
            case .confirm:
                return """
                local current = redis.call('HMGET', KEYS[1], 'holder', 'version')
                if current[1] ~= ARGV[1] or current[2] ~= ARGV[2] then return 0 end
                if ARGV[4] ~= '' and redis.call('HEXISTS', KEYS[2], ARGV[4]) == 1 then return 0 end
                redis.call('PEXPIRE', KEYS[2], ARGV[3])
                redis.call('PEXPIRE', KEYS[3], ARGV[3])
                return redis.call('PEXPIRE', KEYS[1], ARGV[3])
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
