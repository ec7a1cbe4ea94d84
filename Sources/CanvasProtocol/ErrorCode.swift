/// The error codes of the wire contract.
public enum ErrorCode: String, Sendable, CaseIterable, Codable {
    /// The request frame is not JSON (or not UTF-8).
    case parseError = "PARSE_ERROR"
    /// JSON, but not a request: not an object, no method, wrong type of id, params or session.
    case invalidRequest = "INVALID_REQUEST"
    case methodNotFound = "METHOD_NOT_FOUND"
    /// The method's params are missing, of the wrong type, or out of range.
    case invalidParams = "INVALID_PARAMS"
    /// The canvas is not in a state that takes this method.
    case invalidState = "INVALID_STATE"
    /// No session by that id (never opened, closed, or expired).
    case unknownSession = "UNKNOWN_SESSION"
    /// The server cannot do this now or here (a limit on sessions, a feature not served).
    case unavailable = "UNAVAILABLE"
    /// A named thing (a text, a document, a page, a revision) does not exist.
    case notFound = "NOT_FOUND"
    /// Someone else changed the thing first (an `expectedRevision` that is not current).
    case conflict = "CONFLICT"
    /// The message, or what it would make, is over a limit.
    case payloadTooLarge = "PAYLOAD_TOO_LARGE"
    /// A web request without a valid access token, on a server that wants one.
    case unauthorized = "UNAUTHORIZED"
    /// A fault in the server; the request had no effect.
    case `internal` = "INTERNAL"
}

/// An error reply: a code, a sentence for people, and details for programs.
public struct ProtocolError: Error, Sendable, Equatable, CustomStringConvertible {
    public var code: ErrorCode
    public var message: String
    public var data: [String: JSONValue]

    public init(_ code: ErrorCode, _ message: String, data: [String: JSONValue] = [:]) {
        self.code = code
        self.message = message
        self.data = data
    }

    public var description: String { "\(code.rawValue): \(message)" }
}
