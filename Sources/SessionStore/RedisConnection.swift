import CHiredis
import Foundation

/// Where Redis is: `redis://[:password@]host[:port][/db]`, or, through Redis Sentinel,
/// `redis-sentinel://[:password@]host[:port][,host[:port]...]/master[/db]`: the sentinels to ask
/// (port 26379 unless given) and the name they know the primary by. The password is the data
/// nodes'; the sentinels are asked without one.
public struct RedisURL: Sendable, Hashable, CustomStringConvertible {
    public var host: String
    public var port: Int
    public var database: Int
    public var password: String?
    /// Set for a `redis-sentinel://` address: then `host` and `port` are the first sentinel's,
    /// and the primary is asked of the sentinels on each connection.
    public var sentinel: Sentinel?

    public struct Sentinel: Sendable, Hashable {
        public var addresses: [Address]
        public var master: String
    }

    public struct Address: Sendable, Hashable, CustomStringConvertible {
        public var host: String
        public var port: Int
        public var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }
    }

    /// A plain address (a sentinel's, or the primary they name).
    public init(host: String, port: Int, database: Int = 0, password: String? = nil) {
        self.host = host
        self.port = port
        self.database = database
        self.password = password
    }

    public init(_ text: String) throws(RedisError) {
        if text.hasPrefix("redis-sentinel://") {
            self = try Self.sentinel(text)
            return
        }
        guard let url = URLComponents(string: text), url.scheme == "redis", let host = url.host, !host.isEmpty else {
            throw Self.bad(text, "expected redis://host[:port][/db] or redis-sentinel://host[:port],host[:port]/master[/db]")
        }
        self.host = host
        port = url.port ?? 6379
        password = url.password.flatMap { $0.isEmpty ? nil : $0 }
        database = try Self.database(url.path.drop { $0 == "/" }, text)
    }

    private static func bad(_ text: String, _ why: String) -> RedisError {
        // The address as given may hold a password: only its shape is named.
        RedisError(doing: "reading the session store address \"\(text.split(separator: "@").last ?? "")\"", cause: .badAddress(why))
    }

    private static func database(_ path: Substring, _ text: String) throws(RedisError) -> Int {
        if path.isEmpty { return 0 }
        guard let number = Int(path), number >= 0 else { throw bad(text, "the database \"\(path)\" is not a number") }
        return number
    }

    private static func sentinel(_ text: String) throws(RedisError) -> RedisURL {
        let usage = "expected redis-sentinel://[:password@]host[:port][,host[:port]...]/master[/db]"
        let rest = text.dropFirst("redis-sentinel://".count)
        guard let slash = rest.firstIndex(of: "/") else { throw bad(text, usage) }
        var authority = rest[..<slash]
        var password: String?
        if let at = authority.lastIndex(of: "@") {
            let user = authority[..<at]
            password = user.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false).last.map { $0.removingPercentEncoding ?? String($0) }
            if password?.isEmpty == true { password = nil }
            authority = authority[authority.index(after: at)...]
        }
        var addresses: [Address] = []
        for part in authority.split(separator: ",", omittingEmptySubsequences: false) {
            var host = part, port = 26379
            if let colon = part.lastIndex(of: ":"), !part.hasSuffix("]") {
                guard let number = Int(part[part.index(after: colon)...]), (1...65535).contains(number) else {
                    throw bad(text, "the sentinel \"\(part)\" has no valid port; \(usage)")
                }
                (host, port) = (part[..<colon], number)
            }
            host = host.hasPrefix("[") && host.hasSuffix("]") ? host.dropFirst().dropLast() : host
            guard !host.isEmpty else { throw bad(text, usage) }
            addresses.append(Address(host: String(host), port: port))
        }
        let path = rest[rest.index(after: slash)...].split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
        guard !addresses.isEmpty, let master = path.first, !master.isEmpty else { throw bad(text, usage) }
        var url = RedisURL(host: addresses[0].host, port: addresses[0].port, database: try database(path.count > 1 ? path[1] : "", text),
                           password: password)
        url.sentinel = Sentinel(addresses: addresses, master: String(master))
        return url
    }

    /// The address without its password, for logs.
    public var description: String {
        if let sentinel {
            return "redis-sentinel://\(sentinel.addresses.map(\.description).joined(separator: ","))/\(sentinel.master)/\(database)"
        }
        return "redis://\(host):\(port)/\(database)"
    }
}

/// A failure talking to Redis: what was being done, and why.
public struct RedisError: Error, Sendable, CustomStringConvertible {
    public enum Cause: Sendable, Equatable {
        case badAddress(String)
        /// hiredis's error code (REDIS_ERR_IO, _EOF, _PROTOCOL, …) and text; for I/O errors
        /// the text is strerror of the errno.
        case connection(code: Int32, message: String)
        /// An error reply from the server (`-ERR …`, `-NOSCRIPT …`).
        case server(String)
        /// A reply of a shape the caller did not expect.
        case unexpectedReply(String)
        /// A write that fewer replicas than asked confirmed within the bound (`WAIT`): it may
        /// be on the primary alone, and is lost with it.
        case unreplicated(wanted: Int, confirmed: Int)
    }

    public let doing: String
    public let cause: Cause

    public init(doing: String, cause: Cause) {
        self.doing = doing
        self.cause = cause
    }

    public var description: String {
        switch cause {
        case .badAddress(let message): return "\(doing): \(message)"
        case .connection(let code, let message): return "\(doing): \(message) (hiredis error \(code))"
        case .server(let message): return "\(doing): Redis answered \(message)"
        case .unexpectedReply(let message): return "\(doing): unexpected reply \(message)"
        case .unreplicated(let wanted, let confirmed):
            return "\(doing): \(confirmed) of the \(wanted) replicas asked for confirmed the write in time"
        }
    }
}

/// A reply from Redis; error replies are thrown instead.
public enum RedisValue: Sendable, Hashable {
    case bytes([UInt8])
    case integer(Int64)
    case array([RedisValue])
    case status(String)
    case null

    public var string: String? {
        switch self {
        case .bytes(let bytes): return String(decoding: bytes, as: UTF8.self)
        case .status(let text): return text
        case .integer(let value): return String(value)
        case .array, .null: return nil
        }
    }
}

/// One blocking connection to Redis, over hiredis.
///
/// Not thread-safe: one owner at a time (canvasd's serving loop). A connection that failed is
/// thrown away and made again on the next command; a command is never sent twice by this
/// layer, since a write whose reply was lost may or may not have happened.
public final class RedisConnection {
    public let url: RedisURL
    private let timeout: Duration
    /// Replies are waited for without a timeout (a subscriber's connection); connecting still
    /// has one.
    private let waitsForever: Bool
    private var context: UnsafeMutablePointer<redisContext>?

    public init(url: RedisURL, timeout: Duration = .seconds(2), waitsForever: Bool = false) throws(RedisError) {
        self.url = url
        self.timeout = timeout
        self.waitsForever = waitsForever
        try connect()
    }

    deinit {
        if let context { redisFree(context) }
    }

    private var timeval: timeval {
        let (seconds, attoseconds) = timeout.components
        return Glibc.timeval(tv_sec: Int(seconds), tv_usec: Int(attoseconds / 1_000_000_000_000))
    }

    public typealias Address = RedisURL.Address

    private func connect() throws(RedisError) {
        let target = try url.sentinel.map { (sentinel) throws(RedisError) in try primary(sentinel) } ?? Address(host: url.host, port: url.port)
        let doing = url.sentinel.map { "connecting to the session store at \(target), the primary of \($0.master) as \(url) names it" }
            ?? "connecting to the session store at \(url)"
        guard let made = redisConnectWithTimeout(target.host, Int32(target.port), timeval) else {
            throw RedisError(doing: doing, cause: .connection(code: -1, message: "hiredis could not allocate a context"))
        }
        if made.pointee.err != 0 {
            let error = Self.contextError(made, doing: doing)
            redisFree(made)
            throw error
        }
        redisSetTimeout(made, waitsForever ? Glibc.timeval(tv_sec: 0, tv_usec: 0) : timeval)
        context = made
        do throws(RedisError) {
            if let password = url.password { _ = try command(["AUTH", password], doing: "authenticating to \(target)") }
            if url.database != 0 { _ = try command(["SELECT", String(url.database)], doing: "selecting database \(url.database)") }
            if let sentinel = url.sentinel {
                // Named by a sentinel that has not yet seen a failover (or a primary that was
                // demoted since): a replica refuses writes, and its reads may be behind.
                let role = try command(["ROLE"], doing: "asking \(target) its role")
                guard case .array(let fields) = role, fields.first?.string == "master" else {
                    throw RedisError(doing: doing, cause: .server("the sentinels named \(target) the primary of \(sentinel.master), and it is not (ROLE: \(role))"))
                }
            }
        } catch {
            drop()
            throw error
        }
    }

    /// The primary the sentinels name for `sentinel.master`: the first sentinel that answers is
    /// believed (each follows the failovers its quorum agreed on).
    private func primary(_ sentinel: RedisURL.Sentinel) throws(RedisError) -> Address {
        let doing = "asking the sentinels (\(sentinel.addresses.map(\.description).joined(separator: ", "))) for the primary of \(sentinel.master)"
        var failures: [String] = []
        for address in sentinel.addresses {
            do {
                let asked = try RedisConnection(url: RedisURL(host: address.host, port: address.port), timeout: timeout)
                let reply = try asked.command(["SENTINEL", "get-master-addr-by-name", sentinel.master], doing: doing)
                guard case .array(let fields) = reply, fields.count == 2, let host = fields[0].string,
                      let port = fields[1].string.flatMap({ Int($0) }) else {
                    failures.append("\(address): no primary named \(sentinel.master) (\(reply))")
                    continue
                }
                return Address(host: host, port: port)
            } catch {
                failures.append("\(address): \(error.cause)")
            }
        }
        throw RedisError(doing: doing, cause: .connection(code: -1, message: failures.joined(separator: "; ")))
    }

    private func drop() {
        if let context { redisFree(context) }
        context = nil
    }

    private static func contextError(_ context: UnsafeMutablePointer<redisContext>, doing: String) -> RedisError {
        let message = withUnsafeBytes(of: context.pointee.errstr) { raw in
            String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
        }
        return RedisError(doing: doing, cause: .connection(code: context.pointee.err, message: message))
    }

    /// Sends one command (each argument binary-safe) and waits for its reply.
    public func command(_ arguments: [String], doing: String) throws(RedisError) -> RedisValue {
        try command(arguments.map { Array($0.utf8) }, doing: doing)
    }

    public func command(_ arguments: [[UInt8]], doing: String) throws(RedisError) -> RedisValue {
        if context == nil { try connect() }
        guard let context else { preconditionFailure("connected above") }
        // One buffer for every argument, so each has a stable address for the call; the
        // trailing zero keeps it non-empty, so even an empty argument has an address.
        var joined: [UInt8] = []
        joined.reserveCapacity(arguments.reduce(1) { $0 + $1.count })
        for argument in arguments { joined.append(contentsOf: argument) }
        joined.append(0)
        let lengths = arguments.map(\.count)
        let raw: UnsafeMutableRawPointer? = joined.withUnsafeBufferPointer { buffer in
            let base = UnsafeRawPointer(buffer.baseAddress!).assumingMemoryBound(to: CChar.self)
            var offset = 0
            var pointers: [UnsafePointer<CChar>?] = []
            pointers.reserveCapacity(lengths.count)
            for length in lengths {
                pointers.append(base + offset)
                offset += length
            }
            return pointers.withUnsafeMutableBufferPointer { argv in
                lengths.withUnsafeBufferPointer { argvlen in
                    redisCommandArgv(context, Int32(lengths.count), argv.baseAddress, argvlen.baseAddress)
                }
            }
        }
        guard let raw else {
            let error = Self.contextError(context, doing: doing)
            drop()   // the connection is unusable after an I/O or protocol error
            throw error
        }
        defer { freeReplyObject(raw) }
        do {
            return try Self.value(raw.assumingMemoryBound(to: redisReply.self), doing: doing)
        } catch {
            // A node that is no longer the primary (a failover demoted it) refuses the write
            // unmade; the next command asks the sentinels again rather than ask it again.
            if error.isNotPrimary { drop() }
            throw error
        }
    }

    /// Runs a Lua script by its SHA-1: loaded first when `sha` is nil, and loaded again once if
    /// Redis has forgotten it since (a restart, a `SCRIPT FLUSH`). `sha` keeps the SHA-1
    /// between calls.
    func evaluate(_ source: String, sha: inout String?, keys: [[UInt8]], arguments: [[UInt8]], doing: String) throws(RedisError)
        -> RedisValue {
        for attempt in 0..<2 {
            if sha == nil {
                let loaded = try command(["SCRIPT", "LOAD", source], doing: "\(doing): loading its script")
                guard let text = loaded.string else { throw RedisError(doing: doing, cause: .unexpectedReply("\(loaded)")) }
                sha = text
            }
            do {
                return try command([Array("EVALSHA".utf8), Array(sha!.utf8), Array(String(keys.count).utf8)] + keys + arguments, doing: doing)
            } catch where attempt == 0 && error.isNoScript {
                sha = nil
            }
        }
        preconditionFailure("the loop returns or throws")
    }

    /// Waits for the next reply the server pushes unasked (a subscribed channel's message),
    /// for as long as the connection's timeout.
    public func nextPush(doing: String) throws(RedisError) -> RedisValue {
        if context == nil { try connect() }
        guard let context else { preconditionFailure("connected above") }
        var raw: UnsafeMutableRawPointer?
        guard redisGetReply(context, &raw) == REDIS_OK, let raw else {
            let error = Self.contextError(context, doing: doing)
            drop()
            throw error
        }
        defer { freeReplyObject(raw) }
        return try Self.value(raw.assumingMemoryBound(to: redisReply.self), doing: doing)
    }

    private static func value(_ reply: UnsafeMutablePointer<redisReply>, doing: String) throws(RedisError) -> RedisValue {
        let r = reply.pointee
        func bytes() -> [UInt8] {
            guard let str = r.str, r.len > 0 else { return [] }
            return Array(UnsafeRawBufferPointer(start: str, count: Int(r.len)))
        }
        switch r.type {
        case REDIS_REPLY_STRING: return .bytes(bytes())
        case REDIS_REPLY_INTEGER: return .integer(Int64(r.integer))
        case REDIS_REPLY_NIL: return .null
        case REDIS_REPLY_STATUS: return .status(String(decoding: bytes(), as: UTF8.self))
        case REDIS_REPLY_ERROR: throw RedisError(doing: doing, cause: .server(String(decoding: bytes(), as: UTF8.self)))
        case REDIS_REPLY_ARRAY:
            var elements: [RedisValue] = []
            elements.reserveCapacity(Int(r.elements))
            for index in 0..<Int(r.elements) {
                guard let element = r.element[index] else { elements.append(.null); continue }
                elements.append(try value(element, doing: doing))
            }
            return .array(elements)
        default:
            throw RedisError(doing: doing, cause: .unexpectedReply("of type \(r.type)"))
        }
    }
}

extension RedisError {
    /// An answer only a node that is not the primary gives: the command was not run.
    var isNotPrimary: Bool {
        if case .server(let message) = cause { return message.hasPrefix("READONLY") || message.hasPrefix("MASTERDOWN") }
        return false
    }
}
