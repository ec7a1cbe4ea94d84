public import Foundation

/// A real redis-server for a test: on a free loopback port, in a fresh folder, with nothing
/// saved to disk; killed when released (or by `stop`), so a failing test leaves none behind.
// Every field is set once in init; the later calls (stop, kill) are Process calls, which are thread-safe.
public final class RedisProcess: @unchecked Sendable {
    public let port: Int
    public let folder: URL
    private let process = Process()

    public enum StartError: Error, CustomStringConvertible {
        case notFound
        case notServing(String)
        public var description: String {
            switch self {
            case .notFound: return "no redis-server on PATH or in /usr/bin (Debian's redis-server package)"
            case .notServing(let log): return "redis-server did not start: \(log)"
            }
        }
    }

    public init() throws {
        let executable = ["/usr/bin/redis-server", "/usr/local/bin/redis-server"].first { FileManager.default.isExecutableFile(atPath: $0) }
        guard let executable else { throw StartError.notFound }
        folder = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("redis-\(UInt32.random(in: 0...UInt32.max))")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        port = Self.freePort()
        let log = folder.appendingPathComponent("redis.log")
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = ["--port", "\(port)", "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                             "--dir", folder.path, "--logfile", log.path]
        try process.run()
        // Serving once a PING over a plain socket gets +PONG.
        for _ in 0..<100 {
            if Self.ping(port) { return }
            usleep(20_000)
        }
        stop()
        throw StartError.notServing((try? String(contentsOf: log, encoding: .utf8)) ?? "")
    }

    public var url: String { "redis://127.0.0.1:\(port)/0" }

    public func stop() {
        guard process.isRunning else { return }
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }

    deinit {
        stop()
        try? FileManager.default.removeItem(at: folder)
    }

    /// A port the kernel just handed out and took back: free, unless someone races for it.
    static func freePort() -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) } }
        _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) } }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    static func ping(_ port: Int) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = UInt16(port).bigEndian
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else { return false }
        let ping = Array("PING\r\n".utf8)
        guard write(fd, ping, ping.count) == ping.count else { return false }
        var buffer = [UInt8](repeating: 0, count: 16)
        let count = read(fd, &buffer, buffer.count)
        return count >= 5 && Array(buffer[0..<5]) == Array("+PONG".utf8)
    }
}
