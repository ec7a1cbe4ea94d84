import ArgumentParser
import CanvasClient
import CanvasCore
import CanvasProtocol
import Foundation
import TestSupport

/// What a stroke costs canvasd on its own (no session store): `drawing.addStroke` with 2, 50 and
/// 200 points of recorded handwriting, against `canvas.state` from the same client in the same
/// rounds. Each round adds the strokes to a fresh session (so the drawing stays small) and
/// alternates the requests; the figures are medians.
struct StrokeCostBench: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "stroke-cost",
                                                    abstract: "drawing.addStroke by its points, against canvas.state, without a session store.")

    @Option(help: "Rounds; each adds one stroke of each size and asks the state as often.") var rounds = 400

    func run() throws {
        let folder = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("canvasbench-strokes-\(UInt32.random(in: 0...UInt32.max))")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let endpoint = "ipc://\(folder.path)/requests"
        let canvasd = try Child(Sibling.path("canvasd"), ["--endpoint", endpoint, "--events", "ipc://\(folder.path)/events",
                                                          "--documents", folder.path, "--log-level", "error"])
        defer { canvasd.stop() }
        let client = try CanvasClient(endpoint: endpoint, timeoutMilliseconds: 30_000)
        try waitUntilServing(client)

        // Recorded strokes of at least 200 points, cut to each size: a pen's real samples.
        let long = try RecordedHandwriting.page(copies: 4).strokes.filter { $0.points.count >= 200 }
        guard !long.isEmpty else { throw ValidationError("no recorded stroke of 200 points") }
        let sizes = [2, 50, 200]
        func params(_ stroke: Stroke, _ count: Int) throws -> [String: JSONValue] {
            let cut = try Stroke(tool: .pen, color: stroke.color, width: stroke.width, points: Array(stroke.points.prefix(count)))
            return try JSONCodec.value(of: cut).objectValue ?? [:]
        }
        var times = [String: [Double]]()
        var session = ""
        var id: Int64 = 0
        func timed(_ label: String, _ method: String, _ params: [String: JSONValue]) throws {
            id += 1
            let frame = JSONCodec.serialize(Request(id: .integer(id), method: method, params: params, session: session).json)
            let started = ContinuousClock.now
            let reply = try client.exchange([frame], method: method)
            let took = ContinuousClock.now - started
            guard reply["error"] == nil else { throw ValidationError("\(method) refused: \(reply)") }
            times[label, default: []].append(Double(took.components.seconds) * 1e6 + Double(took.components.attoseconds) / 1e12)
        }
        for round in 0..<rounds {
            if round % 50 == 0 {
                guard case .success(let opened) = try client.call("session.open", ["transitions": "instant"]),
                      let fresh = opened["session"]?.stringValue else { throw ValidationError("no session opened") }
                session = fresh
                _ = try client.call("canvas.open", session: session)
            }
            let stroke = long[round % long.count]
            for size in sizes {
                try timed("canvas.state", "canvas.state", [:])
                try timed("\(size) points", "drawing.addStroke", try params(stroke, size))
            }
        }
        func median(_ label: String) -> Double { let sorted = times[label]!.sorted(); return sorted[sorted.count / 2] }
        let state = median("canvas.state")
        print("one canvasd, no session store, \(rounds) rounds: round trips (medians)")
        print("  canvas.state                     \(format(state, 0)) µs")
        for size in sizes {
            let label = "\(size) points"
            print("  drawing.addStroke, \(String(size).padding(toLength: 3, withPad: " ", startingAt: 0)) points    \(format(median(label), 0)) µs   "
                  + "\(format(median(label) / state, 2))x canvas.state" + (size == 200 ? " (target 2x)" : ""))
        }
    }
}
