import CanvasOperations
public import DocumentStore
import Foundation
public import CanvasProtocol

/// Limits the service enforces; `hello` reports them so clients can stay inside.
public struct Limits: Sendable {
    /// All frames of one request together, each frame counting `frameOverheadBytes` more (so
    /// millions of empty frames are not a small request).
    public var maxMessageBytes = 1 << 20
    public static let frameOverheadBytes = 64
    /// Events queued for one subscriber that does not read, before the newest are dropped (it
    /// sees the gap in `seq`). libzmq counts messages, not bytes: an event's size is bounded
    /// instead (`maxEventImageBytes`), and the queue holds at most the two multiplied, shared
    /// by every subscriber (libzmq sends one copy of a large message to all).
    public static let eventQueueMessages: Int32 = 1_000
    /// The largest `imageData` a `canvas.result` event carries; a larger image is left out of
    /// the event (`imageOmitted: "tooLarge"`), the reply that asked for it still has it.
    public static let maxEventImageBytes = 128 << 10
    public var maxPointsPerStroke = 10_000
    /// Points in all strokes of one drawing: what bounds rendering, `drawing.get` and a save.
    /// A page of handwriting is about 5,000.
    public var maxPointsPerDrawing = 100_000
    /// Points of ink one page of a document may hold, every save's together.
    public var maxPointsPerPage = 400_000
    public var maxStrokesPerDrawing = 2_000
    public var maxTextsPerDrawing = 500
    public var maxTextLength = 2_000
    public var maxSessions = 1_000
    /// Sessions one client may hold at once, so one client cannot take them all: one key with
    /// CurveZMQ, one connection on loopback.
    public var maxSessionsPerClient = 100
    /// Sessions one owner may hold at once over all its connections: a web token's owner, a
    /// CurveZMQ key, or on loopback every local client together (one user of the machine). A
    /// quarter of `maxSessions`, so no one owner keeps the others out however many
    /// connections it makes.
    public var maxSessionsPerOwner = 250
    /// Replies remembered per session, so a retried request is answered without running twice.
    public var replyCacheSize = 64
    /// A reply larger than this is sent but not remembered (a retry of a request that changed
    /// something then answers UNAVAILABLE `replyNotKept`; one that only read runs again), and
    /// a session remembers at most `maxCachedBytesPerSession` in all.
    public var maxCachedReplyBytes = 256 << 10
    public var maxCachedBytesPerSession = 1 << 20
    /// The largest side of an `imageData` PNG, in pixels.
    public var maxImageSide = 8_192
    /// How long a result image may take to render, counted from when its result is ready for
    /// it (a submit's save done): past it the render stops and the result goes without the
    /// image (`imageOmitted: "timeout"`), so its session waits this long at most. Room for a
    /// page of handwriting, and for an empty image of the largest size (whose PNG encoding
    /// is most of its cost), on a busy machine; not for many points far apart on a large
    /// canvas, whose image could take minutes.
    public var imageTimeBudget: Duration = .seconds(5)
    /// The largest document `document.upload.*` takes, and how many uploads may be under way
    /// at once (their bytes wait in a temporary file each until the commit: disk, not memory).
    public var maxUploadBytes = 32 << 20
    /// Room for several owners at their per-owner limit at once; and however it is set, one
    /// owner's uploads never take the last free slot (`Uploads.begin`).
    public var maxUploads = 8
    /// Uploads one owner may have under way at once, so one owner cannot hold every slot.
    public var maxUploadsPerOwner = 2
    /// The most bytes one `document.get` reply carries (base64 in JSON); larger documents are
    /// fetched in pieces with `offset` and `length`.
    public var maxGetBytes = 8 << 20
    /// Resident memory past which large replies (`document.get`, a large `drawing.get`) are
    /// refused for the moment (`UNAVAILABLE`, reason `memory`). libzmq queues a reply until
    /// its client reads it and counts the queue in messages, not bytes: a client that asks and
    /// never reads would otherwise grow the process by a reply per request.
    public var memoryBudgetBytes = 256 << 20
    public var maxTransitionMilliseconds: Int64 = 60_000

    public init() {}

    public var json: JSONValue {
        [
            "maxMessageBytes": .integer(Int64(maxMessageBytes)),
            "frameOverheadBytes": .integer(Int64(Self.frameOverheadBytes)),
            "maxPointsPerStroke": .integer(Int64(maxPointsPerStroke)),
            "maxPointsPerDrawing": .integer(Int64(maxPointsPerDrawing)),
            "maxPointsPerPage": .integer(Int64(maxPointsPerPage)),
            "maxStrokesPerDrawing": .integer(Int64(maxStrokesPerDrawing)),
            "maxTextsPerDrawing": .integer(Int64(maxTextsPerDrawing)),
            "maxTextLength": .integer(Int64(maxTextLength)),
            "maxSessions": .integer(Int64(maxSessions)),
            "maxSessionsPerClient": .integer(Int64(maxSessionsPerClient)),
            "maxSessionsPerOwner": .integer(Int64(maxSessionsPerOwner)),
            "replyCacheSize": .integer(Int64(replyCacheSize)),
            "maxCachedReplyBytes": .integer(Int64(maxCachedReplyBytes)),
            "maxImageSide": .integer(Int64(maxImageSide)),
            "imageTimeBudgetMs": .integer(imageTimeBudget.milliseconds),
            "maxUploadBytes": .integer(Int64(maxUploadBytes)),
            "maxUploads": .integer(Int64(maxUploads)),
            "maxUploadsPerOwner": .integer(Int64(maxUploadsPerOwner)),
            "maxGetBytes": .integer(Int64(maxGetBytes)),
            "maxTransitionMs": .integer(maxTransitionMilliseconds),
        ]
    }
}

/// What the request path is configured with: where documents are, how long sessions live, the
/// limits. The server's own settings (endpoints, keys, the session store, health) are in
/// `ServerConfiguration`, which holds one of these.
public struct ServiceConfiguration: Sendable {
    public var documentsPath = "documents"
    /// Revisions kept per document, the current one included (at least 2: the original and the latest).
    public var keepRevisions = 20
    /// How a save that appends reaches the disk: a new file renamed over the document (the
    /// default), or the update appended in place.
    public var saveMode = SaveMode.replace
    /// A session nobody has touched for this long is closed.
    public var idleTimeout: Duration = .seconds(600)
    /// How long the session store keeps an untouched session: the idle timeout and a little
    /// more, so that its holder's sweep (once a second) expires it, announced, before the store
    /// lets it go unseen.
    public var storedSessionLife: Duration { idleTimeout + max(.seconds(2), idleTimeout / 10) }
    /// An upload no part has added bytes to for this long is dropped, freeing its slot.
    public var uploadIdleTimeout: Duration = .seconds(600)
    public var limits = Limits()
    /// Whether clients are authenticated (CurveZMQ): sessions are then private to their owner,
    /// and nothing server-wide names them. The server sets it from its security.
    public var clientsAuthenticated = false
    /// This instance's name in the session store; unique among the instances sharing it.
    public var instanceName = ServiceConfiguration.defaultInstanceName

    /// The host's name and a random suffix: a process id is 1 in every container, so
    /// `host/pid` collided for containers sharing the host's network and name.
    public static let defaultInstanceName: String =
        "\(ProcessInfo.processInfo.hostName)/\(String(UInt32.random(in: 0...UInt32.max), radix: 16))"

    public init() {}
}
