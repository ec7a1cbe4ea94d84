import Foundation
import Glibc
public import Logging
import SessionStore
import Synchronization

/// What the health endpoint reads of the running server: when its loop last turned, and
/// whether it is draining. Written by the loop, read by the endpoint's thread.
public final class ServerPulse: Sendable {
    private let lastTurn = Atomic<UInt64>(ServerPulse.monotonicNanoseconds())
    private let drainingFlag = Atomic<Bool>(false)

    public init() {}

    func turned() { lastTurn.store(Self.monotonicNanoseconds(), ordering: .relaxed) }
    public func startDraining() { drainingFlag.store(true, ordering: .relaxed) }
    public var draining: Bool { drainingFlag.load(ordering: .relaxed) }

    /// Seconds since the loop last turned.
    var sinceTurn: Double { Double(Self.monotonicNanoseconds() &- lastTurn.load(ordering: .relaxed)) / 1e9 }

    static func monotonicNanoseconds() -> UInt64 {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return UInt64(now.tv_sec) * 1_000_000_000 + UInt64(now.tv_nsec)
    }
}

/// A small HTTP endpoint for orchestrators and load balancers (`--health-endpoint`), on a
/// thread of its own so that it can tell a stuck loop from a live one:
///
/// - `GET /livez`: 200 while the request loop has turned within `stuckAfter` (it turns at least
///   every 200 ms when idle), else 503: the process should be restarted.
/// - `GET /readyz`: 200 when live, not draining, and (with a session store) the store answers
///   a PING; else 503 with the reason: take the instance out of rotation.
/// - `GET /metrics`: `ServiceMetrics` in Prometheus text format.
public final class HealthEndpoint: @unchecked Sendable {
    // @unchecked: the listening socket and the Redis connection are used by the endpoint's
    // thread alone once it starts; the rest is immutable or thread-safe.
    public let address: String
    private let listener: Int32
    private let pulse: ServerPulse
    private let metrics: ServiceMetrics
    private let instance: String
    private let store: RedisURL?
    private var storeConnection: RedisConnection?
    private let logger: Logger
    private let stuckAfter: Double = 2.0

    /// Binds `address` (`HOST:PORT`, or `PORT` for loopback; port 0 picks one).
    public init(address: String, pulse: ServerPulse, metrics: ServiceMetrics, instance: String, sessionStore: String?,
                logger: Logger) throws(ServerStartError) {
        let (host, port) = Self.split(address)
        guard (0...65535).contains(port) else { throw .health("--health-endpoint \(address): expected HOST:PORT or PORT") }
        var socketAddress = sockaddr_in()
        socketAddress.sin_family = sa_family_t(AF_INET)
        socketAddress.sin_port = in_port_t(port).bigEndian
        guard inet_pton(AF_INET, host, &socketAddress.sin_addr) == 1 else {
            throw .health("--health-endpoint \(address): \(host) is not an IPv4 address")
        }
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard listener >= 0 else { throw .health("health endpoint: socket: \(String(cString: strerror(errno))) (errno \(errno))") }
        var on: Int32 = 1
        setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &on, socklen_t(MemoryLayout<Int32>.size))
        let bound = withUnsafePointer(to: &socketAddress) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0, listen(listener, 64) == 0 else {
            let code = errno
            close(listener)
            throw .health("health endpoint \(host):\(port): \(String(cString: strerror(code))) (errno \(code))"
                          + (code == EADDRINUSE ? "; give --health-endpoint another port" : ""))
        }
        var actual = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &actual) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(listener, $0, &length) } }
        self.address = "\(host):\(UInt16(bigEndian: actual.sin_port))"
        self.listener = listener
        self.pulse = pulse
        self.metrics = metrics
        self.instance = instance
        self.logger = logger
        store = try? sessionStore.map { (text) throws(RedisError) in try RedisURL(text) }
    }

    public func start() {
        let thread = Thread { [self] in serve() }
        thread.name = "canvasd health"
        thread.start()
    }

    private func serve() {
        while true {
            let client = accept(listener, nil, nil)
            if client < 0 {
                if errno == EINTR || errno == ECONNABORTED { continue }
                // Out of descriptors, say: wait rather than spin; the listener stays.
                usleep(100_000)
                continue
            }
            answer(client)
            // Our side is finished; the peer's close (or a second) ends it, without a reset.
            shutdown(client, Int32(SHUT_WR))
            var scratch = [UInt8](repeating: 0, count: 512)
            while recv(client, &scratch, scratch.count, 0) > 0 {}
            close(client)
        }
    }

    private func answer(_ client: Int32) {
        var timeout = timeval(tv_sec: 1, tv_usec: 0)
        setsockopt(client, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(client, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var buffer = [UInt8](repeating: 0, count: 2048)
        var received = 0
        // The request line is all that matters, but the whole head is read (up to 2 KiB, or 1 s):
        // closing a socket with unread bytes resets it, and the reply can be lost on the way.
        let end = Array("\r\n\r\n".utf8)
        while received < buffer.count {
            let count = buffer.withUnsafeMutableBytes { recv(client, $0.baseAddress! + received, $0.count - received, 0) }
            if count <= 0 { break }
            received += count
            if buffer[..<received].firstRange(of: end) != nil { break }
        }
        let line = String(decoding: buffer[..<received].prefix { $0 != UInt8(ascii: "\r") && $0 != UInt8(ascii: "\n") }, as: UTF8.self)
        let parts = line.split(separator: " ")
        let (status, body, type): (Int, String, String)
        if parts.count >= 2, parts[0] == "GET" || parts[0] == "HEAD" {
            let path = parts[1].split(separator: "?").first.map(String.init) ?? ""
            switch path {
            case "/livez", "/healthz":
                let since = pulse.sinceTurn
                (status, body, type) = since <= stuckAfter
                    ? (200, "ok\n", "text/plain")
                    : (503, "request loop stuck for \(String(format: "%.1f", since)) s\n", "text/plain")
            case "/readyz":
                let reason = notReady()
                (status, body, type) = reason == nil ? (200, "ready\n", "text/plain") : (503, "not ready: \(reason!)\n", "text/plain")
            case "/metrics":
                let resident = MemoryPressure.residentBytes().map(Double.init) ?? 0
                (status, body, type) = (200, metrics.exposition(instance: instance, extra: [
                    ("canvasd_resident_memory_bytes", "Resident memory of the process.", resident),
                    ("canvasd_draining", "1 while the instance drains (SIGTERM), else 0.", pulse.draining ? 1 : 0),
                    ("canvasd_request_loop_idle_seconds", "Seconds since the request loop last turned.", pulse.sinceTurn),
                ]), "text/plain; version=0.0.4; charset=utf-8")
            default:
                (status, body, type) = (404, "no such path: try /livez, /readyz or /metrics\n", "text/plain")
            }
        } else {
            (status, body, type) = (400, "GET /livez, /readyz or /metrics\n", "text/plain")
        }
        let reasons = [200: "OK", 400: "Bad Request", 404: "Not Found", 503: "Service Unavailable"]
        let head = "HTTP/1.0 \(status) \(reasons[status] ?? "")\r\nContent-Type: \(type)\r\nContent-Length: \(body.utf8.count)\r\nConnection: close\r\n\r\n"
        let bytes = Array(head.utf8) + (parts.first == "HEAD" ? [] : Array(body.utf8))
        var sent = 0
        while sent < bytes.count {
            let count = bytes.withUnsafeBytes { send(client, $0.baseAddress! + sent, $0.count - sent, Int32(MSG_NOSIGNAL)) }
            if count <= 0 { break }
            sent += count
        }
    }

    /// Why this instance should not get new clients now, or nil.
    private func notReady() -> String? {
        let since = pulse.sinceTurn
        if since > stuckAfter { return "request loop stuck for \(String(format: "%.1f", since)) s" }
        if pulse.draining { return "draining" }
        guard let store else { return nil }
        do {
            if storeConnection == nil { storeConnection = try RedisConnection(url: store, timeout: .seconds(1)) }
            _ = try storeConnection!.command(["PING"], doing: "checking the session store")
            return nil
        } catch {
            storeConnection = nil
            return "session store: \(error)"
        }
    }

    private static func split(_ address: String) -> (String, Int) {
        guard let colon = address.lastIndex(of: ":") else { return ("127.0.0.1", Int(address) ?? -1) }
        return (String(address[..<colon]), Int(address[address.index(after: colon)...]) ?? -1)
    }
}
