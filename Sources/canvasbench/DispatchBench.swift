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
        let same = JSONCodec.serialize(Request(id: .integer(7), method: "canvas.state", session: session).json)
        let retry = time { _ in same }
        let fresh = time { JSONCodec.serialize(Request(id: .integer(Int64(100 + $0)), method: "canvas.state", session: session).json) }
        print("Dispatcher.handle, canvas.state, \(requests) requests x \(rounds) rounds (median ns per request)")
        print("  same id (a retry, from the reply cache):  \(format(retry, 0))")
        print("  a new id each time (as `latency` sends):  \(format(fresh, 0))")
    }
}
