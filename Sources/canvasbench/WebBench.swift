import ArgumentParser
import CanvasClient
import CanvasOperations
import CanvasProtocol
import Foundation
import Glibc
import ZeroMQ

/// canvasd's ws:// endpoints (SwiftNIO) against its tcp:// one, in the same process and run:
/// the round trip of `canvas.state` from a libzmq DEALER over each; what idle authenticated web
/// connections cost in memory, and the tcp round trip while they are held; what tokenless peers
/// reconnecting as fast as they are closed cost in CPU, and tcp `hello`'s p99 meanwhile.
struct WebBench: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "web", abstract: "ws:// against tcp:// on one canvasd.")

    @Option(help: "Round trips per transport and round.") var requests = 5_000
    @Option(help: "Rounds, alternating which transport goes first; the ratio is the median over rounds.") var rounds = 7
    @Option(help: "Idle authenticated ws:// connections held (0: skip).") var idle = 10_000
    @Option(help: "Tokenless peers reconnecting as they are closed (0: skip).") var churn = 3_000
    @Option(help: "Seconds the tokenless peers keep reconnecting.") var churnSeconds = 25.0
    @Option(help: "Subscribers that never read, beside one that does, while --stuck-events events go out (0: skip).") var stuck = 200
    @Option(help: "Events published while the stuck subscribers hold on.") var stuckEvents = 10_000
    @Flag(help: "Serve the web endpoints without tokens (loopback), so ws:// requests carry none, as tcp:// ones do.")
    var withoutTokens = false

    func run() throws {
        _ = ProcessLimits.raiseDescriptorLimit()
        let context = try ZMQContext()
        let tcp = "tcp://127.0.0.1:\(try freePort())", events = "tcp://127.0.0.1:\(try freePort())"
        let wsPort = try freePort(), wsEventsPort = try freePort()
        let tokens = NSTemporaryDirectory() + "canvasbench-tokens-\(getpid())"
        try "bench 0123456789abcdef0123456789abcdef\n".write(toFile: tokens, atomically: true, encoding: .utf8)
        let canvasd = try Child(Sibling.path("canvasd"), [
            "--endpoint", tcp, "--events", events, "--documents", NSTemporaryDirectory(), "--log-level", "error",
            "--web-endpoint", "ws://127.0.0.1:\(wsPort)", "--web-events", "ws://127.0.0.1:\(wsEventsPort)",
            "--max-web-connections", "\(max(idle + 64, 4_096))",
            "--max-web-connections-per-source", "\(max(idle + 64, 4_096))"] + (withoutTokens ? [] : ["--web-tokens", tokens]))
        defer { canvasd.stop() }
        let pid = canvasd.process.processIdentifier
        let token: String? = withoutTokens ? nil : "0123456789abcdef0123456789abcdef"

        let tcpDealer = try context.socket(.dealer)
        try tcpDealer.setReceiveTimeout(milliseconds: 5_000)
        try tcpDealer.connect(tcp)
        let session = try openSession(tcpDealer, delimiter: true)
        let wsDealer = try context.socket(.dealer)
        try wsDealer.setReceiveTimeout(milliseconds: 5_000)
        try wsDealer.connect("ws://127.0.0.1:\(wsPort)")
        let wsSession = try openSession(wsDealer, delimiter: false, token: token)

        // libzmq's own ROUTER echo on each transport, the same client: what ws:// costs libzmq.
        let echoTCPPort = try freePort(), echoWSPort = try freePort()
        let echoes = [try Child(Sibling.path("canvasbench"), ["echo", "--router", "--endpoint", "tcp://127.0.0.1:\(echoTCPPort)"]),
                      try Child(Sibling.path("canvasbench"), ["echo", "--router", "--endpoint", "ws://127.0.0.1:\(echoWSPort)"])]
        defer { for echo in echoes { echo.stop() } }
        usleep(300_000)
        let echoTCP = try context.socket(.dealer), echoWS = try context.socket(.dealer)
        for (socket, endpoint) in [(echoTCP, "tcp://127.0.0.1:\(echoTCPPort)"), (echoWS, "ws://127.0.0.1:\(echoWSPort)")] {
            try socket.setReceiveTimeout(milliseconds: 5_000)
            try socket.connect(endpoint)
        }
        var echoRatios: [Double] = []

        var tcpMedians: [Double] = [], wsMedians: [Double] = [], ratios: [Double] = []
        var tcpCPU = ThreadTimes(), wsCPU = ThreadTimes()
        for round in 0..<rounds {
            var pair: (tcp: Double, ws: Double) = (0, 0)
            for first in [round % 2 == 0, round % 2 != 0] {
                let before = ThreadTimes.of(pid)
                if first {
                    pair.tcp = try roundTrips(tcpDealer, session: session, delimiter: true).median
                    tcpCPU = tcpCPU + (ThreadTimes.of(pid) - before)
                } else {
                    pair.ws = try roundTrips(wsDealer, session: wsSession, delimiter: false, token: token).median
                    wsCPU = wsCPU + (ThreadTimes.of(pid) - before)
                }
            }
            let echo = (tcp: try roundTrips(echoTCP, session: session, delimiter: true).median,
                        ws: try roundTrips(echoWS, session: session, delimiter: true).median)
            echoRatios.append(echo.ws / echo.tcp)
            tcpMedians.append(pair.tcp)
            wsMedians.append(pair.ws)
            ratios.append(pair.ws / pair.tcp)
        }
        print("canvas.state round trip from a libzmq DEALER, \(requests) requests x \(rounds) rounds, one canvasd")
        print("  tcp://  median \(format(Stats(tcpMedians).median)) µs")
        print("  ws://   median \(format(Stats(wsMedians).median)) µs")
        print("per round, ws / tcp: \(ratios.map { format($0, 2) }.joined(separator: " "))")
        print("round trip, ws:// / tcp://: \(format(Stats(ratios).median, 2))x; target at most 1.1x")
        let perRequest = Double((requests + requests / 10) * rounds)
        for (name, cpu) in [("tcp://", tcpCPU), ("ws://", wsCPU)] {
            print("  canvasd CPU per \(name) round trip, µs by thread: "
                  + cpu.microsecondsByName.sorted { $0.value > $1.value }.filter { $0.value > 0 }
                      .map { "\($0.key) \(format($0.value / perRequest, 1))" }.joined(separator: ", "))
        }
        print("libzmq's ROUTER echo, ws:// / tcp:// (the client's ws:// engine and libzmq's own): "
              + "\(format(Stats(echoRatios).median, 2))x (\(echoRatios.map { format($0, 2) }.joined(separator: " ")))")

        if idle > 0 {
            let before = Memory.of(pid).rss
            let quiet = try roundTrips(tcpDealer, session: session, delimiter: true).median
            var held: [Int32] = []
            defer { for fd in held { close(fd) } }
            for _ in 0..<idle {
                guard let fd = try? WebPeer.open(port: wsPort) else { break }
                try WebPeer.request(fd, "{\"id\":1,\"method\":\"hello\"" + (token.map { ",\"token\":\"\($0)\"" } ?? "") + "}")
                held.append(fd)
            }
            usleep(300_000)
            let after = Memory.of(pid).rss
            let busy = try roundTrips(tcpDealer, session: session, delimiter: true).median
            print("\(held.count) idle authenticated ws:// connections: canvasd RSS \(format(before)) -> \(format(after)) MB, "
                  + "\(format((after - before) * 1024 / Double(max(1, held.count)), 1)) KiB each; target at most 20 KiB")
            print("tcp:// round trip with them held: \(format(busy)) µs against \(format(quiet)) µs idle, \(format(busy / quiet, 2))x; target at most 1.2x")
        }

        if stuck > 0 {
            try stuckSubscribers(pid: pid, dealer: wsDealer, session: wsSession, eventsPort: wsEventsPort, token: token)
        }

        if churn > 0 {
            let quiet = try helloTimes(tcpDealer, seconds: 2)
            let cpuBefore = ThreadTimes.of(pid)
            let stop = Shared(false)
            let counted = Shared(0)
            let churning = Thread { WebPeer.churn(port: wsPort, peers: churn, stop: stop, connections: counted) }
            churning.start()
            let start = Date()
            let loaded = try helloTimes(tcpDealer, seconds: churnSeconds)
            let elapsed = Date().timeIntervalSince(start)
            stop.value = true
            while !churning.isFinished { usleep(10_000) }
            let byThread = (ThreadTimes.of(pid) - cpuBefore).microsecondsByName
            let cpu = byThread.values.reduce(0, +) / 1e6
            let web = byThread.filter { $0.key.hasPrefix("NIO-ELT") }.values.reduce(0, +) / 1e6
            print("\(churn) tokenless ws:// peers reconnecting for \(format(elapsed)) s: \(counted.value) connections; "
                  + "canvasd used \(format(cpu / elapsed * 100)) % of a core (the web event loop \(format(web / elapsed * 100)) %, "
                  + "the rest mostly the hello probes); target at most 10 %")
            print("tcp:// hello meanwhile: p50 \(format(loaded.median)) µs, p99 \(format(loaded.percentile(99) / 1000, 2)) ms "
                  + "(idle: p99 \(format(quiet.percentile(99) / 1000, 2)) ms); target p99 at most 50 ms")
        }
    }

    /// The latency of a session's event to a subscriber that reads, with `stuck` subscribers of
    /// the same session that never read and without, and canvasd's memory meanwhile.
    private func stuckSubscribers(pid: Int32, dealer: ZMQSocket, session: String, eventsPort: Int, token: String?) throws {
        let subscription = [0x00, 0x01] + Array(((token.map { "\($0)\n" } ?? "") + "\(session).").utf8)
        let reader = try WebPeer.open(port: eventsPort)
        defer { close(reader) }
        try WebPeer.send(reader, subscription)
        usleep(200_000)
        var id = 2_000_000
        /// Double taps, each timed from its request to its `pencil.doubleTap` event at the reader.
        func taps(_ count: Int) throws -> (Stats, events: Int) {
            let clock = ContinuousClock()
            var samples: [Double] = [], events = 0
            for _ in 0..<count {
                id += 1
                let start = clock.now
                _ = try call(dealer, "{\"id\":\(id),\"method\":\"pencil.doubleTap\",\"session\":\"\(session)\""
                             + (token.map { ",\"token\":\"\($0)\"" } ?? "") + "}", delimiter: false)
                while true {
                    let topic = try WebPeer.receive(reader)
                    _ = try WebPeer.receive(reader)
                    events += 1
                    if topic.count > 1, String(decoding: topic.dropFirst(), as: UTF8.self).hasSuffix("pencil.doubleTap") { break }
                }
                samples.append((clock.now - start).microseconds)
            }
            return (Stats(samples), events)
        }
        let quiet = try taps(500).0
        // The same fan-out to subscribers that read everything (a thread drains them): what 200
        // more writes per event cost, stuck or not.
        var readers: [Int32] = []
        for _ in 0..<stuck {
            guard let fd = try? WebPeer.open(port: eventsPort) else { break }
            try WebPeer.send(fd, subscription)
            readers.append(fd)
        }
        let draining = Shared(true)
        let drained = readers
        let drainer = Thread {
            var buffer = [UInt8](repeating: 0, count: 1 << 16)
            while draining.value {
                var polled = drained.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
                guard poll(&polled, nfds_t(polled.count), 50) > 0 else { continue }
                for entry in polled where entry.revents != 0 { _ = read(entry.fd, &buffer, buffer.count) }
            }
        }
        drainer.start()
        usleep(200_000)
        let reading = try taps(1000).0
        draining.value = false
        while !drainer.isFinished { usleep(10_000) }
        for fd in readers { close(fd) }
        usleep(200_000)
        var held: [Int32] = []
        defer { for fd in held { close(fd) } }
        for _ in 0..<stuck {
            guard let fd = try? WebPeer.open(port: eventsPort, receiveBuffer: 4096) else { break }
            try WebPeer.send(fd, subscription)
            held.append(fd)
        }
        usleep(200_000)
        let before = Memory.of(pid).rss
        var events = 0
        var loaded: [Double] = []
        while events < stuckEvents {
            let (stats, count) = try taps(100)
            events += count
            loaded += stats.sorted
        }
        let after = Memory.of(pid).rss
        // Which of them canvasd closed: their FIN comes after what was queued for them, so read
        // it all (for at most 5 s) and count the ends.
        var ended = Set<Int32>()
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        let deadline = Date().addingTimeInterval(5)
        while ended.count < held.count, Date() < deadline {
            var polled = held.filter { !ended.contains($0) }.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
            guard poll(&polled, nfds_t(polled.count), 100) > 0 else { continue }
            for entry in polled where entry.revents != 0 {
                if read(entry.fd, &buffer, buffer.count) <= 0 { ended.insert(entry.fd) }
            }
        }
        let stillOpen = held.count - ended.count
        let load = Stats(loaded)
        print("\(held.count) subscribers that never read while \(events) events went out: canvasd RSS \(format(before)) -> \(format(after)) MB "
              + "(bound: \(held.count) x --web-queue-bytes); \(held.count - stillOpen) of them closed")
        print("a reading subscriber's double tap to event: p50 \(format(load.median)) µs, p99 \(format(load.percentile(99))) µs with them; "
              + "\(format(reading.median)) and \(format(reading.percentile(99))) µs with \(readers.count) subscribers that read instead "
              + "(p50 stuck / reading \(format(load.median / reading.median, 2))x); \(format(quiet.median)) and "
              + "\(format(quiet.percentile(99))) µs alone")
    }

    private func openSession(_ dealer: ZMQSocket, delimiter: Bool, token: String? = nil) throws -> String {
        let tokenField = token.map { ",\"token\":\"\($0)\"" } ?? ""
        let reply = try call(dealer, "{\"id\":1,\"method\":\"session.open\"\(tokenField)}", delimiter: delimiter)
        guard let range = reply.range(of: "\"session\":\""), let end = reply[range.upperBound...].firstIndex(of: "\"") else {
            throw ValidationError("session.open: \(reply)")
        }
        return String(reply[range.upperBound..<end])
    }

    private func call(_ dealer: ZMQSocket, _ json: String, delimiter: Bool) throws -> String {
        try dealer.send(delimiter ? [[], Array(json.utf8)] : [Array(json.utf8)])
        guard let frames = try dealer.receive(), let last = frames.last else { throw ValidationError("no reply") }
        return String(decoding: last, as: UTF8.self)
    }

    /// Round trip times of `canvas.state`, in µs, after a tenth as warm-up.
    private func roundTrips(_ dealer: ZMQSocket, session: String, delimiter: Bool, token: String? = nil) throws -> Stats {
        let tokenField = token.map { ",\"token\":\"\($0)\"" } ?? ""
        let clock = ContinuousClock()
        var samples: [Double] = []
        samples.reserveCapacity(requests)
        for index in 0..<(requests + requests / 10) {
            let frames = [Array("{\"id\":\(index + 2),\"method\":\"canvas.state\",\"session\":\"\(session)\"\(tokenField)}".utf8)]
            let start = clock.now
            try dealer.send(delimiter ? [[]] + frames : frames)
            guard try dealer.receive() != nil else { throw ValidationError("no reply") }
            if index >= requests / 10 { samples.append((clock.now - start).microseconds) }
        }
        return Stats(samples)
    }

    /// `hello` round trips for `seconds`, one every 5 ms.
    private func helloTimes(_ dealer: ZMQSocket, seconds: Double) throws -> Stats {
        let clock = ContinuousClock()
        let end = clock.now + .milliseconds(Int64(seconds * 1000))
        var samples: [Double] = []
        var id = 1_000_000
        while clock.now < end {
            id += 1
            let start = clock.now
            _ = try call(dealer, "{\"id\":\(id),\"method\":\"hello\"}", delimiter: true)
            samples.append((clock.now - start).microseconds)
            usleep(5_000)
        }
        return Stats(samples)
    }

    private func freePort() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = WebPeer.loopback(port: 0)
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let ok = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { raw in
                bind(fd, raw, length) == 0 && getsockname(fd, raw, &length) == 0
            }
        }
        guard ok else { throw ValidationError("no free port: errno \(errno)") }
        return Int(UInt16(bigEndian: address.sin_port))
    }
}

/// A flag and a counter shared with the churning thread.
final class Shared<Value>: @unchecked Sendable {
    // @unchecked: every access is under `lock`.
    private let lock = NSLock()
    private var stored: Value
    init(_ value: Value) { stored = value }
    var value: Value {
        get { lock.withLock { stored } }
        set { lock.withLock { stored = newValue } }
    }
}

/// A bare ZWS 2.0 peer on a blocking socket, just enough for the benchmark: the upgrade, the
/// routing id, one request and its reply.
enum WebPeer {
    static func loopback(port: Int) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(port).bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        return address
    }

    static let upgrade = Array(("GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        + "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: ZWS2.0\r\n\r\n").utf8)

    static func connectSocket(port: Int, blocking: Bool, receiveBuffer: Int32? = nil) throws -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | (blocking ? 0 : Int32(SOCK_NONBLOCK.rawValue)), 0)
        guard fd >= 0 else { throw ValidationError("socket: errno \(errno)") }
        if var size = receiveBuffer {
            // Before connecting, so the window offered is small from the start.
            setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        }
        var address = loopback(port: port)
        let result = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard result == 0 || (!blocking && errno == EINPROGRESS) else {
            close(fd)
            throw ValidationError("connect: errno \(errno)")
        }
        return fd
    }

    /// A connection upgraded, with its routing id sent and the server's read.
    static func open(port: Int, receiveBuffer: Int32? = nil) throws -> Int32 {
        let fd = try connectSocket(port: port, blocking: true, receiveBuffer: receiveBuffer)
        var timeout = timeval(tv_sec: 5, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        guard write(fd, upgrade, upgrade.count) == upgrade.count else { close(fd); throw ValidationError("upgrade not sent") }
        var head: [UInt8] = []
        var byte: UInt8 = 0
        while !head.suffix(4).elementsEqual([13, 10, 13, 10]) {
            guard read(fd, &byte, 1) == 1 else { close(fd); throw ValidationError("upgrade not answered") }
            head.append(byte)
        }
        try send(fd, [0])
        _ = try receive(fd)
        return fd
    }

    /// One binary WebSocket message, masked (with a zero mask: the bytes go as they are).
    static func send(_ fd: Int32, _ payload: [UInt8]) throws {
        var frame: [UInt8] = [0x82]
        if payload.count < 126 {
            frame.append(0x80 | UInt8(payload.count))
        } else {
            frame += [0x80 | 126, UInt8(payload.count >> 8), UInt8(payload.count & 0xFF)]
        }
        frame += [0, 0, 0, 0] + payload
        guard write(fd, frame, frame.count) == frame.count else { throw ValidationError("not sent: errno \(errno)") }
    }

    static func receive(_ fd: Int32) throws -> [UInt8] {
        func exactly(_ count: Int) throws -> [UInt8] {
            var bytes = [UInt8](repeating: 0, count: count)
            var got = 0
            while got < count {
                let n = bytes.withUnsafeMutableBytes { read(fd, $0.baseAddress! + got, count - got) }
                guard n > 0 else { throw ValidationError("closed") }
                got += n
            }
            return bytes
        }
        let head = try exactly(2)
        var length = Int(head[1] & 0x7F)
        if length == 126 { length = try exactly(2).reduce(0) { $0 << 8 | Int($1) } }
        if length == 127 { length = try exactly(8).reduce(0) { $0 << 8 | Int($1) } }
        return try exactly(length)
    }

    /// One request frame and its reply.
    static func request(_ fd: Int32, _ json: String) throws {
        try send(fd, [0] + Array(json.utf8))
        _ = try receive(fd)
    }

    /// `peers` tokenless connections, each upgraded and left silent, opened again as soon as
    /// canvasd closes it, until `stop`; `connections` counts every one opened.
    static func churn(port: Int, peers: Int, stop: Shared<Bool>, connections: Shared<Int>) {
        enum Phase { case connecting, upgrading, open }
        var sockets: [(fd: Int32, phase: Phase)] = []
        var opened = 0
        func fresh() -> (Int32, Phase)? {
            guard let fd = try? connectSocket(port: port, blocking: false) else { return nil }
            opened += 1
            return (fd, .connecting)
        }
        for _ in 0..<peers { if let peer = fresh() { sockets.append(peer) } }
        var buffer = [UInt8](repeating: 0, count: 4096)
        while !stop.value {
            var polled = sockets.map { pollfd(fd: $0.fd, events: Int16($0.phase == .connecting ? POLLOUT : POLLIN), revents: 0) }
            guard poll(&polled, nfds_t(polled.count), 100) >= 0 else { continue }
            for index in polled.indices where polled[index].revents != 0 {
                let fd = sockets[index].fd
                switch sockets[index].phase {
                case .connecting:
                    if polled[index].revents & Int16(POLLOUT) != 0, write(fd, upgrade, upgrade.count) == upgrade.count {
                        sockets[index].phase = .upgrading
                        continue
                    }
                case .upgrading, .open:
                    let n = read(fd, &buffer, buffer.count)
                    if n > 0 {
                        if sockets[index].phase == .upgrading {
                            // The routing id, then silence.
                            var frame: [UInt8] = [0x82, 0x81, 0, 0, 0, 0, 0]
                            _ = write(fd, &frame, frame.count)
                            sockets[index].phase = .open
                        }
                        continue
                    }
                    if n < 0 && errno == EAGAIN { continue }
                }
                close(fd)
                if let peer = fresh() { sockets[index] = peer } else { sockets[index] = (-1, .open) }
            }
            sockets.removeAll { $0.fd < 0 }
            while sockets.count < peers, let peer = fresh() { sockets.append(peer) }
            connections.value = opened
        }
        for socket in sockets { close(socket.fd) }
        connections.value = opened
    }
}
