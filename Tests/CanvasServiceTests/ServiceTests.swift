import CanvasClient
import CanvasProtocol
import Foundation
import Testing
import ZeroMQ

@Suite("canvasd over real sockets", .serialized)
struct ServiceTests {
    @Test("events: topic, contiguous seq, who caused each change, the result of a pencil minimize")
    func events() throws {
        let server = try LiveServer()
        let client = try server.client()
        let session = try #require(client.call("session.open").value?["session"]?.stringValue)
        let subscriber = try subscribe(server, prefix: session + ".")
        _ = try client.call("canvas.open", session: session)
        _ = try client.call("drawing.addText", ["text": "hi", "x": 1, "y": 1, "fontSize": 12, "color": "red"], session: session)
        let tap = try client.call("pencil.doubleTap", session: session).value
        #expect(tap?["outcome"] == "minimized")
        var received: [(String, JSONValue)] = []
        while let event = try subscriber.next(timeoutMilliseconds: 500) { received.append(event) }
        let names = received.map(\.0)
        #expect(names == ["\(session).canvas.stateChanged", "\(session).canvas.stateChanged", "\(session).canvas.result", "\(session).pencil.doubleTap"])
        #expect(received.map { $0.1["seq"] } == [1, 2, 3, 4])
        #expect(received.allSatisfy { $0.1["session"] == .string(session) })
        #expect(received[0].1["data"] == ["from": "closed", "to": "open", "state": "open", "cause": "client"])
        #expect(received[1].1["data"] == ["from": "open", "to": "minimized", "state": "minimized", "cause": "pencil"])
        #expect(received[2].1["data"] == ["action": "minimized", "hasContent": true, "cause": "pencil"])
        let state = try client.call("canvas.state", session: session).value
        #expect(state?["seq"] == 4)
    }

    @Test("timed transitions finish by themselves, and say the timer did it")
    func timedTransitions() throws {
        let server = try LiveServer()
        let client = try server.client()
        let session = try #require(client.call("session.open", ["transitions": ["ms": 80]]).value?["session"]?.stringValue)
        let subscriber = try subscribe(server, prefix: session + ".canvas.stateChanged")
        #expect(try client.call("pencil.doubleTap", session: session).value?["state"] == "opening")
        #expect(try client.call("pencil.doubleTap", session: session).value?["reason"] == "transition")
        let first = try #require(try subscriber.next(timeoutMilliseconds: 1_000))
        #expect(first.body["data"]?["to"] == "opening")
        let second = try #require(try subscriber.next(timeoutMilliseconds: 1_000), "the timer never finished the transition")
        #expect(second.body["data"] == ["from": "opening", "to": "open", "state": "open", "cause": "timer"])
        #expect(try client.call("canvas.state", session: session).value?["state"] == "open")
    }

    @Test("an idle session expires, with an event")
    func idleExpiry() throws {
        let server = try LiveServer(arguments: ["--idle-timeout", "1"])
        let client = try server.client()
        let session = try #require(client.call("session.open").value?["session"]?.stringValue)
        let subscriber = try subscribe(server, prefix: session + ".")
        let expired = try #require(try subscriber.next(timeoutMilliseconds: 4_000), "no session.expired event")
        #expect(expired.topic == "\(session).session.expired")
        #expect(try client.call("canvas.state", session: session).error?.code == .unknownSession)
    }

    @Test("garbage from one client does not disturb another's session")
    func garbageIsolation() throws {
        let server = try LiveServer()
        let client = try server.client()
        let session = try #require(client.call("session.open").value?["session"]?.stringValue)
        _ = try client.call("canvas.open", session: session)
        let vandal = try server.client()
        let garbage: [[[UInt8]]] = [
            [[0xFF, 0xFE, 0x00]], [Array("[]".utf8)], [Array("{\"id\":[],\"method\":{}}".utf8)], [[]],
            [Array("{\"id\":1,\"method\":\"canvas.open\",\"session\":\"\(session)x\"}".utf8)],
            [Array("null".utf8), [1, 2, 3], []], [Array(repeating: 0x7B, count: 100_000)],
        ]
        for frames in garbage {
            let reply = try vandal.exchange(frames)
            #expect(reply["error"]?["code"] != nil, "garbage \(frames.map(\.count)) got \(reply)")
        }
        let stroke: [String: JSONValue] = ["tool": "pen", "color": "black", "width": 2, "points": [["x": 1, "y": 1]]]
        #expect(try client.call("drawing.addStroke", stroke, session: session).value?["strokes"] == 1)
        #expect(try client.call("canvas.state", session: session).value?["state"] == "open")
    }

    @Test("a REQ client and a DEALER client with an empty delimiter both get replies")
    func socketKinds() throws {
        let server = try LiveServer()
        let context = try ZMQContext()
        let req = try context.socket(.req)
        try req.setReceiveTimeout(milliseconds: 3_000)
        try req.connect(server.endpoint)
        try req.send([Array("{\"id\":\"r\",\"method\":\"hello\"}".utf8)])
        let reqReply = try #require(try req.receive())
        #expect(try JSONCodec.parse(reqReply[0])["id"] == "r")
        let dealer = try context.socket(.dealer)
        try dealer.setReceiveTimeout(milliseconds: 3_000)
        try dealer.connect(server.endpoint)
        try dealer.send([[], Array("{\"id\":\"d\",\"method\":\"hello\"}".utf8)])
        let dealerReply = try #require(try dealer.receive())
        #expect(dealerReply.count == 2 && dealerReply[0].isEmpty)
        #expect(try JSONCodec.parse(dealerReply[1])["id"] == "d")
    }

    @Test("a DEALER without a delimiter is answered without one, and clients sending in turn each get their own replies")
    func envelopes() throws {
        let server = try LiveServer()
        let context = try ZMQContext()
        var dealers: [ZMQSocket] = []
        for _ in 0..<3 {
            let dealer = try context.socket(.dealer)
            try dealer.setReceiveTimeout(milliseconds: 3_000)
            try dealer.connect(server.endpoint)
            dealers.append(dealer)
        }
        // The loop reuses the routing id while it repeats: ids that alternate, repeat and
        // come back must each still route the reply to its own client.
        for (step, index) in [0, 1, 1, 2, 0, 0, 2, 1].enumerated() {
            let request = Array("{\"id\":\(step),\"method\":\"hello\"}".utf8)
            try dealers[index].send(index == 2 ? [request] : [[], request])
            let reply = try #require(try dealers[index].receive())
            #expect(reply.count == (index == 2 ? 1 : 2))
            #expect(try JSONCodec.parse(reply.last!)["id"] == .integer(Int64(step)))
        }
        // A pipelined burst from two clients at once: every reply to the client that asked.
        for step in 0..<40 { try dealers[step % 2].send([[], Array("{\"id\":\(step),\"method\":\"hello\"}".utf8)]) }
        for index in 0..<2 {
            for step in stride(from: index, to: 40, by: 2) {
                let reply = try #require(try dealers[index].receive())
                #expect(try JSONCodec.parse(reply[1])["id"] == .integer(Int64(step)))
            }
        }
    }

    @Test("tcp loopback serves too")
    func tcpLoopback() throws {
        let probe = try ZMQContext().socket(.rep)
        try probe.bind("tcp://127.0.0.1:*")
        let endpoint = probe.lastEndpoint
        _ = consume probe
        let server = try LiveServer(endpoint: endpoint)
        #expect(try server.client().call("hello").value?["protocol"] == "canvas/1.9")
    }

    @Test("SIGTERM stops canvasd cleanly")
    func cleanShutdown() throws {
        let server = try LiveServer()
        #expect(server.stop() == 0)
        #expect(server.logText.contains("canvasd stopped"))
    }

    @Test("2,000 random wire steps agree with the model")
    func wireFuzz() throws {
        let server = try LiveServer(arguments: ["--log-level", "error"])
        let seed = UInt64.random(in: 0...UInt64(UInt32.max))
        let report = try WireFuzzer(endpoint: server.endpoint, eventsEndpoint: server.events, seed: seed).run(steps: 2_000)
        print("wire fuzz: \(report)")
        #expect(report.divergence == nil, "\(report)")
        #expect(report.steps == 2_000)
    }
}
