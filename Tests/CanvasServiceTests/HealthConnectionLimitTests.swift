@testable import CanvasOperations
@testable import CanvasService
import Foundation
import Glibc
import Logging
import Testing

/// The health endpoint's connection limit, on real loopback connections: past it a new
/// connection is closed as soon as it is accepted, and the ones within it are still answered.
@Suite("health endpoint connection limit")
struct HealthConnectionLimitTests {
    /// A connected TCP socket to `127.0.0.1:port`.
    static func connect(_ port: UInt16) throws -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        #expect(fd >= 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        #expect(result == 0, "connect: errno \(errno)")
        return fd
    }

    /// Whether the peer has closed `fd` (a read finds its end), without waiting.
    static func closedByPeer(_ fd: Int32) -> Bool {
        var byte: UInt8 = 0
        return recv(fd, &byte, 1, Int32(MSG_DONTWAIT)) == 0
    }

    /// The first line of the answer to a `/livez` sent on `fd`.
    static func probe(_ fd: Int32) -> String {
        let request = Array("GET /livez HTTP/1.1\r\nHost: t\r\n\r\n".utf8)
        _ = request.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        var timeout = timeval(tv_sec: 5, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var buffer = [UInt8](repeating: 0, count: 512)
        let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        guard count > 0 else { return "" }
        return String(decoding: buffer[..<count], as: UTF8.self).components(separatedBy: "\r\n")[0]
    }

    @Test("connections past the limit are closed at once; those within it are answered")
    func limit() throws {
        let endpoint = try HealthEndpoint(address: "0", pulse: ServerPulse(), metrics: ServiceMetrics(), instance: "t",
                                          sessionStore: nil, logger: Logger(label: "test"), connectionLimit: 3)
        endpoint.start()
        defer { endpoint.stop() }
        let port = UInt16(endpoint.address.split(separator: ":").last!)!
        var sockets: [Int32] = []
        for _ in 0..<5 { sockets.append(try Self.connect(port)) }
        defer { for fd in sockets { close(fd) } }
        // The closing of the two past the limit, seen within a generous time.
        let deadline = Date().addingTimeInterval(3)
        while sockets.filter(Self.closedByPeer).count < 2, Date() < deadline { usleep(50_000) }
        #expect(sockets.map(Self.closedByPeer) == [false, false, false, true, true])
        #expect(Self.probe(sockets[0]) == "HTTP/1.1 200 OK")
        // One closed makes room for a new one.
        close(sockets[1])
        usleep(200_000)
        let another = try Self.connect(port)
        sockets[1] = another
        #expect(Self.probe(another) == "HTTP/1.1 200 OK")
    }
}
