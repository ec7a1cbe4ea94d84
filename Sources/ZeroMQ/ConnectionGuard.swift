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
    private var connections: [ConnectionDescriptor: Connection] = [:]

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
            guard let first = frames.first, let event = MonitorEvent(frame: first) else { continue }
            switch Int32(event.event) {
            case ZMQ_EVENT_ACCEPTED: accepted(event.descriptor, at: now)
            case ZMQ_EVENT_DISCONNECTED: connections[event.descriptor] = nil
            case ZMQ_EVENT_HANDSHAKE_SUCCEEDED:
                // This event names the peer, not the descriptor: the handshake is seen from
                // the descriptor's own bytes below instead.
                break
            default: break
            }
        }
        for (descriptor, connection) in connections where !connection.handshaken {
            guard now - connection.accepted >= limits.handshakeTimeout else { continue }
            if Self.hasAcknowledgedBytes(descriptor) {
                connections[descriptor]?.handshaken = true
            } else {
                cutOff(descriptor, connection)
                tally.timedOut += 1
            }
        }
        tally.open = connections.count
        tally.handshaking = connections.values.count { !$0.handshaken }
    }

    private func accepted(_ descriptor: ConnectionDescriptor, at now: ContinuousClock.Instant) {
        guard let peer = Self.peer(of: descriptor) else { return }
        let connection = Connection(accepted: now, peer: peer, handshaken: false)
        var handshaking = connections.values.count { !$0.handshaken }
        if handshaking >= limits.maxHandshaking {
            // Most of those may have finished since: look before refusing.
            for (descriptor, connection) in connections where !connection.handshaken && Self.hasAcknowledgedBytes(descriptor) {
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
    private func cutOff(_ descriptor: ConnectionDescriptor, _ connection: Connection) {
        connections[descriptor] = nil
        guard Self.localPort(of: descriptor) == port, Self.peer(of: descriptor) == connection.peer else { return }
        _ = shutdown(descriptor.rawValue, Int32(SHUT_RDWR))
    }

    /// Whether this end has sent data on the connection that the peer has acknowledged; false
    /// when the descriptor is not a TCP socket (any more).
    private static func hasAcknowledgedBytes(_ descriptor: ConnectionDescriptor) -> Bool {
        (descriptor.tcpState?.bytesAcknowledged ?? 0) > 0
    }

    private static func peer(of descriptor: ConnectionDescriptor) -> [UInt8]? {
        var address = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let got = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getpeername(descriptor.rawValue, $0, &length) }
        }
        guard got == 0 else { return nil }
        return withUnsafeBytes(of: &address) { Array($0.prefix(Int(length))) }
    }

    private static func localPort(of descriptor: ConnectionDescriptor) -> UInt16? {
        var address = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let got = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(descriptor.rawValue, $0, &length) }
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
