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
/// Each operation is one Lua script, atomic in Redis, run by its SHA-1 once loaded.
public final class SessionSnapshotStore {
    /// What a write came to.
    public enum WriteOutcome: Sendable, Equatable {
        case written(version: UInt64)
        /// Another instance holds the session now, or it is at another version, or it expired:
        /// the local copy is stale and must not be acknowledged.
        case lost(holder: String?, version: UInt64?)
    }

    public struct Snapshot: Sendable, Equatable {
        public var version: UInt64
        public var bytes: [UInt8]

        public init(version: UInt64, bytes: [UInt8]) {
            self.version = version
            self.bytes = bytes
        }
    }

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
        ttlMilliseconds = Array(String(max(1, ttl.components.seconds * 1000 + ttl.components.attoseconds / 1_000_000_000_000_000)).utf8)
        _ = try connection.command(["PING"], doing: "checking the session store at \(connection.url)")
    }

    public var address: String { connection.url.description }

    private func key(_ session: String) -> [UInt8] { Array((keyPrefix + session).utf8) }

    /// Stores a new session at version 1, held by this instance. False if the id is taken.
    public func create(_ session: String, owner: String?, snapshot: [UInt8]) throws(RedisError) -> Bool {
        let reply = try run(.create, keys: [key(session)],
                            [holder, Array((owner ?? "").utf8), snapshot, ttlMilliseconds],
                            doing: "storing new session \(session)")
        return reply == .integer(1)
    }

    /// Writes the session's next version, if it is still at `expected` and held by this instance.
    public func write(_ session: String, snapshot: [UInt8], expected: UInt64) throws(RedisError) -> WriteOutcome {
        let doing = "writing session \(session) at version \(expected + 1)"
        let reply = try run(.write, keys: [key(session)],
                            [holder, Array(String(expected).utf8), snapshot, ttlMilliseconds],
                            doing: doing)
        guard case .array(let fields) = reply, fields.count == 3 else {
            throw RedisError(doing: doing, cause: .unexpectedReply("\(reply)"))
        }
        let heldBy = fields[1].string.flatMap { $0.isEmpty ? nil : $0 }
        let version = fields[2].string.flatMap { UInt64($0) }
        if fields[0] == .integer(1), let version { return .written(version: version) }
        return .lost(holder: heldBy, version: version)
    }

    /// Takes the session over: this instance becomes its holder, and gets its latest snapshot.
    /// nil when there is no such session, or it belongs to another client (told apart from
    /// nothing, so ids cannot be probed).
    public func takeOver(_ session: String, owner: String?) throws(RedisError) -> Snapshot? {
        let doing = "taking session \(session) over"
        let reply = try run(.takeOver, keys: [key(session)],
                            [holder, Array((owner ?? "").utf8), ttlMilliseconds], doing: doing)
        switch reply {
        case .null: return nil
        case .array(let fields) where fields.count == 2:
            guard let version = fields[0].string.flatMap({ UInt64($0) }), case .bytes(let bytes) = fields[1] else {
                throw RedisError(doing: doing, cause: .unexpectedReply("\(reply)"))
            }
            return Snapshot(version: version, bytes: bytes)
        default:
            throw RedisError(doing: doing, cause: .unexpectedReply("\(reply)"))
        }
    }

    /// Removes the session if this instance holds it. Returns whether it did.
    @discardableResult
    public func remove(_ session: String) throws(RedisError) -> Bool {
        try run(.remove, keys: [key(session)], [holder], doing: "removing session \(session)") == .integer(1)
    }

    /// Whether this instance still holds the session at version `expected`, renewing its time
    /// to live if so: what a read must know before it answers from a local copy.
    public func confirm(_ session: String, expected: UInt64) throws(RedisError) -> Bool {
        try run(.confirm, keys: [key(session)], [holder, Array(String(expected).utf8), ttlMilliseconds],
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
        let milliseconds = max(1, lease.components.seconds * 1000 + lease.components.attoseconds / 1_000_000_000_000_000)
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

    private func run(_ script: Script, keys: [[UInt8]], _ arguments: [[UInt8]], doing: String) throws(RedisError) -> RedisValue {
        for attempt in 0..<2 {
            if loaded[script] == nil {
                let sha = try connection.command(["SCRIPT", "LOAD", script.source], doing: "\(doing): loading its script")
                guard let text = sha.string else { throw RedisError(doing: doing, cause: .unexpectedReply("\(sha)")) }
                loaded[script] = text
            }
            do {
                return try connection.command([Array("EVALSHA".utf8), Array(loaded[script]!.utf8), Array(String(keys.count).utf8)]
                                              + keys + arguments, doing: doing)
            } catch where attempt == 0 && error.isNoScript {
                // Redis restarted (or flushed its scripts) since we loaded it: load it again.
                loaded = [:]
            }
        }
        preconditionFailure("the loop returns or throws")
    }

    private enum Script: CaseIterable {
        case create, write, takeOver, remove, confirm, claim, release

        var source: String {
            switch self {
            case .create:
                return """
                if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
                redis.call('HSET', KEYS[1], 'holder', ARGV[1], 'owner', ARGV[2], 'version', '1', 'snapshot', ARGV[3])
                redis.call('PEXPIRE', KEYS[1], ARGV[4])
                return 1
                """
            case .write:
                return """
                local current = redis.call('HMGET', KEYS[1], 'holder', 'version')
                if current[1] ~= ARGV[1] or current[2] ~= ARGV[2] then
                  return {0, current[1] or '', current[2] or ''}
                end
                local version = string.format('%d', tonumber(ARGV[2]) + 1)
                redis.call('HSET', KEYS[1], 'version', version, 'snapshot', ARGV[3])
                redis.call('PEXPIRE', KEYS[1], ARGV[4])
                return {1, ARGV[1], version}
                """
            case .takeOver:
                return """
                local current = redis.call('HMGET', KEYS[1], 'owner', 'version', 'snapshot')
                if not current[2] or current[1] ~= ARGV[2] then return false end
                redis.call('HSET', KEYS[1], 'holder', ARGV[1])
                redis.call('PEXPIRE', KEYS[1], ARGV[3])
                return {current[2], current[3]}
                """
            case .remove:
                return """
                if redis.call('HGET', KEYS[1], 'holder') == ARGV[1] then return redis.call('DEL', KEYS[1]) end
                return 0
                """
            case .confirm:
                return """
                local current = redis.call('HMGET', KEYS[1], 'holder', 'version')
                if current[1] == ARGV[1] and current[2] == ARGV[2] then return redis.call('PEXPIRE', KEYS[1], ARGV[3]) end
                return 0
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
