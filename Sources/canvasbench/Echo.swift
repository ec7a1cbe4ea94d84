import ArgumentParser
import CanvasService
import ZeroMQ

/// The first baseline: a REP socket that sends every message back unchanged, nothing else.
/// REP keeps the envelope for the application and answers one request at a time.
struct Echo: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "A bare libzmq REP echo server, the latency baseline.")
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

/// The second baseline, the limit for a ROUTER server: what canvasd's request socket must do
/// for each request and no more. canvasd's context and socket options, each request read with
/// its envelope (the routing id, and the empty delimiter a REQ client puts first), frames kept
/// up to canvasd's limit, and one frame sent back behind the same envelope without waiting
/// (the request's first, as canvasd answers with one JSON frame).
struct RouterEcho: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "router-echo",
                                                    abstract: "A bare libzmq ROUTER echo server, handling the envelope as canvasd does.")
    @Option(help: "Where to listen.") var endpoint: String

    func run() throws {
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
