import ArgumentParser
import CanvasClient
import CanvasProtocol
import Foundation
import ZeroMQ

/// Round trips of a `canvas.state` request to canvasd, next to the same bytes echoed by a
/// bare libzmq server, over tcp loopback, with the same client code for both.
struct Latency: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Request round trip: canvasd against a raw libzmq echo.")

    @Option(help: "Round trips measured per server and round (after a warm-up).") var requests = 10_000
    @Option(help: "Requests kept in flight for the throughput run.") var window = 64
    @Option(help: "Requests per server and round in the throughput run.") var pipelinedRequests = 50_000
    @Option(help: "Rounds, alternating the servers; the figures are medians over rounds.") var rounds = 9
    @Flag(help: "Skip the one-at-a-time round trips, to profile the pipelined run alone.") var pipelinedOnly = false
    @Option(help: ArgumentHelp("Another canvasd binary, timed beside this one (and the echo) in the same rounds.",
                               discussion: "For changes worth a few percent, which this machine's swings hide between runs."))
    var against: String?

    func run() throws {
        let context = try ZMQContext()
        let echoEndpoint = try freeEndpoint(context)
        let canvasEndpoint = try freeEndpoint(context)
        let echo = try Child(Sibling.path("canvasbench"), ["echo", "--endpoint", echoEndpoint])
        let canvasd = try Child(Sibling.path("canvasd"), ["--endpoint", canvasEndpoint, "--events", try freeEndpoint(context),
                                                          "--log-level", "error", "--documents", NSTemporaryDirectory()])
        defer { echo.stop(); canvasd.stop() }
        let frames = try requestFrames(canvasEndpoint)
        if let against {
            try compare(context, echo: (echo, echoEndpoint), canvasd: (canvasd, canvasEndpoint, frames), against: against)
            return
        }

        // Rounds alternate the servers, and which goes first, so that a slow spell of the
        // machine (two cores shared by four busy threads, on a virtual machine) falls on both
        // alike; the ratios are taken per round, then their median, so one bad round moves it
        // less than it moves the ratio of two medians.
        var raw: [Measurement] = [], served: [Measurement] = []
        for round in 0..<rounds {
            if round % 2 == 0 {
                raw.append(try measure(context, echoEndpoint, frames, server: echo.process.processIdentifier))
                served.append(try measure(context, canvasEndpoint, frames, server: canvasd.process.processIdentifier))
            } else {
                served.append(try measure(context, canvasEndpoint, frames, server: canvasd.process.processIdentifier))
                raw.append(try measure(context, echoEndpoint, frames, server: echo.process.processIdentifier))
            }
        }
        let rawLatency = Stats(raw.map(\.medianMicroseconds)).median
        let servedLatency = Stats(served.map(\.medianMicroseconds)).median
        let rawP99 = Stats(raw.map(\.p99Microseconds)).median
        let servedP99 = Stats(served.map(\.p99Microseconds)).median
        let rawRate = Stats(raw.map(\.perSecond)).median
        let servedRate = Stats(served.map(\.perSecond)).median
        let latencyRatios = zip(served, raw).map { $0.medianMicroseconds / $1.medianMicroseconds }
        let throughputRatios = zip(served, raw).map { $0.perSecond / $1.perSecond }
        print("request round trip, tcp loopback, \(frames[0].count)-byte canvas.state (a new id each), \(requests) requests x \(rounds) rounds")
        print("                 median µs   p99 µs   pipelined req/s (window \(window))")
        print("  raw libzmq echo  \(pad(format(rawLatency)))  \(pad(format(rawP99)))  \(format(rawRate, 0))")
        print("  canvasd          \(pad(format(servedLatency)))  \(pad(format(servedP99)))  \(format(servedRate, 0))")
        print("per round, canvasd / raw: " + (pipelinedOnly ? "" : "latency \(latencyRatios.map { format($0, 2) }.joined(separator: " ")); ")
              + "throughput \(throughputRatios.map { format($0, 2) }.joined(separator: " "))")
        if !pipelinedOnly {
            print("latency ratio canvasd / raw: \(format(Stats(latencyRatios).median, 2))x (median of rounds; target at most 1.1x)")
        }
        print("throughput ratio canvasd / raw: \(format(Stats(throughputRatios).median, 2))x (median of rounds; target at least 0.5x)")
        // Where the pipelined run's CPU went, per request and thread, over all rounds: on two
        // cores every thread's time is taken from the others, so this is what the ratio costs.
        print("CPU per pipelined request, µs by thread (user + system, from /proc):")
        for (label, measurements) in [("raw libzmq echo", raw), ("canvasd", served)] {
            let server = measurements.map(\.serverCPU).reduce(ThreadTimes(), +)
            let client = measurements.map(\.clientCPU).reduce(ThreadTimes(), +)
            let describe = { (times: ThreadTimes) in
                times.microsecondsByName.sorted { $0.value > $1.value }.filter { $0.value > 0 }
                    .map { "\($0.key) \(format($0.value / Double(self.pipelinedRequests * self.rounds), 2))" }.joined(separator: ", ")
            }
            print("  \(label): server \(describe(server)); client \(describe(client))")
        }
    }

    /// The requests the benchmark sends: real canvas.state requests on a real session of the
    /// canvasd at `endpoint`. Each has an id of its own, as a real client's do, so canvasd runs
    /// every one (a repeated id would be a retry, answered from the session's reply cache).
    /// Written before the clock starts; the echo gets the same bytes.
    private func requestFrames(_ endpoint: String) throws -> [[UInt8]] {
        let client = try CanvasClient(endpoint: endpoint, timeoutMilliseconds: 5_000)
        var session: String?
        for _ in 0..<50 where session == nil {
            if case .success(let opened)? = try? client.call("session.open") {
                session = opened["session"]?.stringValue
            } else {
                usleep(100_000)
            }
        }
        guard let session else { throw ValidationError("canvasd at \(endpoint) did not start") }
        return (0..<max(requests + requests / 10, pipelinedRequests)).map { index in
            JSONCodec.serialize(Request(id: .integer(Int64(index + 1)), method: "canvas.state", session: session).json)
        }
    }

    /// `--against`: the echo, this canvasd and another one, in a new random order each round;
    /// the figures are medians of per-round ratios, as in the main run.
    private func compare(_ context: ZMQContext, echo: (child: Child, endpoint: String),
                         canvasd: (child: Child, endpoint: String, frames: [[UInt8]]), against path: String) throws {
        let otherEndpoint = try freeEndpoint(context)
        let other = try Child(path, ["--endpoint", otherEndpoint, "--events", try freeEndpoint(context),
                                     "--log-level", "error", "--documents", NSTemporaryDirectory()])
        defer { other.stop() }
        let servers = [(echo.endpoint, canvasd.frames, echo.child), (canvasd.endpoint, canvasd.frames, canvasd.child),
                       (otherEndpoint, try requestFrames(otherEndpoint), other)]
        var runs: [[Measurement]] = [[], [], []]
        print("round trip µs, median per round: echo, this canvasd, \(path)")
        for round in 0..<rounds {
            for index in [0, 1, 2].shuffled() {
                let (endpoint, frames, child) = servers[index]
                runs[index].append(try measure(context, endpoint, frames, server: child.process.processIdentifier))
            }
            print("  round \(round): " + runs.map { format($0[round].medianMicroseconds) }.joined(separator: "  "))
        }
        func ratio(_ a: Int, _ b: Int, _ figure: (Measurement) -> Double) -> String {
            format(Stats(zip(runs[a], runs[b]).map { figure($0) / figure($1) }).median, 3)
        }
        print("latency, this / echo \(ratio(1, 0, \.medianMicroseconds)), other / echo \(ratio(2, 0, \.medianMicroseconds)), "
              + "this / other \(ratio(1, 2, \.medianMicroseconds))")
        print("throughput, this / echo \(ratio(1, 0, \.perSecond)), other / echo \(ratio(2, 0, \.perSecond)), "
              + "this / other \(ratio(1, 2, \.perSecond))")
    }

    struct Measurement {
        var medianMicroseconds: Double
        var p99Microseconds: Double
        var perSecond: Double
        /// CPU the server and this client used in the pipelined run, by thread.
        var serverCPU: ThreadTimes
        var clientCPU: ThreadTimes
    }

    private func pad(_ figure: String) -> String {
        let shown = figure == "nan" ? "-" : figure   // no round trips timed (--pipelined-only)
        return String(repeating: " ", count: max(0, 8 - shown.count)) + shown
    }

    private func freeEndpoint(_ context: ZMQContext) throws -> String {
        let probe = try context.socket(.rep)
        try probe.bind("tcp://127.0.0.1:*")
        return probe.lastEndpoint
    }

    /// One REQ round trip at a time for latency, then a DEALER with `window` in flight for throughput.
    private func measure(_ context: ZMQContext, _ endpoint: String, _ frames: [[UInt8]], server: Int32) throws -> Measurement {
        // The options read once: each read of an @Option goes through its property wrapper's
        // generic getter, a metadata lookup that showed up in the client's profile when read
        // per request inside the timed loops.
        let (requests, window, pipelinedRequests) = (self.requests, self.window, self.pipelinedRequests)
        let roundTrips = pipelinedOnly ? 0 : requests + requests / 10   // a tenth more, to warm up
        let req = try context.socket(.req)
        try req.setReceiveTimeout(milliseconds: 5_000)
        try req.connect(endpoint)
        let clock = ContinuousClock()
        var samples: [Double] = []
        samples.reserveCapacity(requests)
        for index in 0..<roundTrips {
            let start = clock.now
            try req.send([frames[index]])
            guard try req.receive() != nil else { throw ValidationError("no reply from \(endpoint)") }
            if index >= requests / 10 {   // the first tenth warms up
                let elapsed = clock.now - start
                samples.append(elapsed.microseconds)
            }
        }
        let stats = Stats(samples)

        let dealer = try context.socket(.dealer)
        try dealer.setReceiveTimeout(milliseconds: 5_000)
        try dealer.connect(endpoint)
        var sent = 0, received = 0
        let serverBefore = ThreadTimes.of(server), clientBefore = ThreadTimes.of(getpid())
        let start = clock.now
        while received < pipelinedRequests {
            while sent < pipelinedRequests && sent - received < window {
                try dealer.send([[], frames[sent]])
                sent += 1
            }
            guard try dealer.receive() != nil else { throw ValidationError("no reply from \(endpoint)") }
            received += 1
        }
        let elapsed = clock.now - start
        let seconds = elapsed.seconds
        return Measurement(medianMicroseconds: stats.median, p99Microseconds: stats.percentile(99),
                           perSecond: Double(pipelinedRequests) / seconds,
                           serverCPU: ThreadTimes.of(server) - serverBefore, clientCPU: ThreadTimes.of(getpid()) - clientBefore)
    }
}

/// The baseline: a REP socket that sends every message back unchanged, nothing else.
struct Echo: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "A bare libzmq echo server, the latency baseline.")
    @Option(help: "Where to listen.") var endpoint: String

    func run() throws {
        let context = try ZMQContext()
        let socket = try context.socket(.rep)
        try socket.bind(endpoint)
        while true {
            guard let frames = try socket.receive() else { continue }
            try socket.send(frames)
        }
    }
}
