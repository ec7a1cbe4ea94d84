import Foundation
public import Logging

/// One feed of `document.saved` for every instance: each save is numbered in Redis and
/// published on one channel there, and every instance relays what it hears to its own
/// subscribers. A viewer on any instance hears every save once, numbered in one sequence,
/// instead of only the saves of the instance it reached, each instance counting its own.
///
/// Announcing is done on one thread at a time (canvasd's first store lane); hearing runs on a
/// thread of its own with a connection of its own, since a subscribed connection can do
/// nothing else.
public final class DocumentFeed: @unchecked Sendable {
    // @unchecked: `announcer` is used by one thread at a time, `url` and the names are
    // immutable, and the listening thread makes its own connection.
    private let announcer: RedisConnection
    private let url: RedisURL
    private let channel: String
    /// Where what the feed skips is told (a message on its channel that is no announcement).
    private let logger: Logger
    private let sequenceKey: String
    private let announcedPrefix: String
    private let markSeconds: [UInt8]
    private var loadedScript: String?

    /// `markLife`: how long a save's mark is kept, so that announcing it again is dropped:
    /// as long as the request that saved can be run again (by a retry that takes its session
    /// over), and no longer, so the marks kept stay as few as the saves of that time.
    public init(url: String, keyPrefix: String = "canvas:", markLife: Duration = .seconds(600),
                timeout: Duration = .milliseconds(500), logger: Logger = Logger(label: "canvas.sessions")) throws(RedisError) {
        self.logger = logger
        self.url = try RedisURL(url)
        announcer = try RedisConnection(url: self.url, timeout: timeout)
        channel = keyPrefix + "documents:feed"
        sequenceKey = keyPrefix + "documents:seq"
        announcedPrefix = keyPrefix + "documents:announced:"
        markSeconds = Array(String(max(1, markLife.components.seconds)).utf8)
    }

    /// Numbers and publishes a save once, whichever instance announces it (a save announced
    /// again, by a retry that ran the request again on another instance say, is dropped). A
    /// save is its document's `name`, `revision` and `sha256` and the time its revision was
    /// committed (`savedAt`, milliseconds since 1970): a history started again hands out the
    /// same numbers, and the same edit makes the same bytes, but never at the same time. `data`
    /// is the event's data as JSON text. Returns the number it got, or nil when it had been
    /// announced already.
    @discardableResult
    public func announce(name: String, revision: Int, sha256: String, savedAt: Int64?, data: [UInt8]) throws(RedisError) -> UInt64? {
        let doing = "announcing \(name) revision \(revision) on the document feed"
        let mark = "\(announcedPrefix)\(name)\u{0}\(revision)\u{0}\(sha256)\u{0}\(savedAt.map(String.init) ?? "")"
        let keys = [Array(sequenceKey.utf8), Array(mark.utf8)]
        let reply = try announcer.evaluate(Self.script, sha: &loadedScript, keys: keys, arguments: [Array(channel.utf8), data, markSeconds],
                                           doing: doing)
        guard case .integer(let seq) = reply else { throw RedisError(doing: doing, cause: .unexpectedReply("\(reply)")) }
        return seq > 0 ? UInt64(seq) : nil
    }

    /// Listens on a thread of its own for as long as the process lives, handing each save
    /// heard (its number and its data as JSON text) to `heard`, reconnecting after a failure.
    /// Returns once the first subscription is in place, so nothing announced after is missed.
    public func listen(_ heard: @escaping @Sendable (UInt64, [UInt8]) -> Void,
                       failed: @escaping @Sendable (any Error) -> Void) throws(RedisError) {
        let first = Handoff(try Self.subscribe(url, channel))
        let url = self.url, channel = self.channel, logger = self.logger
        let thread = Thread {
            var connection: RedisConnection? = first.connection
            while true {
                do {
                    if connection == nil { connection = try Self.subscribe(url, channel) }
                    let message = try connection!.nextPush(doing: "listening on the document feed")
                    // ["message", channel, "<seq> <data>"]
                    guard case .array(let parts) = message, parts.count == 3, case .bytes(let body) = parts[2],
                          let space = body.firstIndex(of: UInt8(ascii: " ")),
                          let seq = UInt64(String(decoding: body[..<space], as: UTF8.self)) else {
                        // Another program's PUBLISH on the channel, or damage: not relayed, but seen.
                        logger.warning("a message on the document feed that is no announcement; skipped",
                                       metadata: ["channel": "\(channel)", "message": "\(Self.shown(message))"])
                        continue
                    }
                    heard(seq, Array(body[(space + 1)...]))
                } catch {
                    failed(error)
                    connection = nil
                    Thread.sleep(forTimeInterval: 0.5)
                }
            }
        }
        thread.name = "canvasd document feed"
        thread.start()
    }

    /// A message as the log shows it: its text (the last part of a pub/sub message), cut short.
    private static func shown(_ message: RedisValue) -> String {
        if case .array(let parts) = message, let last = parts.last?.string { return String(last.prefix(200)) }
        return String(String(describing: message).prefix(200))
    }

    /// The first subscribed connection, made here so that `listen` can say it is in place, and
    /// handed to the listening thread, which alone uses it from then on.
    private final class Handoff: @unchecked Sendable {
        let connection: RedisConnection
        init(_ connection: RedisConnection) { self.connection = connection }
    }

    private static func subscribe(_ url: RedisURL, _ channel: String) throws(RedisError) -> RedisConnection {
        // No timeout on replies: a quiet feed is not a failure.
        let connection = try RedisConnection(url: url, timeout: .seconds(2), waitsForever: true)
        _ = try connection.command(["SUBSCRIBE", channel], doing: "subscribing to the document feed")
        return connection
    }

    /// KEYS: the sequence, the save's announced-mark. ARGV: the channel, the data, how many
    /// seconds the mark lives.
    private static let script = """
    if redis.call('SET', KEYS[2], '1', 'NX', 'EX', ARGV[3]) == false then return 0 end
    local seq = redis.call('INCR', KEYS[1])
    redis.call('PUBLISH', ARGV[1], seq .. ' ' .. ARGV[2])
    return seq
    """
}
