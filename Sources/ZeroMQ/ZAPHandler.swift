import Foundation
import Synchronization

/// One handshake that libzmq asks about (ZeroMQ RFC 27, ZAP): who is connecting, and how.
public struct ZAPRequest: Sendable {
    public let domain: String
    /// The peer's address as libzmq reports it (an IP for tcp://, empty for ipc://).
    public let address: String
    /// "NULL", "PLAIN" or "CURVE".
    public let mechanism: String
    /// For CURVE, the client's long-term public key.
    public let clientKey: CurveKey?
}

/// What a ZAP handler answers: let the peer in as `userID`, or refuse it.
public enum ZAPDecision: Sendable, Equatable {
    case allow(userID: String)
    case deny(reason: String)
}

/// A ZAP handler: the REP socket at `inproc://zeromq.zap.01` that libzmq asks, for every
/// handshake on a CurveZMQ server socket of the same context, whether to let the peer in.
///
/// It runs on a thread of its own (a socket belongs to one thread, and a handshake must not
/// wait for the serving loop). It must be started before the server's sockets bind: libzmq
/// lets every CURVE client in when no handler is there.
public final class ZAPHandler: Sendable {
    private static let endpoint = "inproc://zeromq.zap.01"
    private let shared = Shared()
    private let finished = DispatchSemaphore(value: 0)

    /// Binds the handler's socket and starts answering with `decide`. Returns once the socket
    /// is bound, so sockets bound after this call are covered.
    public init(context: ZMQContext, decide: @escaping @Sendable (ZAPRequest) -> ZAPDecision) throws(ZMQError) {
        let started = DispatchSemaphore(value: 0)
        let thread = Thread { [shared, finished] in
            defer { finished.signal() }
            let socket: ZMQSocket
            do throws(ZMQError) {
                socket = try context.socket(.rep)
                try socket.setReceiveTimeout(milliseconds: 100)
                try socket.bind(Self.endpoint)
            } catch {
                shared.bindFailure.withLock { $0 = error }
                started.signal()
                return
            }
            started.signal()
            while !shared.stopRequested.load(ordering: .relaxed) {
                do throws(ZMQError) {
                    guard let frames = try socket.receive() else { continue }
                    try socket.send(Self.reply(to: frames, decide))
                } catch where error.isInterrupted {
                    continue
                } catch {
                    // A REP socket that failed mid-exchange cannot go on; handshakes then fail
                    // (no reply means no entry), which is the safe side.
                    break
                }
            }
        }
        thread.name = "zap-handler"
        thread.start()
        started.wait()
        if let error = shared.bindFailure.withLock({ $0 }) { throw error }
    }

    /// What the handler's thread and its owner share.
    private final class Shared: Sendable {
        let stopRequested = Atomic<Bool>(false)
        /// Set by the thread when its socket could not bind; read once it says it started.
        let bindFailure = Mutex<ZMQError?>(nil)
    }

    /// Stops answering and closes the socket; waits for the thread to end.
    public func stop() {
        guard !shared.stopRequested.exchange(true, ordering: .relaxed) else { return }
        finished.wait()
    }

    deinit { stop() }

    /// The reply frames (RFC 27): version, request id, status code, status text, user id, metadata.
    static func reply(to frames: [[UInt8]], _ decide: (ZAPRequest) -> ZAPDecision) -> [[UInt8]] {
        func text(_ index: Int) -> String { index < frames.count ? String(decoding: frames[index], as: UTF8.self) : "" }
        let requestID = frames.count > 1 ? frames[1] : []
        guard frames.count >= 6, text(0) == "1.0" else {
            return [Array("1.0".utf8), requestID, Array("500".utf8), Array("malformed ZAP request".utf8), [], []]
        }
        let mechanism = text(5)
        let request = ZAPRequest(
            domain: text(2), address: text(3), mechanism: mechanism,
            clientKey: mechanism == "CURVE" && frames.count > 6 ? CurveKey(bytes: frames[6]) : nil)
        switch decide(request) {
        case .allow(let userID):
            return [Array("1.0".utf8), requestID, Array("200".utf8), Array("OK".utf8), Array(userID.utf8), []]
        case .deny(let reason):
            return [Array("1.0".utf8), requestID, Array("400".utf8), Array(reason.utf8), [], []]
        }
    }
}
