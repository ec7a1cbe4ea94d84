public import CanvasProtocol
public import ZeroMQ

/// What went wrong on the client's side of a call.
public enum ClientError: Error, CustomStringConvertible {
    case timeout(method: String)
    case transport(ZMQError)
    case malformedReply(String)

    public var description: String {
        switch self {
        case .timeout(let method): return "\(method): no reply in time"
        case .transport(let error): return error.description
        case .malformedReply(let why): return "malformed reply: \(why)"
        }
    }
}

/// What a client needs to reach a server that requires CurveZMQ: the server's public key and
/// the client's own key pair (whose public half the server must list as allowed).
public struct CurveCredentials: Sendable {
    public let serverKey: CurveKey
    public let client: CurveKeyPair

    public init(serverKey: CurveKey, client: CurveKeyPair) {
        self.serverKey = serverKey
        self.client = client
    }
}

/// A blocking client over a DEALER socket: one call at a time, replies matched by id.
/// Not Sendable: its socket belongs to the thread that made it.
public final class CanvasClient {
    private let socket: ZMQSocket
    private let context: ZMQContext
    /// Ids start at a random point so that two clients of one session (two runs of
    /// canvasctl, say) do not reuse each other's ids, which the server would treat as retries.
    private var nextID = Int64.random(in: 1...(1 << 40))

    public init(endpoint: String, timeoutMilliseconds: Int32 = 5_000, curve: CurveCredentials? = nil,
                context: ZMQContext? = nil) throws {
        self.context = try context ?? ZMQContext()
        socket = try self.context.socket(.dealer)
        if let curve { try socket.makeCurveClient(serverKey: curve.serverKey, keyPair: curve.client) }
        try socket.setReceiveTimeout(milliseconds: timeoutMilliseconds)
        try socket.setSendTimeout(milliseconds: timeoutMilliseconds)
        try socket.connect(endpoint)
    }

    /// Sends raw frames and returns the reply's JSON frame, parsed.
    public func exchange(_ frames: [[UInt8]], method: String = "request") throws(ClientError) -> JSONValue {
        try transport {
            try socket.send(frames)
            return try receiveReply(method: method)
        }
    }

    /// The next reply's JSON frame. A request sent with an empty delimiter frame first (as REQ
    /// sockets do) gets its reply behind the same delimiter.
    private func receiveReply(method: String) throws -> JSONValue {
        guard let reply = try socket.receive() else { throw ClientError.timeout(method: method) }
        guard var body = reply.first else { throw ClientError.malformedReply("no frames") }
        if body.isEmpty, reply.count > 1 { body = reply[1] }
        do {
            return try JSONCodec.parse(body)
        } catch {
            throw ClientError.malformedReply(String(decoding: body, as: UTF8.self))
        }
    }

    private func transport<T>(_ body: () throws -> T) throws(ClientError) -> T {
        do {
            return try body()
        } catch let error as ClientError {
            throw error
        } catch let error as ZMQError {
            throw .transport(error)
        } catch {
            throw .malformedReply("\(error)")
        }
    }

    /// Calls a method. A reply with `result` gives `.success`; one with `error`, `.failure`.
    /// `frames` go after the JSON frame (an upload's bytes).
    public func call(_ method: String, _ params: [String: JSONValue] = [:], session: String? = nil, frames: [[UInt8]] = [])
        throws(ClientError) -> Result<[String: JSONValue], ProtocolError>
    {
        nextID += 1
        let id = nextID
        let request = Request(id: .integer(id), method: method, params: params, session: session)
        // Replies to other ids are late answers to calls that already timed out: skip them.
        let reply = try transport {
            try socket.send([JSONCodec.serialize(request.json)] + frames)
            while true {
                let reply = try receiveReply(method: method)
                if reply["id"] == .integer(id) { return reply }
            }
        }
        return try Self.outcome(of: reply)
    }

    /// What a reply says: `.success` with its `result`, or `.failure` with the error it names.
    public static func outcome(of reply: JSONValue) throws(ClientError) -> Result<[String: JSONValue], ProtocolError> {
        if let result = reply["result"]?.objectValue { return .success(result) }
        guard let error = reply["error"]?.objectValue, let code = error["code"]?.stringValue.flatMap(ErrorCode.init(rawValue:))
        else { throw .malformedReply("neither result nor a known error") }
        return .failure(ProtocolError(code, error["message"]?.stringValue ?? "", data: error["data"]?.objectValue ?? [:]))
    }
}

/// A SUB socket reading events: (topic, body).
public final class EventSubscriber {
    private let socket: ZMQSocket
    private let context: ZMQContext

    public init(endpoint: String, prefix: String = "", curve: CurveCredentials? = nil, context: ZMQContext? = nil) throws {
        self.context = try context ?? ZMQContext()
        socket = try self.context.socket(.sub)
        if let curve { try socket.makeCurveClient(serverKey: curve.serverKey, keyPair: curve.client) }
        try socket.subscribe(prefix)
        try socket.connect(endpoint)
    }

    /// Adds a subscription; a publisher takes a moment to apply it.
    public func subscribe(_ prefix: String) throws(ZMQError) { try socket.subscribe(prefix) }

    /// The next event, or nil if none came within the timeout.
    public func next(timeoutMilliseconds: Int32) throws -> (topic: String, body: JSONValue)? {
        try socket.setReceiveTimeout(milliseconds: timeoutMilliseconds)
        guard let frames = try socket.receive(), frames.count == 2 else { return nil }
        return (String(decoding: frames[0], as: UTF8.self), try JSONCodec.parse(frames[1]))
    }
}
