import ArgumentParser
import CanvasClient
import CanvasCore
import CanvasProtocol
import DocumentStore
import Foundation
import InkRendering
import SessionStore
import TestSupport

/// What a shared session's changes cost in Redis: canvasd with `--session-store` on a
/// redis-server of its own, a session drawn stroke by stroke from recorded handwriting. For each
/// change: what Redis keeps of it (its log entry and its answered-request record), set against
/// the stroke's own compact encoding (`InkSource`, what a page's stored drawing costs); what Redis
/// received for it on the wire (`total_net_input_bytes`, the script's call included); the folds
/// of the log into whole snapshots, spread over the changes; the round trip of a stroke near the
/// start and near the end; and a second canvasd taking the session over, back and forth.
struct SessionStoreBench: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "session-store",
                                                    abstract: "What a change to a shared session costs in Redis, and a take-over of it.")

    /// 450 of the recorded words hold 98 306 points, under a drawing's 100 000 (`Limits.maxPointsPerDrawing`).
    @Option(help: "Strokes drawn, from the recorded words, over and over.") var strokes = 450

    func run() throws {
        let redis = try RedisProcess()
        let folder = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("canvasbench-store-\(UInt32.random(in: 0...UInt32.max))")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        func start(_ name: String) throws -> (Child, CanvasClient) {
            let endpoint = "ipc://\(folder.path)/requests-\(name)"
            let canvasd = try Child(Sibling.path("canvasd"), ["--endpoint", endpoint, "--events", "ipc://\(folder.path)/events-\(name)",
                                                              "--documents", folder.path, "--log-level", "error",
                                                              "--session-store", redis.url, "--instance", name])
            let client = try CanvasClient(endpoint: endpoint, timeoutMilliseconds: 30_000)
            try waitUntilServing(client, name: "canvasd \(name)")
            return (canvasd, client)
        }
        let (canvasd, client) = try start("bench")
        defer { canvasd.stop() }
        let admin = try RedisConnection(url: RedisURL(redis.url))
        guard case .success(let opened) = try client.call("session.open", ["transitions": "instant"]),
              let session = opened["session"]?.stringValue else { throw ValidationError("no session opened") }
        _ = try client.call("canvas.open", session: session)

        let recorded = try RecordedHandwriting.page(copies: strokes / 24 + 1).strokes.filter { $0.tool == .pen }.prefix(strokes)
        let key = "canvas:session:{\(session)}"
        let info = Array("INFO".utf8), stats = Array("stats".utf8)
        func received() throws -> Int {
            let text = try admin.command([info, stats], doing: "reading Redis's counters").string ?? ""
            let line = text.split(whereSeparator: \.isNewline).first { $0.hasPrefix("total_net_input_bytes:") }
            return Int(line?.split(separator: ":").last ?? "") ?? 0
        }
        func base() throws -> (version: String, bytes: Int) {
            let reply = try admin.command(["HGET", key, "baseVersion"], doing: "reading the base's version").string ?? ""
            guard case .integer(let count) = try admin.command(["HSTRLEN", key, "base"], doing: "reading the base") else { return (reply, 0) }
            return (reply, Int(count))
        }
        // What an INFO itself adds to the count, taken off each change's.
        let first = try received(), second = try received()
        let infoBytes = second - first
        var kept: [Int] = [], own: [Int] = [], wire: [Int] = [], times: [Duration] = []
        var folds = 0, foldBytes = 0, whole = 0, lastBase = try base()
        for (index, stroke) in recorded.enumerated() {
            let sent = try Stroke(tool: stroke.tool, color: stroke.color, width: stroke.width,
                                  points: try stroke.points.map { try InkPoint(x: $0.x, y: $0.y, pressure: $0.pressure ?? 0.5) })
            let id = RequestID.integer(Int64(1000 + index))
            let before = try received()
            let started = ContinuousClock.now
            let request = Request(id: id, method: "drawing.addStroke", params: try JSONCodec.value(of: sent).objectValue ?? [:], session: session)
            let added = try client.exchange([JSONCodec.serialize(request.json)], method: "drawing.addStroke")
            times.append(ContinuousClock.now - started)
            guard added["error"] == nil else { throw ValidationError("stroke \(index + 1) was refused: \(added)") }
            wire.append(try received() - before - infoBytes)
            // What Redis keeps of it: the log's last entry, and the request's record.
            let entry = try admin.command(["LINDEX", "\(key):log", "-1"], doing: "reading the log")
            let answeredKey = String(DocumentStore.sha256(JSONCodec.serialize(id.json)).prefix(32))
            let record = try admin.command(["HSTRLEN", "\(key):answered", answeredKey], doing: "reading the record")
            guard case .bytes(let logged) = entry, OperationEntry.isEntry(logged), case .integer(let recordBytes) = record else {
                whole += 1
                continue
            }
            kept.append(logged.count + Int(recordBytes) + answeredKey.utf8.count)
            own.append(InkSource.encode(Drawing(strokes: [sent])).count)
            usleep(2_000)   // the lane's fold, if this change made one due, lands before the base is read
            let now = try base()
            if now.version != lastBase.version {
                folds += 1
                foldBytes += now.bytes
            }
            lastBase = now
        }

        func column(_ figure: String, _ width: Int) -> String { String(repeating: " ", count: max(0, width - figure.count)) + figure }
        guard !kept.isEmpty else { throw ValidationError("no change was written as operations: nothing to measure") }
        func median(_ values: [Int]) -> Int { values.sorted()[values.count / 2] }
        func milliseconds(_ duration: Duration) -> Double { Double(duration.components.seconds) * 1000 + Double(duration.components.attoseconds) / 1e15 }
        let within = zip(kept, own).filter { $0.0 <= 2 * $0.1 + 100 }.count
        let ratios = zip(kept, own).map { Double($0.0) / Double($0.1) }.sorted()
        print("one shared session (canvasd --session-store), \(recorded.count) recorded pen strokes added one by one "
              + "(\(recorded.reduce(0) { $0 + $1.points.count }) points)")
        print("bytes per change                                   median      mean")
        print("  the stroke's own compact encoding (InkSource)  \(column(String(median(own)), 8))  \(column(format(Double(own.reduce(0, +)) / Double(max(1, own.count))), 8))")
        print("  kept by Redis: log entry + answered record      \(column(String(median(kept)), 8))  \(column(format(Double(kept.reduce(0, +)) / Double(max(1, kept.count))), 8))")
        print("  received by Redis (the script's call included) \(column(String(median(wire)), 8))  \(column(format(Double(wire.reduce(0, +)) / Double(max(1, wire.count))), 8))")
        print("  folds: \(folds), \(foldBytes) bytes, \(format(Double(foldBytes) / Double(max(1, kept.count)), 0)) a change spread over all; "
              + "\(whole) changes written whole")
        print("  kept / own: median \(format(ratios[ratios.count / 2], 2))x, p90 \(format(ratios[ratios.count * 9 / 10], 2))x; "
              + "\(within) of \(kept.count) within 2x own + 100 bytes (target)")
        let early = times.prefix(25).dropFirst(5).sorted(), late = times.suffix(20).sorted()
        print("one more stroke's round trip: \(format(milliseconds(early[early.count / 2]), 3)) ms at strokes 6-25, "
              + "\(format(milliseconds(late[late.count / 2]), 3)) ms at the last 20: \(format(milliseconds(late[late.count / 2]) / milliseconds(early[early.count / 2]), 2))x (medians; target 1.2x)")

        // Another instance takes it over, and back, and again: each is a take-over of the whole
        // session (its base and log read, the log replayed). The time is the first request's on
        // the instance taking over, less a request on a session it holds.
        let (other, toOther) = try start("other")
        defer { other.stop() }
        var takeovers: [Double] = [], held: [Double] = []
        for round in 0..<(ProcessInfo.processInfo.environment["TAKEOVER_ROUNDS"].flatMap(Int.init) ?? 40) {
            let client = round % 2 == 0 ? toOther : client
            for attempt in 0..<2 {
                let started = ContinuousClock.now
                guard case .success = try client.call("canvas.state", session: session) else { throw ValidationError("canvas.state refused") }
                (attempt == 0 ? { takeovers.append(milliseconds(ContinuousClock.now - started)) } : { held.append(milliseconds(ContinuousClock.now - started)) })()
            }
        }
        let stored = try SessionSnapshotStore(url: redis.url, instance: "reader", ttl: .seconds(60)).read(session)
        takeovers.sort()
        held.sort()
        print("taking it over (\(stored?.bytes.count ?? 0)-byte base, \(stored?.log.count ?? 0) log entries): "
              + "\(format(takeovers[takeovers.count / 2] - held[held.count / 2], 1)) ms more than a request on a session held "
              + "(median of \(takeovers.count); \(format(held[held.count / 2], 2)) ms that request; target 10 ms)")
    }
}
