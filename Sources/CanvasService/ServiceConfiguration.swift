public import CanvasProtocol

/// Limits the service enforces; `hello` reports them so clients can stay inside.
public struct Limits: Sendable {
    /// All frames of one request together.
    public var maxMessageBytes = 1 << 20
    public var maxPointsPerStroke = 10_000
    public var maxStrokesPerDrawing = 2_000
    public var maxTextsPerDrawing = 500
    public var maxTextLength = 2_000
    public var maxSessions = 1_000
    /// Sessions one authenticated client may hold at once, so one key cannot take them all.
    public var maxSessionsPerClient = 100
    /// Replies remembered per session, so a retried request is answered without running twice.
    public var replyCacheSize = 64
    /// The largest side of an `imageData` PNG, in pixels.
    public var maxImageSide = 8_192
    public var maxTransitionMilliseconds: Int64 = 60_000

    public init() {}

    public var json: JSONValue {
        [
            "maxMessageBytes": .integer(Int64(maxMessageBytes)),
            "maxPointsPerStroke": .integer(Int64(maxPointsPerStroke)),
            "maxStrokesPerDrawing": .integer(Int64(maxStrokesPerDrawing)),
            "maxTextsPerDrawing": .integer(Int64(maxTextsPerDrawing)),
            "maxTextLength": .integer(Int64(maxTextLength)),
            "maxSessions": .integer(Int64(maxSessions)),
            "maxSessionsPerClient": .integer(Int64(maxSessionsPerClient)),
            "replyCacheSize": .integer(Int64(replyCacheSize)),
            "maxImageSide": .integer(Int64(maxImageSide)),
            "maxTransitionMs": .integer(maxTransitionMilliseconds),
        ]
    }
}

public struct ServiceConfiguration: Sendable {
    public var endpoint = "tcp://127.0.0.1:5555"
    public var eventsEndpoint = "tcp://127.0.0.1:5556"
    public var documentsPath = "documents"
    /// Revisions kept per document, the current one included (at least 2: the original and the latest).
    public var keepRevisions = 20
    /// A session nobody has touched for this long is closed.
    public var idleTimeout: Duration = .seconds(600)
    public var limits = Limits()
    /// Loopback-only without authentication unless CurveZMQ keys are given.
    public var security = ServiceSecurity.loopbackOnly

    public init() {}
}
