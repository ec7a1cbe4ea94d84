internal import CConnectionInfo

/// The descriptor of one connection libzmq has open, as its monitor names it. Only libzmq owns
/// it: it may be closed, or reused for another connection, by the time it is looked at.
struct ConnectionDescriptor: Hashable, Sendable {
    let rawValue: Int32

    /// What the kernel's `struct tcp_info` says of the connection, or nil when the descriptor
    /// is not an open TCP socket (any more), or the kernel's struct is too old to say it.
    var tcpState: TCPState? {
        var state = canvas_tcp_state()
        guard canvas_tcp_info(rawValue, &state) == 0 else { return nil }
        return TCPState(bytesAcknowledged: state.bytes_acked, bytesReceived: state.bytes_received,
                        dataSegmentsReceived: state.data_segments_received)
    }
}

/// The fields of the kernel's `struct tcp_info` that canvasd reads.
struct TCPState: Sendable, Equatable {
    /// Bytes of data this end has sent that the peer has acknowledged; a connecting end counts
    /// its SYN as one.
    var bytesAcknowledged: UInt64
    /// Bytes of data the peer has sent.
    var bytesReceived: UInt64
    /// Segments with data the peer has sent.
    var dataSegmentsReceived: UInt32
}

/// One event of a socket's monitor, from the first frame of its message.
struct MonitorEvent: Sendable, Equatable {
    /// One of `ZMQ_EVENT_*`.
    var event: UInt16
    /// A descriptor, an errno or an interval, by event.
    var value: UInt32

    /// Nil when the frame is too short to be a monitor event.
    init?(frame: [UInt8]) {
        var event: UInt16 = 0, value: UInt32 = 0
        let got = frame.withUnsafeBytes { canvas_monitor_event($0.baseAddress, $0.count, &event, &value) }
        guard got == 0 else { return nil }
        self.event = event
        self.value = value
    }

    /// The connection the event is about, for the events whose value is a descriptor
    /// (accepted, connected, disconnected, closed and their kind).
    var descriptor: ConnectionDescriptor { ConnectionDescriptor(rawValue: Int32(bitPattern: value)) }
}
