import ArgumentParser
import CanvasClient
import CanvasCore
import CanvasProtocol
import Foundation
import SessionStore
import TestSupport

/// What a shared session's changes send to Redis: canvasd with `--session-store` on a
/// redis-server of its own, a session drawn stroke by stroke from recorded handwriting. Each
/// change's bytes are Redis's own count of what it received (`total_net_input_bytes`), next to
/// the whole snapshot after that change, which is what a change sent before the log (measured
/// in the same run, from the same session: Redis holds it as a base and log, whose last entry
/// says how long the snapshot it makes is).
struct SessionStoreBench: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "session-store",
                                                    abstract: "Bytes sent to Redis per change of a shared session: deltas against whole snapshots.")

    /// 450 of the recorded words hold 98 306 points, under a drawing's 100 000 (`Limits.maxPointsPerDrawing`).
    @Option(help: "Strokes drawn, from the recorded words, over and over.") var strokes = 450

    func run() throws {
        let redis = try RedisProcess()
        let folder = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("canvasbench-store-\(UInt32.random(in: 0...UInt32.max))")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let endpoint = "ipc://\(folder.path)/requests"
        let canvasd = try Child(Sibling.path("canvasd"), ["--endpoint", endpoint, "--events", "ipc://\(folder.path)/events",
                                                          "--documents", folder.path, "--log-level", "error",
                                                          "--session-store", redis.url, "--instance", "bench"])
        defer { canvasd.stop() }
        let admin = try RedisConnection(url: RedisURL(redis.url))
        let client = try CanvasClient(endpoint: endpoint, timeoutMilliseconds: 30_000)
        var served = false
        for _ in 0..<100 where !served {
            if case .success? = try? client.call("hello") { served = true } else { usleep(50_000) }
        }
        guard served else { throw ValidationError("canvasd did not answer") }
        guard case .success(let opened) = try client.call("session.open", ["transitions": "instant"]),
              let session = opened["session"]?.stringValue else { throw ValidationError("no session opened") }
        _ = try client.call("canvas.open", session: session)

        let recorded = try RecordedHandwriting.page(copies: strokes / 24 + 1).strokes.filter { $0.tool == .pen }.prefix(strokes)
        let key = "canvas:session:\(session)"
        let info = Array("INFO".utf8), stats = Array("stats".utf8)
        func received() throws -> Int {
            let text = try admin.command([info, stats], doing: "reading Redis's counters").string ?? ""
            let line = text.split(whereSeparator: \.isNewline).first { $0.hasPrefix("total_net_input_bytes:") }
            return Int(line?.split(separator: ":").last ?? "") ?? 0
        }
        // What an INFO itself adds to the count, taken off each change's.
        let first = try received(), second = try received()
        let infoBytes = second - first
        var sent: [Int] = [], whole: [Int] = [], wholeWrites = 0
        for stroke in recorded {
            let points: [JSONValue] = stroke.points.map { .object(["x": .number($0.x), "y": .number($0.y), "pressure": .number($0.pressure ?? 0.5)]) }
            let before = try received()
            let added = try client.call("drawing.addStroke", ["tool": "pen", "color": .string(stroke.color.rawValue),
                                                              "width": .number(stroke.width), "points": .array(points)], session: session)
            if case .failure(let error) = added { throw ValidationError("stroke \(sent.count + 1) was refused: \(error)") }
            sent.append(try received() - before - infoBytes)
            // The snapshot this change made: the last log entry says, or the base is it.
            let last = try admin.command([Array("LINDEX".utf8), Array("\(key):log".utf8), Array("-1".utf8)], doing: "reading the log")
            if case .bytes(let delta) = last {
                whole.append(try SnapshotDelta.header(delta).newCount)
            } else {
                guard case .integer(let count) = try admin.command([Array("HSTRLEN".utf8), Array(key.utf8), Array("base".utf8)],
                                                                   doing: "reading the base") else { throw ValidationError("no base") }
                whole.append(Int(count))
                wholeWrites += 1
            }
        }

        let store = try SessionSnapshotStore(url: redis.url, instance: "reader", ttl: .seconds(60))
        let started = ContinuousClock.now
        let stored = try store.read(session)
        let assembled = try stored?.assembled(maxCount: 64 << 20)
        let assembly = ContinuousClock.now - started

        func column(_ figure: String, _ width: Int) -> String { String(repeating: " ", count: max(0, width - figure.count)) + figure }
        func mean(_ values: ArraySlice<Int>) -> Double { Double(values.reduce(0, +)) / Double(max(1, values.count)) }
        let tail = max(1, sent.count / 5)
        print("one shared session (canvasd --session-store), \(sent.count) recorded strokes added one by one")
        print("bytes Redis received per change      all \(sent.count)    last \(tail)")
        print("  whole snapshot (before the log)   \(column(format(mean(whole[...]), 0), 10))  \(column(format(mean(whole.suffix(tail)), 0), 10))")
        print("  delta, with whole now and then    \(column(format(mean(sent[...]), 0), 10))  \(column(format(mean(sent.suffix(tail)), 0), 10))")
        print("  whole / delta                     \(column(format(mean(whole[...]) / mean(sent[...]), 1), 10))  \(column(format(mean(whole.suffix(tail)) / mean(sent.suffix(tail)), 1), 10))")
        print("  median delta change \(sent.sorted()[sent.count / 2]) bytes; \(wholeWrites) of \(sent.count) changes written whole; "
              + "the last snapshot \(whole.last ?? 0) bytes")
        print("taking it over: a whole snapshot of \(stored?.bytes.count ?? 0) bytes and \(stored?.log.count ?? 0) log entries, "
              + "read and assembled in \(format(Double(assembly.components.attoseconds) / 1e15 + Double(assembly.components.seconds) * 1000, 1)) ms"
              + (assembled?.bytes.count == whole.last ? "" : " (NOT the last snapshot)"))
        // What making a delta costs the writer, beside encoding the session (which it did before
        // the log too): the last change's, from the snapshot before it, best of 5.
        if let stored, let assembled, !stored.log.isEmpty {
            let before = try SnapshotDelta.apply(log: Array(stored.log.dropLast()), to: stored.bytes, maxCount: 64 << 20)
            var best = Duration.seconds(1000), made = 0
            for _ in 0..<5 {
                let started = ContinuousClock.now
                made = SnapshotDelta.make(from: before, to: assembled.bytes, version: assembled.version).count
                best = min(best, ContinuousClock.now - started)
            }
            print("making the last change's delta (\(made) bytes) from the \(before.count)-byte snapshot before it: "
                  + "\(format(Double(best.components.attoseconds) / 1e15 + Double(best.components.seconds) * 1000, 2)) ms")
        }
    }
}
