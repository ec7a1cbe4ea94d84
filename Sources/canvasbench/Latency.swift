import ArgumentParser
import CanvasClient
import CanvasProtocol
import Foundation
import ZeroMQ

/// Round trips of a `canvas.state` request to canvasd, next to the same bytes echoed by a
/// bare libzmq server, over tcp loopback, with the same client code for both.
struct Latency: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Request round trip: canvasd against a raw libzmq echo.")

    @Option(help: "Round trips measured per server (after a warm-up).") var requests = 20_000
    @Option(help: "Requests kept in flight for the throughput run.") var window = 64
    @Option(help: "Rounds, alternating the servers; the figures are medians over rounds.") var rounds = 5

    func run() throws {
        let context = try ZMQContext()
        let echoEndpoint = try freeEndpoint(context)
        let canvasEndpoint = try freeEndpoint(context)
        let echo = try Child(Sibling.path("canvasbench"), ["echo", "--endpoint", echoEndpoint])
        let canvasd = try Child(Sibling.path("canvasd"), ["--endpoint", canvasEndpoint, "--events", try freeEndpoint(context),
                                                          "--log-level", "error", "--documents", NSTemporaryDirectory()])
        defer { echo.stop(); canvasd.stop() }

        // The request the benchmark sends: a real canvas.state on a real session.
        let client = try CanvasClient(endpoint: canvasEndpoint, timeoutMilliseconds: 5_000)
        var session: String?
        for _ in 0..<50 where session == nil {
            if case .success(let opened)? = try? client.call("session.open") {
                session = opened["session"]?.stringValue
            } else {
                usleep(100_000)
            }
        }
        guard let session else { throw ValidationError("canvasd did not start") }
        // Each request has an id of its own, as a real client's do, so canvasd runs every one
        // (a repeated id would be a retry, answered from the session's reply cache). Written
        // before the clock starts; both servers get the same bytes.
        let frames = (0..<(requests + requests / 10)).map { index in
            JSONCodec.serialize(Request(id: .integer(Int64(index + 1)), method: "canvas.state", session: session).json)
        }

        var raw: [Measurement] = [], served: [Measurement] = []
        for _ in 0..<rounds {
            raw.append(try measure(context, echoEndpoint, frames))
            served.append(try measure(context, canvasEndpoint, frames))
        }
        let rawLatency = Stats(raw.map(\.medianMicroseconds)).median
        let servedLatency = Stats(served.map(\.medianMicroseconds)).median
        let rawP99 = Stats(raw.map(\.p99Microseconds)).median
        let servedP99 = Stats(served.map(\.p99Microseconds)).median
        let rawRate = Stats(raw.map(\.perSecond)).median
        let servedRate = Stats(served.map(\.perSecond)).median
        print("request round trip, tcp loopback, \(frames[0].count)-byte canvas.state (a new id each), \(requests) requests x \(rounds) rounds")
        print("                 median µs   p99 µs   pipelined req/s (window \(window))")
        print("  raw libzmq echo  \(pad(format(rawLatency)))  \(pad(format(rawP99)))  \(format(rawRate, 0))")
        print("  canvasd          \(pad(format(servedLatency)))  \(pad(format(servedP99)))  \(format(servedRate, 0))")
        print("latency ratio canvasd / raw: \(format(servedLatency / rawLatency, 2))x (target 1.1x)")
        print("throughput ratio raw / canvasd: \(format(rawRate / servedRate, 2))x (target 2x)")
    }

    struct Measurement {
        var medianMicroseconds: Double
        var p99Microseconds: Double
        var perSecond: Double
    }

    private func pad(_ s: String) -> String { String(repeating: " ", count: max(0, 8 - s.count)) + s }

    private func freeEndpoint(_ context: ZMQContext) throws -> String {
        let probe = try context.socket(.rep)
        try probe.bind("tcp://127.0.0.1:*")
        return probe.lastEndpoint
    }

    /// One REQ round trip at a time for latency, then a DEALER with `window` in flight for throughput.
    private func measure(_ context: ZMQContext, _ endpoint: String, _ frames: [[UInt8]]) throws -> Measurement {
        let req = try context.socket(.req)
        try req.setReceiveTimeout(milliseconds: 5_000)
        try req.connect(endpoint)
        let clock = ContinuousClock()
        var samples: [Double] = []
        samples.reserveCapacity(requests)
        for index in 0..<(requests + requests / 10) {
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
        let start = clock.now
        while received < requests {
            while sent < requests && sent - received < window {
                try dealer.send([[], frames[sent]])
                sent += 1
            }
            guard try dealer.receive() != nil else { throw ValidationError("no reply from \(endpoint)") }
            received += 1
        }
        let elapsed = clock.now - start
        let seconds = elapsed.seconds
        return Measurement(medianMicroseconds: stats.median, p99Microseconds: stats.percentile(99),
                           perSecond: Double(requests) / seconds)
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
