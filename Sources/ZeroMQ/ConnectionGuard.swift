internal import CZeroMQ
import Glibc

/// Bounds the connections of a listening socket, which libzmq does not: a cap on how many are
/// open, a cap on how many are still in their handshake, and a time limit for it.
///
/// libzmq accepts every connection that comes and never times out a ws:// upgrade that is never
/// finished, so a peer that opens connections and sends half an HTTP request holds a descriptor
/// each for as long as it likes; once the process runs out, libzmq's listener spins on a failing
/// `accept` and the rest of the process (the document store, libdispatch) fails too. This reads
/// the socket's monitor (each connection accepted and each one lost, with its descriptor) and
/// shuts down, at the TCP level, the connections past a cap and those that have had no byte
/// from this end (a finished upgrade always answers) within the handshake time; libzmq then
/// sees them end and closes them itself.
public final class ConnectionGuard {
    public struct Limits: Sendable {
        public var maxConnections: Int
        public var maxHandshaking: Int
        public var handshakeTimeout: Duration

        public init(maxConnections: Int, maxHandshaking: Int, handshakeTimeout: Duration) {
            self.maxConnections = maxConnections
            self.maxHandshaking = maxHandshaking
            self.handshakeTimeout = handshakeTimeout
        }
    }

    /// What the guard has done since it started, for logs and metrics.
    public struct Tally: Sendable, Equatable {
        public var open = 0
        public var handshaking = 0
        /// Cut off at once: past a cap.
        public var refused = 0
        /// Cut off for not finishing the handshake in time.
        public var timedOut = 0
    }

    private struct Connection {
        let accepted: ContinuousClock.Instant
        /// The peer's address as the socket gave it when it was accepted: a descriptor reused
        /// for another connection is told apart by it.
        let peer: [UInt8]
        var handshaken: Bool
    }

    /// The PAIR that receives the monitor's events: poll it beside the watched socket.
    public let events: ZMQSocket
    public let limits: Limits
    public private(set) var tally = Tally()
    private let port: UInt16
    private var connections: [Int32: Connection] = [:]

    /// Starts watching `socket`, which must be bound (once) to a TCP-based endpoint already.
    public init(watching socket: ZMQSocket, context: ZMQContext, limits: Limits) throws(ZMQError) {
        self.limits = limits
        port = Self.port(of: socket.lastEndpoint)
        let endpoint = "inproc://canvasd-monitor-\(UInt64.random(in: 0...UInt64.max))"
        try socket.monitor(at: endpoint, events: ZMQ_EVENT_ACCEPTED | ZMQ_EVENT_DISCONNECTED | ZMQ_EVENT_HANDSHAKE_SUCCEEDED)
        events = try context.socket(.pair)
        // A lost event would leave a connection uncounted; the monitor's queue is unbounded.
        try events.setReceiveHighWaterMark(0)
        try events.connect(endpoint)
    }

    /// Reads the events queued, cutting off each new connection past a cap at once, and every
    /// connection whose handshake has run out of time. Never waits.
    public func service(now: ContinuousClock.Instant) throws(ZMQError) {
        while let frames = try events.receive(wait: false) {
            guard frames.count >= 1, frames[0].count >= 6 else { continue }
            let event = UInt16(frames[0][0]) | UInt16(frames[0][1]) << 8
            let value = Int32(bitPattern: UInt32(frames[0][2]) | UInt32(frames[0][3]) << 8
                              | UInt32(frames[0][4]) << 16 | UInt32(frames[0][5]) << 24)
            switch Int32(event) {
            case ZMQ_EVENT_ACCEPTED: accepted(value, at: now)
            case ZMQ_EVENT_DISCONNECTED: connections[value] = nil
            case ZMQ_EVENT_HANDSHAKE_SUCCEEDED:
                // This event names the peer, not the descriptor: the handshake is seen from
                // the descriptor's own bytes below instead.
                break
            default: break
            }
        }
        for (descriptor, connection) in connections where !connection.handshaken {
            guard now - connection.accepted >= limits.handshakeTimeout else { continue }
            if Self.bytesAcknowledged(descriptor) > 0 {
                connections[descriptor]?.handshaken = true
            } else {
                cutOff(descriptor, connection)
                tally.timedOut += 1
            }
        }
        tally.open = connections.count
        tally.handshaking = connections.values.count { !$0.handshaken }
    }

    private func accepted(_ descriptor: Int32, at now: ContinuousClock.Instant) {
        guard let peer = Self.peer(of: descriptor) else { return }
        let connection = Connection(accepted: now, peer: peer, handshaken: false)
        var handshaking = connections.values.count { !$0.handshaken }
        if handshaking >= limits.maxHandshaking {
            // Most of those may have finished since: look before refusing.
            for (descriptor, connection) in connections where !connection.handshaken && Self.bytesAcknowledged(descriptor) > 0 {
                connections[descriptor]?.handshaken = true
                handshaking -= 1
            }
        }
        guard connections.count < limits.maxConnections, handshaking < limits.maxHandshaking else {
            cutOff(descriptor, connection)
            tally.refused += 1
            return
        }
        connections[descriptor] = connection
    }

    /// Shuts the connection down if the descriptor still is that connection (bound to the
    /// watched port, to the same peer): libzmq reads its end and closes the descriptor.
    private func cutOff(_ descriptor: Int32, _ connection: Connection) {
        connections[descriptor] = nil
        guard Self.localPort(of: descriptor) == port, Self.peer(of: descriptor) == connection.peer else { return }
        _ = shutdown(descriptor, Int32(SHUT_RDWR))
    }

    /// Bytes of data this end has sent on a TCP connection and the peer has acknowledged, or
    /// -1 when the descriptor is not a TCP socket (any more). The counter is in the kernel's
    /// `struct tcp_info` (linux/tcp.h, since Linux 4.1) at a fixed offset of its stable ABI;
    /// glibc's copy of the struct, which Swift sees, stops before it.
    private static func bytesAcknowledged(_ descriptor: Int32) -> Int64 {
        let offset = 120   // offsetof(struct tcp_info, tcpi_bytes_acked)
        var info = [UInt8](repeating: 0, count: 256)
        var length = socklen_t(info.count)
        guard getsockopt(descriptor, Int32(IPPROTO_TCP), TCP_INFO, &info, &length) == 0, Int(length) >= offset + 8 else { return -1 }
        return info.withUnsafeBytes { Int64(bitPattern: $0.loadUnaligned(fromByteOffset: offset, as: UInt64.self)) }
    }

    private static func peer(of descriptor: Int32) -> [UInt8]? {
        var address = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let got = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getpeername(descriptor, $0, &length) }
        }
        guard got == 0 else { return nil }
        return withUnsafeBytes(of: &address) { Array($0.prefix(Int(length))) }
    }

    private static func localPort(of descriptor: Int32) -> UInt16? {
        var address = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let got = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(descriptor, $0, &length) }
        }
        guard got == 0 else { return nil }
        switch Int32(address.ss_family) {
        case AF_INET:
            return withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { UInt16(bigEndian: $0.pointee.sin_port) } }
        case AF_INET6:
            return withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { UInt16(bigEndian: $0.pointee.sin6_port) } }
        default:
            return nil
        }
    }

    /// The port of `tcp://HOST:PORT` or `ws://HOST:PORT[/path]`.
    private static func port(of endpoint: String) -> UInt16 {
        let afterScheme = endpoint.split(separator: "/", omittingEmptySubsequences: true).dropFirst().first ?? ""
        return UInt16(afterScheme.split(separator: ":").last ?? "") ?? 0
    }
}
