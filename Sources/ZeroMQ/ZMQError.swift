internal import CZeroMQ

/// A libzmq call that failed: what was being done, and the native errno with its text.
public struct ZMQError: Error, Equatable, Sendable, CustomStringConvertible {
    public let operation: String
    public let errno: Int32
    public let message: String

    init(_ operation: String, errno code: Int32 = zmq_errno()) {
        self.operation = operation
        self.errno = code
        self.message = String(cString: zmq_strerror(code))
    }

    /// The call was interrupted by a signal; the caller usually checks why and goes on.
    public var isInterrupted: Bool { errno == EINTR }
    /// A non-blocking call found nothing to do.
    public var wouldBlock: Bool { errno == EAGAIN }
    /// The context is shutting down.
    public var isTerminated: Bool { errno == ETERM }

    public var description: String { "\(operation): \(message) (errno \(errno))" }
}
