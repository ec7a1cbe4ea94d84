import ArgumentParser
import CanvasService
import CanvasServing
import ZeroMQ

/// The latency and throughput baselines: a bare libzmq server that sends every request back.
///
/// By default a REP socket, the first baseline: REP keeps the envelope for the application and
/// answers one request at a time. With `--router`, the limit for a ROUTER server: what
/// canvasd's request socket must do for each request and no more. canvasd's context and socket
/// options, each request read with its envelope (the routing id, and the empty delimiter a REQ
/// client puts first), frames kept up to canvasd's limit, and one frame sent back behind the
/// same envelope without waiting (the request's first, as canvasd answers with one JSON frame).
struct Echo: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "A bare libzmq echo server, the benchmarks' baseline.")
    @Option(help: "Where to listen.") var endpoint: String
    @Flag(help: "A ROUTER socket handling the envelope as canvasd does, instead of REP.") var router = false

    func run() throws {
        if router { try routerEcho() }
        let context = try ZMQContext()
        let socket = try context.socket(.rep)
        try socket.bind(endpoint)
        while true {
            guard let frames = try socket.receive() else { continue }
            try socket.send(frames)
        }
    }

    private func routerEcho() throws -> Never {
        let limits = Limits()
        let context = try CanvasServer.makeContext()
        let socket = try context.socket(.router)
        try CanvasServer.prepareRequestSocket(socket, limits: limits)
        try socket.bind(endpoint)
        let maxFrames = CanvasServer.maxFrames(limits)
        while true {
            guard let message = try socket.receiveRouted(wait: true, keepingAtMost: maxFrames),
                  let request = message.body.first else { continue }
            try socket.send(envelope: message.envelope, body: request, wait: false)
        }
    }
}
