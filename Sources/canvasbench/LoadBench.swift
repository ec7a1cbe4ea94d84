import ArgumentParser
import CanvasClient
import CanvasCore
import CanvasModel
import CanvasProtocol
import Foundation
import Synchronization
import ZeroMQ

/// Many clients at once, each pipelining a random mix of toggles, drawing edits and flattens on
/// its own session and document, every reply checked: it must arrive, answer a request this
/// client has in flight, and say what the model predicts (or, for a flatten, the next revision).
/// Beside them, one subscriber that never reads, to show that a stalled reader neither slows the
/// server nor grows its memory.
struct LoadBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "load", abstract: "Concurrent pipelined clients against canvasd, every reply checked.")

    @Option(help: "Concurrent clients, each a DEALER socket on its own thread.") var clients = 32
    @Option(help: "Requests per client.") var requests = 2_000
    @Option(help: "Requests each client keeps in flight.") var window = 8
    @Option(help: "One request in this many is a document.flatten.") var flattenEvery = 50
    @Option(help: "Pages of each client's document.") var pages = 20
    @Option(help: "Seconds to wait for any one reply before it counts as lost.") var replyTimeout = 60
    @Flag(help: "Run canvasd with CurveZMQ: a key pair per client, all allowed, every socket encrypted.") var curve = false
    @Option(help: "Run canvasd with --session-store URL (redis://host:port/db).") var sessionStore: String?
    @Option(help: "With --session-store: canvasd's --session-store-replicas (each change confirmed by that many replicas).")
    var sessionStoreReplicas = 0
    @Option(help: "Load a running service (canvasd, or HAProxy in front of several) at this request endpoint instead of starting one.")
    var connect: String?
    @Option(help: "With --connect: its event endpoint.") var connectEvents: String?
    @Option(help: "With --connect: the service's document folder, where each client's document is put.") var documents: String?
    @Option(help: "With --connect: spread the clients over this many loopback source addresses (127.0.0.2 and up), so that HAProxy's source hash spreads them over the instances.")
    var sources = 1

    func validate() throws {
        if connect != nil {
            guard connectEvents != nil, documents != nil else { throw ValidationError("--connect needs --connect-events and --documents") }
            guard !curve, sessionStore == nil else { throw ValidationError("--curve and --session-store start canvasd; not with --connect") }
        }
        guard (1...250).contains(sources) else { throw ValidationError("--sources must be 1 to 250") }
    }

    /// The endpoint as reached from client `index`'s source address.
    func endpoint(_ endpoint: String, client index: Int) -> String {
        guard sources > 1, endpoint.hasPrefix("tcp://") else { return endpoint }
        let address = String(endpoint.dropFirst(6))
        return "tcp://127.0.0.\(2 + index % sources):0;\(address)"
    }

    func run() throws {
        let folder = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("canvas-load-\(getpid())")
        let documents = self.documents.map { URL(fileURLWithPath: $0) } ?? folder.appendingPathComponent("documents")
        try FileManager.default.createDirectory(at: documents, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let template = folder.appendingPathComponent("template.pdf")
        try BenchDocuments.write(to: template, pages: pages, scanned: false, imageSide: 0)
        for client in 0..<clients {
            let document = documents.appendingPathComponent(Self.document(client))
            // A document of an earlier run starts over (its revisions too), so flattens count from 1.
            try? FileManager.default.removeItem(at: document)
            try? FileManager.default.removeItem(at: documents.appendingPathComponent(".canvas-revisions/\(Self.document(client))"))
            try FileManager.default.copyItem(at: template, to: document)
        }

        let context = try ZMQContext()
        let endpoint = connect ?? "ipc://\(folder.path)/requests", events = connectEvents ?? "ipc://\(folder.path)/events"
        var arguments = ["--endpoint", endpoint, "--events", events, "--documents", documents.path, "--log-level", "error",
                         "--keep-revisions", "3", "--max-sessions", "\(max(1_000, clients * 2))",
                         // On loopback every client is the one local owner: the bench's clients are one user's.
                         "--max-sessions-per-owner", "\(max(1_000, clients * 2))"]
        // With --curve: the server's pair, one pair per client (index `clients` is the subscribers'), all allowed.
        var keys: [CurveCredentials?] = Array(repeating: nil, count: clients + 1)
        if curve {
            let server = try CurveKeyPair.generate()
            let allowed = folder.appendingPathComponent("allowed")
            try FileManager.default.createDirectory(at: allowed, withIntermediateDirectories: true)
            try CurveKeyFile.secretText(server).write(to: folder.appendingPathComponent("server.key"), atomically: true, encoding: .utf8)
            for index in keys.indices {
                let pair = try CurveKeyPair.generate()
                try CurveKeyFile.publicText(pair.publicKey).write(to: allowed.appendingPathComponent("\(index).pub"),
                                                                  atomically: true, encoding: .utf8)
                keys[index] = CurveCredentials(serverKey: server.publicKey, client: pair)
            }
            arguments += ["--curve-secret-key", folder.appendingPathComponent("server.key").path, "--allowed-keys", allowed.path]
        }
        if let sessionStore { arguments += ["--session-store", sessionStore, "--session-store-replicas", String(sessionStoreReplicas)] }
        let credentials = keys
        let canvasd = connect == nil ? try Child(Sibling.path("canvasd"), arguments) : nil
        defer { canvasd?.stop() }
        let probe = try CanvasClient(endpoint: endpoint, timeoutMilliseconds: 200, curve: keys[clients], context: context)
        var up = false
        for _ in 0..<50 where !up { if case .success? = try? probe.call("hello") { up = true } }
        guard up else { throw ValidationError("canvasd did not start") }

        // The stalled subscriber: subscribed to everything, with a small queue, never read.
        let stalled = try context.socket(.sub)
        if let subscriber = keys[clients] { try stalled.makeCurveClient(serverKey: subscriber.serverKey, keyPair: subscriber.client) }
        try stalled.setReceiveHighWaterMark(100)
        // Everything; under CurveZMQ only the shared documents topic is granted to it.
        try stalled.subscribe(curve ? "documents." : "")
        try stalled.connect(events)
        // A reading subscriber, to count what was published.
        let reader = EventCounter(context: context, endpoint: events, curve: keys[clients], prefix: curve ? "documents." : "")
        usleep(200_000)
        let idleRSS = canvasd.map { Memory.of($0.process.processIdentifier) }

        let outcomes = Mutex<[ClientOutcome]>([])
        let clock = ContinuousClock()
        let start = clock.now
        let threads = (0..<clients).map { index in
            Thread { [self] in
                let outcome = ClientRun(index: index, endpoint: self.endpoint(endpoint, client: index), curve: credentials[index], context: context, requests: requests, window: window,
                                        flattenEvery: flattenEvery, pages: pages, timeoutSeconds: replyTimeout).run()
                outcomes.withLock { $0.append(outcome) }
            }
        }
        threads.forEach { $0.start() }
        while outcomes.withLock({ $0.count }) < clients { usleep(10_000) }
        let elapsed = clock.now - start
        let seconds = elapsed.seconds
        let loadedRSS = canvasd.map { Memory.of($0.process.processIdentifier) }
        let published = reader.stop()

        let all = outcomes.withLock { $0 }
        let total = all.reduce(0) { $0 + $1.replies }
        let lost = all.reduce(0) { $0 + $1.lost }, mismatched = all.reduce(0) { $0 + $1.mismatched }
        let wrong = all.flatMap(\.wrong)
        let canvasLatency = Stats(all.flatMap(\.canvasMicroseconds)), flattenLatency = Stats(all.flatMap(\.flattenMicroseconds))
        let everything = Stats(all.flatMap(\.canvasMicroseconds) + all.flatMap(\.flattenMicroseconds))
        var title = "load: \(clients) clients x \(requests) requests, \(window) in flight each, 1 in \(flattenEvery) a flatten of a \(pages)-page PDF"
        if curve { title += ", CurveZMQ" }
        if sessionStore != nil { title += ", sessions in Redis" + (sessionStoreReplicas > 0 ? " (each change on \(sessionStoreReplicas) replicas)" : "") }
        if let connect { title += ", through \(connect) from \(sources) source address" + (sources == 1 ? "" : "es") }
        print(title)
        print("  replies: \(total) of \(clients * requests); lost \(lost), mismatched \(mismatched), wrong \(wrong.count)")
        print("  time \(format(seconds, 2)) s, throughput \(format(Double(total) / seconds, 0)) replies/s")
        print("  latency µs       p50       p90       p99       max")
        for (name, stats) in [("all", everything), ("canvas/drawing", canvasLatency), ("flatten", flattenLatency)] {
            let row = [50.0, 90, 99, 100].map { format(stats.percentile($0), 0) }
            print("  \(name.padding(toLength: 15, withPad: " ", startingAt: 0))" + row.map { String(repeating: " ", count: max(0, 10 - $0.count)) + $0 }.joined())
        }
        if let idleRSS, let loadedRSS {
            print("  canvasd memory: \(format(idleRSS.rss)) MB resident idle, \(format(loadedRSS.rss)) MB after, peak \(format(loadedRSS.peak)) MB")
        }
        print("  events: \(published) read by a live subscriber\(curve ? " of the documents topic" : ""); a stalled subscriber "
              + "(queue of 100, never read) was connected throughout")
        for problem in wrong.prefix(5) { print("  WRONG: \(problem)") }
        if lost + mismatched + wrong.count > 0 { throw ExitCode(1) }
    }

    static func document(_ client: Int) -> String { "client-\(client).pdf" }
}

/// What one client saw.
struct ClientOutcome: Sendable {
    var replies = 0
    var lost = 0
    var mismatched = 0
    var wrong: [String] = []
    var canvasMicroseconds: [Double] = []
    var flattenMicroseconds: [Double] = []
}

/// One client: its own session, its own document, requests pipelined `window` deep.
struct ClientRun {
    let index: Int
    let endpoint: String
    let curve: CurveCredentials?
    let context: ZMQContext
    let requests: Int
    let window: Int
    let flattenEvery: Int
    let pages: Int
    let timeoutSeconds: Int

    private enum Expectation {
        case canvas(Observation)
        case flatten(revision: Int)
    }

    func run() -> ClientOutcome {
        var outcome = ClientOutcome()
        do {
            try drive(&outcome)
        } catch {
            outcome.wrong.append("client \(index): \(error)")
        }
        return outcome
    }

    private func drive(_ outcome: inout ClientOutcome) throws {
        let socket = try context.socket(.dealer)
        if let curve { try socket.makeCurveClient(serverKey: curve.serverKey, keyPair: curve.client) }
        try socket.setReceiveTimeout(milliseconds: Int32(timeoutSeconds * 1000))
        try socket.connect(endpoint)
        try socket.send([JSONCodec.serialize(Request(id: .string("open"), method: "session.open",
                                                     params: ["transitions": "instant"]).json)])
        guard let opened = try socket.receive(), let reply = try? JSONCodec.parse(opened.last ?? []),
              let session = reply["result"]?["session"]?.stringValue else { throw ValidationError("session.open failed") }

        var model = ReferenceCanvas(pencil: PencilConfiguration(), transitions: .instant, initialized: true)
        var commands = RandomCommands(seed: UInt64(index) &* 7919 &+ 1)
        var revision = 1
        var inFlight: [Int64: (Expectation, ContinuousClock.Instant)] = [:]
        let clock = ContinuousClock()
        var sent = 0
        while outcome.replies + outcome.lost < requests {
            while sent < requests && inFlight.count < window {
                sent += 1
                let id = Int64(sent)
                let request: Request
                if sent % flattenEvery == 0 {
                    revision += 1
                    let page = sent / flattenEvery % pages
                    let stroke: JSONValue = ["tool": "pen", "color": "red", "width": 3,
                                             "points": [["x": .number(Double(20 + sent % 300)), "y": 40], ["x": 80, "y": 90]]]
                    request = Request(id: .integer(id), method: "document.flatten", params: [
                        "name": .string(LoadBench.document(index)), "page": .integer(Int64(page)),
                        "drawing": ["strokes": [stroke], "texts": []], "expectedRevision": .integer(Int64(revision - 1)),
                    ])
                    inFlight[id] = (.flatten(revision: revision), clock.now)
                } else {
                    let command = commands.next()
                    let (method, params) = try WireCommands.request(command)
                    request = Request(id: .integer(id), method: method, params: params, session: session)
                    inFlight[id] = (.canvas(model.predict(command)), clock.now)
                }
                try socket.send([JSONCodec.serialize(request.json)])
            }
            guard let frames = try socket.receive() else {
                // Nothing for the whole timeout: everything still in flight is lost.
                outcome.lost += inFlight.count
                return
            }
            guard let reply = try? JSONCodec.parse(frames.last ?? []), let id = reply["id"]?.integerValue,
                  let (expectation, sentAt) = inFlight.removeValue(forKey: id) else {
                outcome.mismatched += 1
                continue
            }
            outcome.replies += 1
            let elapsed = clock.now - sentAt
            let microseconds = elapsed.microseconds
            switch expectation {
            case .canvas(let observation):
                outcome.canvasMicroseconds.append(microseconds)
                do {
                    if let problem = WireCommands.check(try CanvasClient.outcome(of: reply), against: observation) {
                        outcome.wrong.append("client \(index) request \(id): \(problem)")
                    }
                } catch {
                    outcome.wrong.append("client \(index) request \(id): \(error)")
                }
            case .flatten(let expected):
                outcome.flattenMicroseconds.append(microseconds)
                guard reply["result"]?["revision"]?.integerValue == Int64(expected),
                      reply["result"]?["pageCount"]?.integerValue == Int64(pages) else {
                    outcome.wrong.append("client \(index) flatten \(id): expected revision \(expected), got \(reply)")
                    continue
                }
            }
        }
        try socket.send([JSONCodec.serialize(Request(id: .string("close"), method: "session.close", session: session).json)])
        _ = try socket.receive()
    }
}

/// Counts events on its own thread until stopped.
final class EventCounter: Sendable {
    private let count = Atomic<Int>(0)
    private let stopRequested = Atomic<Bool>(false)
    private let finished = DispatchSemaphore(value: 0)

    init(context: ZMQContext, endpoint: String, curve: CurveCredentials?, prefix: String) {
        Thread { [self] in
            defer { finished.signal() }
            guard let socket = try? context.socket(.sub) else { return }
            if let curve { try? socket.makeCurveClient(serverKey: curve.serverKey, keyPair: curve.client) }
            try? socket.subscribe(prefix)
            try? socket.setReceiveTimeout(milliseconds: 100)
            try? socket.connect(endpoint)
            while !stopRequested.load(ordering: .relaxed) {
                if (try? socket.receive()) != nil { count.add(1, ordering: .relaxed) }
            }
        }.start()
    }

    /// Stops reading; returns how many events were read.
    func stop() -> Int {
        usleep(300_000)   // the last events of the run are still on their way
        stopRequested.store(true, ordering: .relaxed)
        finished.wait()
        return count.load(ordering: .relaxed)
    }
}
