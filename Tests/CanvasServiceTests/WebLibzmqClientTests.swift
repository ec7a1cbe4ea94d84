import CanvasProtocol
import Foundation
import Glibc
import Testing
import ZeroMQ

/// canvasd's ws:// endpoints (SwiftNIO) reached by libzmq's own ws:// client: a DEALER for
/// requests and a SUB for events, as any ZeroMQ program would connect, unchanged.
@Suite("ws:// with libzmq's client", .serialized)
struct WebLibzmqClientTests {
    /// A port nothing listens on now (the kernel's pick, released).
    static func freePort() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        try withUnsafeMutablePointer(to: &address) { pointer in
            try pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { raw in
                guard bind(fd, raw, length) == 0, getsockname(fd, raw, &length) == 0 else { throw POSIXError(.EADDRINUSE) }
            }
        }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    @Test("a libzmq DEALER's requests are answered and a libzmq SUB receives its session's events, in order")
    func dealerAndSubscriber() throws {
        // (zmq_has("ws") says false on libzmq 4.3.4, whose ws:// transport works: connecting tells.)
        let (requestsPort, eventsPort) = (try Self.freePort(), try Self.freePort())
        let server = try LiveServer(arguments: ["--web-endpoint", "ws://127.0.0.1:\(requestsPort)",
                                                "--web-events", "ws://127.0.0.1:\(eventsPort)"])
        defer { server.stop() }
        let context = try ZMQContext()
        let dealer = try context.socket(.dealer)
        try dealer.setReceiveTimeout(milliseconds: 5_000)
        try dealer.connect("ws://127.0.0.1:\(requestsPort)")
        var next = 0
        func call(_ method: String, session: String? = nil, params: String = "{}") throws -> [String: Any] {
            next += 1
            let session = session.map { ",\"session\":\"\($0)\"" } ?? ""
            try dealer.send([Array("{\"id\":\(next),\"method\":\"\(method)\"\(session),\"params\":\(params)}".utf8)])
            let reply = try #require(try dealer.receive(), "no reply to \(method)")
            #expect(reply.count == 1)
            let object = try #require(try JSONSerialization.jsonObject(with: Data(reply[0])) as? [String: Any])
            #expect(object["id"] as? Int == next)
            return object
        }
        let hello = try #require(try call("hello")["result"] as? [String: Any])
        #expect((hello["protocol"] as? String)?.hasPrefix("canvas/") == true)
        let opened = try #require(try call("session.open", params: "{\"transitions\":\"instant\"}")["result"] as? [String: Any])
        let session = try #require(opened["session"] as? String)

        let subscriber = try context.socket(.sub)
        try subscriber.setReceiveTimeout(milliseconds: 5_000)
        try subscriber.connect("ws://127.0.0.1:\(eventsPort)")
        try subscriber.subscribe("\(session).")
        // The subscription is applied once the events endpoint has read it: poll with a request
        // that publishes until the first event arrives.
        var first: [[UInt8]]?
        for _ in 0..<50 where first == nil {
            _ = try call("canvas.open", session: session)
            try subscriber.setReceiveTimeout(milliseconds: 100)
            first = try subscriber.receive()
            if first == nil { _ = try call("canvas.cancel", session: session) }
        }
        let event = try #require(first, "no event reached the libzmq subscriber")
        #expect(String(decoding: event[0], as: UTF8.self).hasPrefix("\(session)."))
        // Every event after it comes, with seq one more each time.
        try subscriber.setReceiveTimeout(milliseconds: 5_000)
        func seq(_ frames: [[UInt8]]) throws -> Int {
            let object = try #require(try JSONSerialization.jsonObject(with: Data(frames[1])) as? [String: Any])
            return try #require(object["seq"] as? Int)
        }
        var last = try seq(event)
        for _ in 0..<20 { _ = try call("pencil.doubleTap", session: session) }
        var taps = 0
        while taps < 20 {
            let frames = try #require(try subscriber.receive(), "an event did not arrive")
            let number = try seq(frames)
            #expect(number == last + 1)
            last = number
            if String(decoding: frames[0], as: UTF8.self).hasSuffix("pencil.doubleTap") { taps += 1 }
        }
    }
}
