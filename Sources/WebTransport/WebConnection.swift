import NIOCore

/// Who a token says a peer is: the owner its requests act for, and the token's digest, which is
/// what revocation names (two tokens of one owner are two credentials).
public struct WebCredential: Sendable, Hashable {
    public let owner: String
    public let digest: [UInt8]
    public init(owner: String, digest: [UInt8]) {
        self.owner = owner
        self.digest = digest
    }
}

/// What a web peer sent that the request loop must decide on.
public enum WebInbound: Sendable, Equatable {
    /// A request from `connection` on the request endpoint: its frames (the JSON frame first),
    /// and how many frames past the kept ones it had.
    case request(connection: UInt64, frames: [[UInt8]], dropped: Int)
    /// A subscription from `connection` on the events endpoint, with a valid token when the
    /// server wants tokens (`owner`: the token's; nil without tokens). The loop answers it with
    /// `WebTransport.settle`, giving back `serial`.
    case subscription(connection: UInt64, topic: [UInt8], owner: String?, serial: UInt64)
}

/// One ws:// connection as its endpoint knows it. Lives on the endpoint's event loop and is only
/// touched there.
final class WebConnection {
    let id: UInt64
    let channel: any Channel
    /// The peer's IP address (the client's, through a trusted proxy's PROXY header).
    let source: String
    let accepted: ContinuousClock.Instant
    /// When it proved who it is, and the tokens it has shown (their digests): a revoked one
    /// closes it.
    var authenticatedAt: ContinuousClock.Instant?
    var credentials: Set<[UInt8]> = []
    /// Topics applied (events endpoint), and the ones whose answer the loop has not given yet,
    /// each with the serial of the subscription asking for it: an unsubscription that comes
    /// meanwhile wins over the answer.
    var subscriptions: Set<[UInt8]> = []
    var pending: [[UInt8]: UInt64] = [:]
    /// Messages handed to the loop and not yet answered: past a bound, the connection is not
    /// read until some are.
    var inFlight = 0
    /// Messages read past that bound, in order, until answers make room (at most what one read
    /// of the socket held).
    var waiting: [(frames: [[UInt8]], dropped: Int)] = []
    /// Set once the WebSocket upgrade is done.
    var socket: ZWSHandler?
    /// Set once a close has begun: nothing more is read from it or sent to it.
    var closing = false

    init(id: UInt64, channel: any Channel, source: String, accepted: ContinuousClock.Instant) {
        self.id = id
        self.channel = channel
        self.source = source
        self.accepted = accepted
    }
}
