internal import CZeroMQ
import Glibc
import Testing
@testable import ZeroMQ

/// The C shim (CConnectionInfo) read on real connections, each reading set beside the one it
/// replaced: `tcp_info` at its fixed offset and the monitor frame decoded byte by byte.
@Suite("connection info")
struct ConnectionInfoTests {
    @Test("tcp_info: what each end of a real TCP connection has had acknowledged, as the fixed offset read it")
    func tcpInfo() throws {
        let (client, server) = try loopbackPair()
        defer { close(client.rawValue); close(server.rawValue) }
        // A connecting end counts its SYN; the accepting end has sent nothing yet.
        try expectSame(client, 1)
        try expectSame(server, 0)

        try sendAll(client, count: 1000)
        try receiveAll(server, count: 1000)
        try waitFor(client, 1001)
        try expectSame(client, 1001)
        try expectSame(server, 0)

        try sendAll(server, count: 7)
        try receiveAll(client, count: 7)
        try waitFor(server, 7)
        try expectSame(server, 7)
        try expectSame(client, 1001)
    }

    // A closed descriptor is not tried: tests run in parallel, and another may reuse it at once.
    @Test("tcp_info: nothing is read from a descriptor that is not a TCP socket")
    func notTCP() throws {
        let udp = ConnectionDescriptor(rawValue: socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0))
        try #require(udp.rawValue >= 0)
        defer { close(udp.rawValue) }
        #expect(udp.tcpState == nil && OldDecoding.bytesAcknowledged(udp.rawValue) == -1)
        var ends: [Int32] = [-1, -1]
        try #require(pipe(&ends) == 0)
        defer { close(ends[0]); close(ends[1]) }
        let pipeEnd = ConnectionDescriptor(rawValue: ends[0])
        #expect(pipeEnd.tcpState == nil && OldDecoding.bytesAcknowledged(ends[0]) == -1)
    }

    @Test("monitor: a real libzmq connection's connect, accept, handshake and disconnect, as the Swift decoding read them")
    func monitorEvents() throws {
        let context = try ZMQContext()
        let server = try context.socket(.router)
        try server.bind("tcp://127.0.0.1:*")
        let serverEvents = try monitor(server, context, ZMQ_EVENT_ACCEPTED | ZMQ_EVENT_DISCONNECTED | ZMQ_EVENT_HANDSHAKE_SUCCEEDED)
        var client: ZMQSocket? = try context.socket(.dealer)
        let clientEvents = try monitor(client!, context, ZMQ_EVENT_CONNECTED | ZMQ_EVENT_HANDSHAKE_SUCCEEDED)
        try client!.connect(server.lastEndpoint)
        try client!.send([Array("hello".utf8)])
        #expect(try ZMQSocket.poll([server], timeoutMilliseconds: 5000) == [true])
        #expect(try server.receive(wait: false)?.last == Array("hello".utf8))

        let connected = try nextEvent(clientEvents, ZMQ_EVENT_CONNECTED)
        let accepted = try nextEvent(serverEvents, ZMQ_EVENT_ACCEPTED)
        _ = try nextEvent(serverEvents, ZMQ_EVENT_HANDSHAKE_SUCCEEDED)
        _ = try nextEvent(clientEvents, ZMQ_EVENT_HANDSHAKE_SUCCEEDED)
        // The descriptors the events name are the two ends of the connection: each has sent its
        // greeting, and the readings agree with the fixed offset's.
        for descriptor in [connected.descriptor, accepted.descriptor] {
            let state = try #require(descriptor.tcpState)
            #expect(state.bytesAcknowledged > 0)
            #expect(Int64(state.bytesAcknowledged) == OldDecoding.bytesAcknowledged(descriptor.rawValue))
        }

        client = nil
        let disconnected = try nextEvent(serverEvents, ZMQ_EVENT_DISCONNECTED)
        #expect(disconnected.descriptor == accepted.descriptor)
    }

    @Test("monitor: a frame too short to be an event is refused, as the Swift decoding refused it")
    func shortFrames() {
        for size in 0..<6 {
            #expect(MonitorEvent(frame: [UInt8](repeating: 0xff, count: size)) == nil)
            #expect(OldDecoding.event([UInt8](repeating: 0xff, count: size)) == nil)
        }
        let frame: [UInt8] = [0x00, 0x02, 0xff, 0xff, 0xff, 0xff, 0x09]
        let event = MonitorEvent(frame: frame)
        #expect(event?.event == UInt16(ZMQ_EVENT_DISCONNECTED) && event?.descriptor.rawValue == -1)
        let old = OldDecoding.event(frame)
        #expect(old?.event == UInt16(ZMQ_EVENT_DISCONNECTED) && old?.value == -1)
    }

    // MARK: Helpers

    private func expectSame(_ descriptor: ConnectionDescriptor, _ bytes: UInt64,
                            sourceLocation: SourceLocation = #_sourceLocation) throws {
        let state = try #require(descriptor.tcpState, sourceLocation: sourceLocation)
        #expect(state.bytesAcknowledged == bytes, sourceLocation: sourceLocation)
        #expect(OldDecoding.bytesAcknowledged(descriptor.rawValue) == Int64(bytes), sourceLocation: sourceLocation)
    }

    /// The peer's ACK may be delayed: wait for it rather than for a fixed time.
    private func waitFor(_ descriptor: ConnectionDescriptor, _ bytes: UInt64) throws {
        let deadline = ContinuousClock.now + .seconds(5)
        while (descriptor.tcpState?.bytesAcknowledged ?? 0) < bytes && ContinuousClock.now < deadline {
            usleep(1000)
        }
    }

    @Test("tcp_info: the bytes and data segments one end has received, as the connection guard reads them")
    func bytesReceived() throws {
        let (client, server) = try loopbackPair()
        defer { close(client.rawValue); close(server.rawValue) }
        #expect(server.tcpState?.bytesReceived == 0)
        for (round, size) in [100, 7, 300].enumerated() {
            try sendAll(client, count: size)
            let deadline = ContinuousClock.now + .seconds(5)
            let want = [100, 107, 407][round]
            while (server.tcpState?.bytesReceived ?? 0) < UInt64(want) && ContinuousClock.now < deadline { usleep(1_000) }
            #expect(server.tcpState?.bytesReceived == UInt64(want))
            #expect(server.tcpState?.dataSegmentsReceived == UInt32(round + 1))
        }
    }

    @Test("a ZWS 2.0 frame's bytes on the wire, at WebSocket's length steps (RFC 6455 5.2)")
    func wireBytes() {
        // Payload = flags byte + frame; header 2 bytes, +2 from 126, +8 from 65,536; mask 4.
        #expect(ConnectionGuard.wireBytes(frame: 0) == 1 + 6)
        #expect(ConnectionGuard.wireBytes(frame: 124) == 125 + 6)
        #expect(ConnectionGuard.wireBytes(frame: 125) == 126 + 8)
        #expect(ConnectionGuard.wireBytes(frame: 65_534) == 65_535 + 8)
        #expect(ConnectionGuard.wireBytes(frame: 65_535) == 65_536 + 14)
    }

    private func loopbackPair() throws -> (client: ConnectionDescriptor, server: ConnectionDescriptor) {
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        try #require(listener >= 0)
        defer { close(listener) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = UInt32(0x7f00_0001).bigEndian
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        try withUnsafeMutablePointer(to: &address) {
            try $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                try #require(bind(listener, $0, length) == 0)
                try #require(listen(listener, 1) == 0)
                try #require(getsockname(listener, $0, &length) == 0)
            }
        }
        let client = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        try #require(client >= 0)
        try withUnsafePointer(to: &address) {
            try $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { try #require(connect(client, $0, length) == 0) }
        }
        let server = accept(listener, nil, nil)
        try #require(server >= 0)
        return (ConnectionDescriptor(rawValue: client), ConnectionDescriptor(rawValue: server))
    }

    private func sendAll(_ descriptor: ConnectionDescriptor, count: Int) throws {
        let bytes = [UInt8](repeating: 0x61, count: count)
        try #require(write(descriptor.rawValue, bytes, count) == count)
    }

    private func receiveAll(_ descriptor: ConnectionDescriptor, count: Int) throws {
        var buffer = [UInt8](repeating: 0, count: count)
        var got = 0
        while got < count {
            let n = buffer.withUnsafeMutableBytes { read(descriptor.rawValue, $0.baseAddress! + got, count - got) }
            try #require(n > 0)
            got += n
        }
    }

    private func monitor(_ socket: ZMQSocket, _ context: ZMQContext, _ events: Int32) throws -> ZMQSocket {
        let endpoint = "inproc://connection-info-test-\(UInt64.random(in: 0...UInt64.max))"
        try socket.monitor(at: endpoint, events: events)
        let pair = try context.socket(.pair)
        try pair.connect(endpoint)
        return pair
    }

    /// The next event of `kind` on a monitor, each frame on the way decoded both ways.
    private func nextEvent(_ monitor: ZMQSocket, _ kind: Int32) throws -> MonitorEvent {
        let deadline = ContinuousClock.now + .seconds(5)
        while ContinuousClock.now < deadline {
            guard try ZMQSocket.poll([monitor], timeoutMilliseconds: 100) == [true],
                  let frames = try monitor.receive(wait: false) else { continue }
            // Version 1 monitor messages: the event, then the endpoint's address.
            #expect(frames.count == 2)
            let event = try #require(MonitorEvent(frame: frames[0]))
            let old = try #require(OldDecoding.event(frames[0]))
            #expect(event.event == old.event && event.descriptor.rawValue == old.value)
            if Int32(event.event) == kind { return event }
        }
        throw Timeout()
    }

    private struct Timeout: Error {}
}

/// The Swift decoding the shim replaced, kept as the tests' reference.
private enum OldDecoding {
    /// tcpi_bytes_acked at its offset in the kernel's struct tcp_info, or -1.
    static func bytesAcknowledged(_ descriptor: Int32) -> Int64 {
        let offset = 120
        var info = [UInt8](repeating: 0, count: 256)
        var length = socklen_t(info.count)
        guard getsockopt(descriptor, Int32(IPPROTO_TCP), TCP_INFO, &info, &length) == 0, Int(length) >= offset + 8 else { return -1 }
        return info.withUnsafeBytes { Int64(bitPattern: $0.loadUnaligned(fromByteOffset: offset, as: UInt64.self)) }
    }

    static func event(_ frame: [UInt8]) -> (event: UInt16, value: Int32)? {
        guard frame.count >= 6 else { return nil }
        let event = UInt16(frame[0]) | UInt16(frame[1]) << 8
        let value = Int32(bitPattern: UInt32(frame[2]) | UInt32(frame[3]) << 8
                          | UInt32(frame[4]) << 16 | UInt32(frame[5]) << 24)
        return (event, value)
    }
}
