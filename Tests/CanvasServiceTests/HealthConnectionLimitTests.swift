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

    static func endpoint(limit: Int) throws -> (HealthEndpoint, UInt16) {
        let endpoint = try HealthEndpoint(address: "0", pulse: ServerPulse(), metrics: ServiceMetrics(), instance: "t",
                                          sessionStore: nil, logger: Logger(label: "test"), connectionLimit: limit)
        endpoint.start()
        return (endpoint, UInt16(endpoint.address.split(separator: ":").last!)!)
    }

    /// Waits (up to 3 s) until `count` of `sockets` are closed by the endpoint; which ones are.
    static func closings(_ sockets: [Int32], count: Int) -> [Bool] {
        let deadline = Date().addingTimeInterval(3)
        while sockets.filter(Self.closedByPeer).count < count, Date() < deadline { usleep(20_000) }
        usleep(100_000)   // and no more than those
        return sockets.map(Self.closedByPeer)
    }

    /// Before, a connection past the limit was closed as soon as it was accepted: connections
    /// held open (4,096 polling /livez every 4 s) kept every new probe out.
    @Test("past the limit the connection that has waited longest is closed, and the new one answered")
    func limit() throws {
        let (endpoint, port) = try Self.endpoint(limit: 3)
        defer { endpoint.stop() }
        var sockets: [Int32] = []
        defer { for fd in sockets { close(fd) } }
        for _ in 0..<5 {
            sockets.append(try Self.connect(port))
            usleep(20_000)
        }
        #expect(Self.closings(sockets, count: 2) == [true, true, false, false, false])
        #expect(Self.probe(sockets[4]) == "HTTP/1.1 200 OK")
        #expect(Self.probe(sockets[2]) == "HTTP/1.1 200 OK")
    }

    @Test("connections kept alive and polling take turns being closed; a new probe is always answered")
    func keptAliveTakeTurns() throws {
        let (endpoint, port) = try Self.endpoint(limit: 3)
        defer { endpoint.stop() }
        var held: [Int32] = []
        defer { for fd in held { close(fd) } }
        for _ in 0..<3 { held.append(try Self.connect(port)) }
        // Each polls once, the first last: it has waited least since its answer.
        for fd in [held[1], held[2], held[0]] {
            #expect(Self.probe(fd) == "HTTP/1.1 200 OK")
            usleep(20_000)
        }
        for round in 0..<3 {
            let fresh = try Self.connect(port)
            #expect(Self.probe(fresh) == "HTTP/1.1 200 OK", "probe \(round) refused")
            close(fresh)
            usleep(50_000)
        }
        // The first new probe made room by closing held[1], whose answer was the oldest; the
        // others found the room the closed probes left.
        #expect(Self.closings(held, count: 1) == [false, true, false])
    }
}
