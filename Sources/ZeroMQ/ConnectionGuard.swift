internal import CZeroMQ
import Glibc

/// Bounds the connections of a listening socket, which libzmq does not: how many are open, how
/// many come from one address, how many are still in their handshake and for how long, and how
/// long a peer may stay without saying who it is.
///
/// libzmq accepts every connection that comes and never times out a ws:// upgrade that is never
/// finished, so a peer that opens connections and sends half an HTTP request holds a descriptor
/// each for as long as it likes; once the process runs out, libzmq's listener spins on a failing
/// `accept` and the rest of the process (the document store, libdispatch) fails too. A peer that
/// finishes the upgrade and then stays silent needs nothing from us at all, so enough of them
/// fill every slot and a page with a valid token is turned away. This reads the socket's monitor
/// (each connection accepted and each one lost, with its descriptor) and shuts down, at the TCP
/// level, what it must; libzmq then sees those connections end and closes them itself:
///
/// - a connection that has had no byte from this end (a finished upgrade always answers) within
///   the handshake time, and one that the server has not been told has authenticated
///   (`authenticated(_:)`) within the authentication time;
/// - past a cap (open connections, connections from one address, connections in their handshake,
///   or unauthenticated connections, which may fill all but `reservedForAuthenticated` slots),
///   the oldest connection that has not authenticated makes room for the new one; the new one is
///   refused only when every connection the cap counts has authenticated. So a flood of silent
///   peers keeps pushing itself out, and a page that sends its token within moments of
///   connecting is not locked out by it.
public final class ConnectionGuard {
    public struct Limits: Sendable {
        public var maxConnections: Int
        public var maxHandshaking: Int
        public var handshakeTimeout: Duration
        /// How long a peer may be connected before it must have authenticated.
        public var authenticationTimeout: Duration
        /// Connections from one IP address at once.
        public var maxPerSource: Int
        /// Slots unauthenticated peers may never take: they hold at most
        /// `maxConnections - reservedForAuthenticated`.
        public var reservedForAuthenticated: Int

        public init(maxConnections: Int, maxHandshaking: Int, handshakeTimeout: Duration,
                    authenticationTimeout: Duration = .seconds(5), maxPerSource: Int? = nil, reservedForAuthenticated: Int? = nil) {
            self.maxConnections = maxConnections
            self.maxHandshaking = maxHandshaking
            self.handshakeTimeout = handshakeTimeout
            self.authenticationTimeout = authenticationTimeout
            self.maxPerSource = maxPerSource ?? maxConnections
            self.reservedForAuthenticated = reservedForAuthenticated ?? maxConnections / 4
        }

        /// What unauthenticated connections may hold together.
        var maxUnauthenticated: Int { max(1, maxConnections - reservedForAuthenticated) }
    }

    /// What the guard has done since it started, for logs and metrics.
    public struct Tally: Sendable, Equatable {
        public var open = 0
        public var handshaking = 0
        public var authenticated = 0
        /// Cut off at once: past a cap, with no unauthenticated connection to make room.
        public var refused = 0
        /// Cut off for not finishing the handshake in time.
        public var timedOut = 0
        /// Cut off for not authenticating in time.
        public var unauthenticated = 0
        /// Cut off to make room for a newer connection, past a cap.
        public var evicted = 0
        /// Cut off all at once (`cutOffAll`: a token was revoked).
        public var cutAll = 0

        /// Every connection cut off, whatever the reason.
        public var cutOff: Int { refused + timedOut + unauthenticated + evicted + cutAll }
    }

    private struct Connection {
        let accepted: ContinuousClock.Instant
        /// The peer's address as the socket gave it when it was accepted: a descriptor reused
        /// for another connection is told apart by it.
        let peer: [UInt8]
        /// The peer's IP address alone (no port): what `maxPerSource` counts.
        let source: [UInt8]
        var handshaken: Bool
        var authenticated = false
        /// The peer's bytes as the kernel counted them at the last look after its upgrade.
        var heard: UInt64?
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

    /// Reads the events queued, making room for each new connection past a cap at once, and
    /// cuts off every connection whose handshake or authentication has run out of time. Never
    /// waits.
    public func service(now: ContinuousClock.Instant) throws(ZMQError) {
        // Proofs first: a connection that has proved itself is not the one to make room for a
        // connection accepted since.
        if window.heardAny { look(now: now) }
        try readEvents(now: now)
        for (descriptor, connection) in connections {
            if !connection.handshaken && now - connection.accepted >= limits.handshakeTimeout {
                if Self.hasAcknowledgedBytes(descriptor) {
                    connections[descriptor]?.handshaken = true
                } else {
                    cutOff(descriptor)
                    tally.timedOut += 1
                    continue
                }
            }
            if !connection.authenticated && now - connection.accepted >= limits.authenticationTimeout {
                cutOff(descriptor)
                tally.unauthenticated += 1
            }
        }
        count()
    }

    /// Shuts down every connection the socket has, as far as its monitor has said: each peer
    /// sees its connection end (and what it subscribed to ends with it) and may connect again.
    /// Returns how many were cut off.
    public func cutOffAll(now: ContinuousClock.Instant) throws(ZMQError) -> Int {
        try readEvents(now: now)
        let all = connections
        for (descriptor, connection) in all { cutOff(descriptor, connection) }
        tally.cutAll += all.count
        count()
        return all.count
    }

    /// A message was read from one of the socket's peers: its frames' sizes, and whether it
    /// proved who sent it (a valid token). libzmq's ws:// transport does not say which
    /// connection a message came on (it attaches no properties, so not even the deprecated
    /// `ZMQ_SRCFD`), so proofs are tied to connections by what the kernel counts: see `look`.
    public func heard(frames: [Int], proof: Bool) {
        let bytes = frames.reduce(0) { $0 + Self.wireBytes(frame: $1) }
        if window.proofs.count + window.doubts.count >= Self.windowMessages {
            window.overflowed = true
        } else if proof {
            window.proofs.append(bytes)
        } else {
            window.doubts.append(bytes)
        }
    }

    /// What a ZWS 2.0 client sends for one frame of `size` bytes: a masked WebSocket binary
    /// message (2 bytes of header, 2 or 8 more for a longer length, 4 of mask) whose payload is
    /// a flags byte and the frame.
    static func wireBytes(frame size: Int) -> Int {
        let payload = size + 1
        return payload + 6 + (payload >= 65_536 ? 8 : payload >= 126 ? 2 : 0)
    }

    /// Ties the proofs heard since the last look to the connections they came on. A look reads
    /// every unauthenticated connection's `tcp_info` (a system call each), so the looks are
    /// spaced by their cost: 10 ms, and 25 µs more per connection, which keeps them to a few
    /// per cent of the loop however many peers there are, while a proof is still tied long
    /// before `authenticationTimeout`.
    public func settle(now: ContinuousClock.Instant) {
        guard window.heardAny else { return }
        let interval = Duration.milliseconds(10) + .microseconds(25 * (tally.open - tally.authenticated))
        guard now - lastLook >= interval else { return }
        look(now: now)
    }

    /// Messages whose sizes a look matches against the connections' counts; past this many in
    /// one window it ties nothing (the matching is a subset sum).
    private static let windowMessages = 16

    private struct Window {
        /// The bytes on the wire of each message read since the last look.
        var proofs: [Int] = []
        var doubts: [Int] = []
        var overflowed = false
        var heardAny: Bool { !proofs.isEmpty || !doubts.isEmpty || overflowed }
    }
    private var window = Window()
    private var lastLook = ContinuousClock.Instant.now

    /// Each connection's bytes since the last look (the kernel's count, less what it was then)
    /// are matched against the sizes of the messages read meanwhile: bytes that some of the
    /// proofs add up to, and no choice of the other messages does, were proofs, and the
    /// connection is authenticated. Bytes that nothing read adds up to (a message not read yet)
    /// or that both could (sizes that collide) teach nothing: the connection is judged by its
    /// next message. So a peer that sends what proves nothing, however often, neither passes
    /// for one that proved itself nor hides the proofs of others.
    ///
    /// A connection seen for the first time since its upgrade has no count to go from (its
    /// upgrade request's length is unknown): it is authenticated only when it has sent a
    /// message past its routing id (a third data segment), every message read was a proof, and
    /// there were no more connections that sent than proofs; otherwise its count starts there.
    /// Every count moves on, so bytes are matched once. A silent peer never grows, so it is
    /// never taken for one that proved itself.
    private func look(now: ContinuousClock.Instant) {
        var grown: [(ConnectionDescriptor, Int)] = [], fresh: [ConnectionDescriptor] = []
        for (descriptor, connection) in connections where !connection.authenticated {
            guard let state = descriptor.tcpState, state.bytesAcknowledged > 0 else { continue }
            connections[descriptor]?.handshaken = true
            if let heard = connection.heard {
                if state.bytesReceived > heard { grown.append((descriptor, Int(clamping: state.bytesReceived - heard))) }
            } else if state.dataSegmentsReceived >= 3 {
                fresh.append(descriptor)
            }
            connections[descriptor]?.heard = state.bytesReceived
        }
        if !window.overflowed {
            let proofSums = Self.subsetSums(window.proofs), doubtSums = Self.subsetSums(window.doubts)
            for (descriptor, bytes) in grown where proofSums.contains(bytes) && !doubtSums.contains(bytes) {
                connections[descriptor]?.authenticated = true
            }
            if window.doubts.isEmpty && fresh.count + grown.count <= window.proofs.count {
                for descriptor in fresh { connections[descriptor]?.authenticated = true }
            }
        }
        window = Window()
        lastLook = now
        count()
    }

    /// Every total of some of `sizes` (none included), at most 2^16 of them.
    private static func subsetSums(_ sizes: [Int]) -> Set<Int> {
        var sums: Set<Int> = [0]
        for size in sizes { sums.formUnion(sums.map { $0 + size }) }
        sums.remove(0)
        return sums
    }

    private func readEvents(now: ContinuousClock.Instant) throws(ZMQError) {
        while let frames = try events.receive(wait: false) {
            guard let first = frames.first, let event = MonitorEvent(frame: first) else { continue }
            switch Int32(event.event) {
            case ZMQ_EVENT_ACCEPTED: accepted(event.descriptor, at: now)
            case ZMQ_EVENT_DISCONNECTED: connections[event.descriptor] = nil
            case ZMQ_EVENT_HANDSHAKE_SUCCEEDED:
                // This event names the peer, not the descriptor: the handshake is seen from
                // the descriptor's own bytes instead.
                break
            default: break
            }
        }
    }

    private func count() {
        tally.open = connections.count
        tally.handshaking = connections.values.count { !$0.handshaken }
        tally.authenticated = connections.values.count { $0.authenticated }
    }

    private func accepted(_ descriptor: ConnectionDescriptor, at now: ContinuousClock.Instant) {
        guard let peer = Self.peer(of: descriptor) else { return }
        let connection = Connection(accepted: now, peer: peer, source: Self.source(of: peer), handshaken: false)
        // A reused descriptor whose end was not reported yet: the old connection is gone.
        connections[descriptor] = nil
        if connections.values.count(where: { !$0.handshaken }) >= limits.maxHandshaking {
            // Most of those may have finished since: look before making room.
            for (descriptor, connection) in connections where !connection.handshaken && Self.hasAcknowledgedBytes(descriptor) {
                connections[descriptor]?.handshaken = true
            }
        }
        let caps: [(limit: Int, counts: (Connection) -> Bool)] = [
            (limits.maxPerSource, { $0.source == connection.source }),
            (limits.maxHandshaking, { !$0.handshaken }),
            (limits.maxUnauthenticated, { !$0.authenticated }),
            (limits.maxConnections, { _ in true }),
        ]
        for cap in caps where connections.values.count(where: cap.counts) >= cap.limit {
            guard makeRoom(among: cap.counts) else {
                cutOff(descriptor, connection)
                tally.refused += 1
                return
            }
        }
        connections[descriptor] = connection
    }

    /// Cuts off the oldest unauthenticated connection among those `counts` takes; false when
    /// there is none.
    private func makeRoom(among counts: (Connection) -> Bool) -> Bool {
        let oldest = connections.filter { !$0.value.authenticated && counts($0.value) }.min { $0.value.accepted < $1.value.accepted }
        guard let oldest else { return false }
        cutOff(oldest.key)
        tally.evicted += 1
        return true
    }

    private func cutOff(_ descriptor: ConnectionDescriptor) {
        guard let connection = connections[descriptor] else { return }
        cutOff(descriptor, connection)
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

    /// The IP address in a `sockaddr` (4 or 16 bytes); the whole of it for another family.
    private static func source(of peer: [UInt8]) -> [UInt8] {
        peer.withUnsafeBytes { raw -> [UInt8] in
            guard raw.count >= MemoryLayout<sa_family_t>.size else { return peer }
            switch Int32(raw.load(as: sa_family_t.self)) {
            case AF_INET where raw.count >= MemoryLayout<sockaddr_in>.size:
                return withUnsafeBytes(of: raw.loadUnaligned(as: sockaddr_in.self).sin_addr) { Array($0) }
            case AF_INET6 where raw.count >= MemoryLayout<sockaddr_in6>.size:
                return withUnsafeBytes(of: raw.loadUnaligned(as: sockaddr_in6.self).sin6_addr) { Array($0) }
            default:
                return peer
            }
        }
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
