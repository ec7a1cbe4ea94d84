import ArgumentParser
import CanvasProtocol
import CanvasService
import Foundation
import Logging

/// The dispatcher's own cost per request, without sockets: `Dispatcher.handle` of a
/// `canvas.state` frame, as the latency benchmark sends it (one id, so every request after
/// the first is a retry answered from the reply cache) and with a new id each time (so the
/// state is built, and the reply cache stores and forgets).
struct DispatchBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "dispatch", abstract: "Dispatcher.handle per request, in process, no sockets.", shouldDisplay: false)

    @Option(help: "Requests timed per run.") var requests = 200_000
    @Option(help: "Runs; the figure is the median.") var rounds = 5
    @Option(help: "For the cold figure: KiB of memory written between two requests, so that each finds the caches as a request on an idle server does (0: skip it).")
    var evictKiB = 1024
    @Option(help: "Requests timed for the cold figure.") var coldRequests = 20_000

    func run() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("canvasbench-dispatch-\(getpid())")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        var configuration = ServiceConfiguration()
        configuration.documentsPath = folder.path
        let dispatcher = Dispatcher(configuration: configuration,
                                    logger: Logger(label: "canvasbench", factory: { _ in SwiftLogNoOpLogHandler() }))
        let clock = ContinuousClock()
        let envelope: [[UInt8]] = [Array("client".utf8), []]
        let open = JSONCodec.serialize(Request(id: .integer(1), method: "session.open").json)
        guard let reply = dispatcher.handle([open], envelope: envelope, at: clock.now).replies.first,
              let session = (try? JSONCodec.parse(reply.bytes))?["result"]?["session"]?.stringValue
        else { throw ValidationError("session.open failed") }

        func time(_ frame: (Int) -> [UInt8]) -> Double {
            var samples: [Double] = []
            for round in 0..<rounds {
                let frames = (0..<requests).map { [frame(round * requests + $0)] }
                let start = clock.now
                var bytes = 0
                for request in frames {
                    bytes &+= dispatcher.handle(request, envelope: envelope, at: clock.now).replies.count
                }
                let elapsed = clock.now - start
                precondition(bytes == requests, "one reply per request")
                samples.append(elapsed.microseconds * 1000 / Double(requests))
            }
            return Stats(samples).median
        }
        func stateRequest(_ id: Int64) -> [UInt8] {
            JSONCodec.serialize(Request(id: .integer(id), method: "canvas.state", session: session).json)
        }
        let same = stateRequest(7)
        let retry = time { _ in same }
        let fresh = time { stateRequest(Int64(100 + $0)) }
        print("Dispatcher.handle, canvas.state, \(requests) requests x \(rounds) rounds (median ns per request)")
        print("  same id (a retry, from the reply cache):  \(format(retry, 0))")
        print("  a new id each time (as `latency` sends):  \(format(fresh, 0))")
        guard evictKiB > 0 else { return }
        // A request on an idle server finds its code and data evicted by whatever ran in the
        // ~100 µs since the last one (the kernel, libzmq's threads, the client): that, not the
        // figures above, is what a round trip pays. Here each request comes after `evictKiB`
        // of other memory was written, and is timed alone.
        var other = [UInt8](repeating: 0, count: evictKiB * 1024)
        var cold: [Double] = []
        cold.reserveCapacity(coldRequests)
        for index in 0..<coldRequests {
            let frame = [stateRequest(Int64(1 << 40) + Int64(index))]
            other.withUnsafeMutableBytes { bytes in
                for line in stride(from: 0, to: bytes.count, by: 64) { bytes[line] &+= 1 }
            }
            let start = clock.now
            let replies = dispatcher.handle(frame, envelope: envelope, at: start).replies.count
            cold.append((clock.now - start).microseconds * 1000)
            precondition(replies == 1, "one reply per request")
        }
        let stats = Stats(cold)
        print("  a new id, caches cold (\(evictKiB) KiB written between requests; \(coldRequests) requests): median \(format(stats.median, 0)), p90 \(format(stats.percentile(90), 0))")
    }
}
