import ArgumentParser
import CanvasClient
import CanvasProtocol
import Foundation
import ZeroMQ

/// Round trips of a `canvas.state` request to canvasd, next to the same bytes echoed by two
/// bare libzmq servers, over tcp loopback, with the same client code for all: a REP echo (the
/// latency baseline) and a ROUTER echo that handles the envelope as canvasd must (the limit
/// for a ROUTER server, the throughput baseline).
struct Latency: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Request round trip: canvasd against raw libzmq echoes.")

    @Option(help: "Round trips measured per server and round (after a warm-up).") var requests = 10_000
    @Option(help: "Requests kept in flight for the throughput run.") var window = 64
    @Option(help: "Requests per server and round in the throughput run.") var pipelinedRequests = 50_000
    @Option(help: "Rounds, rotating the servers' order; the figures are medians over rounds.") var rounds = 9
    @Flag(help: "Skip the one-at-a-time round trips, to profile the pipelined run alone.") var pipelinedOnly = false
    @Option(help: ArgumentHelp("Another canvasd binary, timed beside this one (and the echoes) in the same rounds.",
                               discussion: "For changes worth a few percent, which this machine's swings hide between runs."))
    var against: String?

    /// One server under test and what it is sent.
    struct Server {
        var label: String
        var endpoint: String
        var frames: [[UInt8]]
        var child: Child
    }

    func run() throws {
        let context = try ZMQContext()
        let repEndpoint = try freeEndpoint(context), routerEndpoint = try freeEndpoint(context)
        let canvasEndpoint = try freeEndpoint(context)
        let rep = try Child(Sibling.path("canvasbench"), ["echo", "--endpoint", repEndpoint])
        let router = try Child(Sibling.path("canvasbench"), ["echo", "--router", "--endpoint", routerEndpoint])
        let canvasd = try Child(Sibling.path("canvasd"), ["--endpoint", canvasEndpoint, "--events", try freeEndpoint(context),
                                                          "--log-level", "error", "--documents", NSTemporaryDirectory()])
        var other: Child?
        defer { rep.stop(); router.stop(); canvasd.stop(); other?.stop() }
        let frames = try requestFrames(canvasEndpoint)
        var servers = [Server(label: "REP echo", endpoint: repEndpoint, frames: frames, child: rep),
                       Server(label: "ROUTER echo", endpoint: routerEndpoint, frames: frames, child: router),
                       Server(label: "canvasd", endpoint: canvasEndpoint, frames: frames, child: canvasd)]
        if let against {
            let endpoint = try freeEndpoint(context)
            let child = try Child(against, ["--endpoint", endpoint, "--events", try freeEndpoint(context),
                                            "--log-level", "error", "--documents", NSTemporaryDirectory()])
            other = child
            servers.append(Server(label: "other canvasd", endpoint: endpoint, frames: try requestFrames(endpoint), child: child))
        }

        // Each round measures every server once, in an order rotated (and reversed every other
        // round) from the last, so that a slow spell of the machine (two cores shared by four
        // busy threads, on a virtual machine) falls on all alike; ratios are taken per round,
        // then their median, so one bad round moves it less than it moves the ratio of two medians.
        var runs = [[Measurement]](repeating: [], count: servers.count)
        for round in 0..<rounds {
            let shift = (round / 2) % servers.count
            var order: [Int] = Array(servers.indices.dropFirst(shift)) + Array(servers.indices.prefix(shift))
            if round % 2 == 1 { order.reverse() }
            for index in order {
                let server = servers[index]
                runs[index].append(try measure(context, server.endpoint, server.frames, server: server.child.process.processIdentifier))
            }
        }
        let (repRuns, routerRuns, served) = (runs[0], runs[1], runs[2])
        print("request round trip, tcp loopback, \(frames[0].count)-byte canvas.state (a new id each), "
              + "\(pipelinedOnly ? 0 : requests) requests x \(rounds) rounds; pipelined: \(pipelinedRequests) requests, window \(window)")
        print("                      median µs   p99 µs   pipelined req/s (min-max over rounds)")
        for (server, measurements) in zip(servers, runs) {
            let rates = Stats(measurements.map(\.perSecond))
            let latency = pad(format(Stats(measurements.map(\.medianMicroseconds)).median))
            let p99 = pad(format(Stats(measurements.map(\.p99Microseconds)).median))
            let spread = "\(format(rates.sorted.first ?? .nan, 0))-\(format(rates.sorted.last ?? .nan, 0))"
            let label = server.label.padding(toLength: 18, withPad: " ", startingAt: 0)
            print("  \(label)\(latency)  \(p99)  \(format(rates.median, 0)) (\(spread))")
        }
        /// Per round, `a`'s figure over `b`'s: each round's, then their median and spread.
        func ratios(_ a: [Measurement], _ b: [Measurement], _ figure: (Measurement) -> Double) -> (line: String, median: String) {
            let values = zip(a, b).map { figure($0) / figure($1) }
            let stats = Stats(values)
            return (values.map { format($0, 2) }.joined(separator: " "),
                    "\(format(stats.median, 2))x (median of \(values.count) rounds, \(format(stats.sorted.first ?? .nan, 2))-\(format(stats.sorted.last ?? .nan, 2)))")
        }
        if !pipelinedOnly {
            let latency = ratios(served, repRuns, \.medianMicroseconds)
            print("per round, canvasd / REP echo, round trip: \(latency.line)")
            print("round trip, canvasd / REP echo: \(latency.median); target at most 1.1x")
            print("round trip, ROUTER echo / REP echo: \(ratios(routerRuns, repRuns, \.medianMicroseconds).median)")
        }
        let overRouter = ratios(served, routerRuns, \.perSecond), overREP = ratios(served, repRuns, \.perSecond)
        print("per round, canvasd / ROUTER echo, pipelined throughput: \(overRouter.line)")
        print("pipelined throughput, canvasd / ROUTER echo: \(overRouter.median); target at least 0.8x")
        print("pipelined throughput, canvasd / REP echo: \(overREP.median)")
        print("pipelined throughput, ROUTER echo / REP echo: \(ratios(routerRuns, repRuns, \.perSecond).median)")
        if servers.count > 3 {
            let otherRuns = runs[3]
            if !pipelinedOnly {
                print("round trip, other canvasd / REP echo: \(ratios(otherRuns, repRuns, \.medianMicroseconds).median); "
                      + "this / other: \(ratios(served, otherRuns, \.medianMicroseconds).median)")
            }
            print("pipelined throughput, other canvasd / ROUTER echo: \(ratios(otherRuns, routerRuns, \.perSecond).median); "
                  + "this / other: \(ratios(served, otherRuns, \.perSecond).median)")
        }
        // Where the pipelined run's CPU went, per request and thread, over all rounds: on two
        // cores every thread's time is taken from the others, so this is what the ratio costs.
        print("CPU per pipelined request, µs by thread (user + system, from /proc):")
        for (server, measurements) in zip(servers, runs) {
            let serverCPU = measurements.map(\.serverCPU).reduce(ThreadTimes(), +)
            let client = measurements.map(\.clientCPU).reduce(ThreadTimes(), +)
            let describe = { (times: ThreadTimes) in
                times.microsecondsByName.sorted { $0.value > $1.value }.filter { $0.value > 0 }
                    .map { "\($0.key) \(format($0.value / Double(self.pipelinedRequests * self.rounds), 2))" }.joined(separator: ", ")
            }
            print("  \(server.label): server \(describe(serverCPU)); client \(describe(client))")
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
