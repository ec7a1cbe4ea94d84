/// The protocol's name and version, as `hello` gives it. A minor version adds; a major one breaks.
public enum ProtocolVersion {
    public static let major = 1
    public static let minor = 9
    public static var string: String { "canvas/\(major).\(minor)" }
}

/// A request id: a string or an integer, echoed in the reply.
public enum RequestID: Hashable, Sendable, CustomStringConvertible {
    case string(String)
    case integer(Int64)

    public var json: JSONValue {
        switch self {
        case .string(let s): return .string(s)
        case .integer(let i): return .integer(i)
        }
    }

    public var description: String {
        switch self {
        case .string(let s): return s.debugDescription
        case .integer(let i): return String(i)
        }
    }
}

/// One decoded request: the JSON frame's fields and any binary frames after it.
public struct Request: Sendable {
    public var id: RequestID
    public var method: String
    /// The params as JSON. A stroke's points that the parser read as numbers are kept apart
    /// (`points`), and made into JSON here only for who asks: what answers a stroke reads them
    /// through `Params(request)` and digests them through `digest`, never as JSON.
    public var params: [String: JSONValue] {
        get {
            guard let points else { return otherParams }
            var all = otherParams
            all["points"] = points.json
            return all
        }
        set {
            otherParams = newValue
            points = nil
        }
    }
    /// The params but `points` when `points` is set; all of them otherwise.
    public private(set) var otherParams: [String: JSONValue]
    /// The params' `points`, when the parser read them as numbers (`ParsedPoints`).
    public private(set) var points: ParsedPoints?
    public var session: String?
    public var attachments: [[UInt8]]
    /// The access token a web peer sent (`"token"`, a string), or nil. Only web requests of a
    /// server with `--web-tokens` look at it.
    public var token: String?

    public init(id: RequestID, method: String, params: [String: JSONValue] = [:], session: String? = nil,
                attachments: [[UInt8]] = [], token: String? = nil) {
        self.id = id
        self.method = method
        self.otherParams = params
        self.session = session
        self.attachments = attachments
        self.token = token
    }

    init(id: RequestID, method: String, params: [String: JSONValue], points: ParsedPoints?, session: String?,
         attachments: [[UInt8]], token: String?) {
        self.init(id: id, method: method, params: params, session: session, attachments: attachments, token: token)
        self.points = points
    }

    /// Whether it has no params, without making any JSON.
    public var hasNoParams: Bool { points == nil && otherParams.isEmpty }

    /// `JSONDigest.request` of its method and params, without making its points JSON.
    public var digest: JSONDigest { JSONDigest.request(method: method, params: otherParams, points: points) }

    /// The request as a JSON frame, for clients.
    public var json: JSONValue {
        var object: [String: JSONValue] = ["id": id.json, "method": .string(method), "params": .object(params)]
        if let session { object["session"] = .string(session) }
        return .object(object)
    }
}

/// Why a request could not be read, and the id to answer with if it was readable.
public struct UnreadableRequest: Error, Sendable {
    public var id: RequestID?
    public var error: ProtocolError
}

public enum RequestDecoder {
    /// Reads a request from its frames (the routing envelope already removed).
    public static func decode(_ frames: [[UInt8]]) -> Result<Request, UnreadableRequest> {
        guard let first = frames.first else {
            return .failure(UnreadableRequest(id: nil, error: ProtocolError(.invalidRequest, "the message has no request frame")))
        }
        let fields: JSONParser.RequestMembers
        do {
            switch try JSONParser.parseRequest(first, keepingOverflow: true) {
            case .object(let members): fields = members
            case .other(let json):
                return .failure(UnreadableRequest(id: nil, error: ProtocolError(.invalidRequest, "a request is a JSON object, not \(json.typeName)")))
            }
        } catch {
            return .failure(UnreadableRequest(id: nil, error: ProtocolError(.parseError, "the request frame is not valid UTF-8 JSON")))
        }
        let id: RequestID
        switch fields.id {
        case .string(let s)?: id = .string(s)
        case .integer(let i)?: id = .integer(i)
        case .number(let d)? where d.rounded() == d && abs(d) < 0x1p63:
            // JSON has one kind of number: 1.0 and 1e2 are the integers 1 and 100, as JSON
            // Schema's "integer" counts them, and are echoed in integer form.
            id = .integer(Int64(d))
        case nil:
            return .failure(UnreadableRequest(id: nil, error: ProtocolError(.invalidRequest, "the request has no id")))
        case let other?:
            return .failure(UnreadableRequest(id: nil, error: ProtocolError(.invalidRequest,
                "id must be a string or an integer of at most 64 bits, not \(other.typeName)")))
        }
        func invalid(_ message: String) -> Result<Request, UnreadableRequest> {
            .failure(UnreadableRequest(id: id, error: ProtocolError(.invalidRequest, message)))
        }
        let methodField = fields.method
        guard case .string(let method)? = methodField else {
            return invalid(methodField == nil ? "the request has no method" : "method must be a string")
        }
        var params: [String: JSONValue] = [:]
        switch fields.params {
        case nil, .null?: break
        case .object(let p)?: params = p
        case let other?: return invalid("params must be an object, not \(other.typeName)")
        }
        var session: String?
        switch fields.session {
        case nil, .null?: break
        case .string(let s)?: session = s
        case let other?: return invalid("session must be a string, not \(other.typeName)")
        }
        var token: String?
        if case .string(let t)? = fields.token { token = t }
        return .success(Request(id: id, method: method, params: params, points: fields.points,
                                session: session, attachments: Array(frames.dropFirst()), token: token))
    }
}

/// Building reply and event frames.
public enum ReplyEncoder {
    // Replies are written member by member, keys in the sorted order `JSONCodec.serialize`
    // gives, so the bytes are the same as serializing the whole reply object.

    public static func success(id: RequestID, result: [String: JSONValue]) -> [UInt8] {
        var out = JSONText(capacity: 256)
        out.raw(#"{"id":"#); out.value(id.json)
        out.raw(#","result":"#); out.value(.object(result))
        out.raw("}")
        return out.bytes
    }

    /// A reply whose result is already JSON text (a JSON object), for results too large to
    /// build as a `JSONValue` first.
    public static func success(id: RequestID, rawResult: [UInt8]) -> [UInt8] {
        var out = JSONText(capacity: rawResult.count + 48)
        out.raw(#"{"id":"#)
        // Written as `value(id.json)` would, without making the value first: every reply has one.
        switch id {
        case .integer(let id): out.integer(id)
        case .string(let id): out.string(id)
        }
        out.raw(#","result":"#); out.json(rawResult)
        out.raw("}")
        return out.bytes
    }

    public static func failure(id: RequestID?, error: ProtocolError) -> [UInt8] {
        var body: [String: JSONValue] = ["code": .string(error.code.rawValue), "message": .string(error.message)]
        if !error.data.isEmpty { body["data"] = .object(error.data) }
        var out = JSONText(capacity: 256)
        out.raw(#"{"error":"#); out.value(.object(body))
        out.raw(#","id":"#); out.value(id?.json ?? .null)
        out.raw("}")
        return out.bytes
    }

    /// An event's two frames: the topic `<session>.<event>` and the JSON body.
    public static func event(session: String, name: String, seq: UInt64, data: [String: JSONValue]) -> [[UInt8]] {
        let body: JSONValue = ["session": .string(session), "event": .string(name), "seq": .integer(Int64(seq)), "data": .object(data)]
        return [Array("\(session).\(name)".utf8), JSONCodec.serialize(body)]
    }
}
