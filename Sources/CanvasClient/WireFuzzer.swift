import CanvasCore
import CanvasModel
import CanvasProtocol

/// A small, seedable generator (SplitMix64), so a fuzz run replays exactly from its seed.
public struct SeededGenerator: RandomNumberGenerator {
    private var state: UInt64
    public init(seed: UInt64) { state = seed }
    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// What a fuzz run did, and the first divergence from the model if there was one.
public struct FuzzReport: Sendable, CustomStringConvertible {
    public var seed: UInt64
    public var steps = 0
    public var sessions = 0
    public var requests = 0
    public var events = 0
    public var divergence: String?

    public var description: String {
        let summary = "seed \(seed): \(steps) steps in \(sessions) sessions, \(requests) requests, \(events) events checked"
        guard let divergence else { return summary + ", no divergence" }
        return summary + "\nDIVERGENCE: \(divergence)"
    }
}

/// Drives random toggle and drawing sequences over the wire and checks every reply, the
/// state after every step and every canvas event against `ReferenceCanvas`.
public final class WireFuzzer {
    private let client: CanvasClient
    private let events: EventSubscriber
    private var random: SeededGenerator
    private var commands: RandomCommands
    private var report: FuzzReport

    /// Under CurveZMQ a subscriber sees only its own sessions' topics, so it subscribes to
    /// each session as it opens it instead of to everything.
    private let perSessionSubscriptions: Bool

    public init(endpoint: String, eventsEndpoint: String, seed: UInt64, curve: CurveCredentials? = nil) throws {
        client = try CanvasClient(endpoint: endpoint, curve: curve)
        perSessionSubscriptions = curve != nil
        events = try EventSubscriber(endpoint: eventsEndpoint, prefix: curve == nil ? "" : "documents.", curve: curve)
        random = SeededGenerator(seed: seed)
        commands = RandomCommands(seed: seed ^ 0x5EED)
        report = FuzzReport(seed: seed)
    }

    struct Divergence: Error { let message: String }

    /// Runs `steps` commands, in sessions of up to `sessionLength` commands each.
    public func run(steps: Int, sessionLength: Int = 80) throws -> FuzzReport {
        // A new subscription takes a moment to reach the publisher; prime it with hello-driven
        // waiting rather than lose the first session's events.
        _ = try? events.next(timeoutMilliseconds: 300)
        while report.steps < steps {
            do {
                try runSession(length: min(sessionLength, steps - report.steps))
            } catch let divergence as Divergence {
                report.divergence = divergence.message
                return report
            }
        }
        return report
    }

    private func runSession(length: Int) throws {
        let pencil = commands.pencil()
        let transitions: TransitionMode = Bool.random(using: &random) ? .instant : .manual
        let initialized = Int.random(in: 0..<5, using: &random) > 0
        var model = ReferenceCanvas(pencil: pencil, transitions: transitions, initialized: initialized)
        let opened = try expectSuccess(client.call("session.open", [
            "pencil": try JSONCodec.value(of: pencil),
            "transitions": transitions == .instant ? "instant" : "manual",
            "initialized": .bool(initialized),
        ]), context: "session.open")
        guard let session = opened["session"]?.stringValue else { throw Divergence(message: "session.open gave no session") }
        if perSessionSubscriptions {
            try events.subscribe(session + ".")
            // Time for the server to apply it. What arrives meanwhile is the previous session's
            // last events (its session.closed): reading them must not cut the wait short.
            let applied = ContinuousClock.now + .milliseconds(100)
            while ContinuousClock.now < applied { _ = try events.next(timeoutMilliseconds: 10) }
        }
        report.sessions += 1
        report.requests += 1
        var seq: Int64 = 0
        var history: [String] = []
        for _ in 0..<length {
            let command = commands.next()
            history.append(command.description)
            let expected = model.predict(command)
            let (method, params) = try WireCommands.request(command)
            let reply = try client.call(method, params, session: session)
            report.requests += 1
            report.steps += 1
            func fail(_ what: String) -> Divergence {
                Divergence(message: """
                    step \(report.steps) (\(history.count) in session \(session)): \(command)
                      \(what)
                      model: \(expected)
                      commands this session: \(history)
                      replay: canvasctl fuzz --seed \(report.seed) --steps \(report.steps)
                    """)
            }
            if let problem = WireCommands.check(reply, against: expected) { throw fail(problem) }
            try checkState(session, expected, fail)
            if let problem = try checkEvents(session, expected, &seq) { throw fail(problem) }
        }
        _ = try expectSuccess(client.call("session.close", [:], session: session), context: "session.close")
        report.requests += 1
    }

    // MARK: Checks

    private func checkState(_ session: String, _ expected: Observation, _ fail: (String) -> Divergence) throws {
        let state = try expectSuccess(client.call("canvas.state", [:], session: session), context: "canvas.state")
        report.requests += 1
        guard state["state"] == .string(expected.phase.rawValue) else { throw fail("state is \(String(describing: state["state"]))") }
        guard state["hasContent"] == .bool(expected.drawing.hasContent) else { throw fail("hasContent is \(String(describing: state["hasContent"]))") }
        let tools: JSONValue = ["current": .string(expected.tools.current.rawValue), "previous": .string(expected.tools.previous.rawValue)]
        guard state["tool"] == tools else { throw fail("tool is \(String(describing: state["tool"]))") }
        guard expected.phase == .open else { return }
        let got = try expectSuccess(client.call("drawing.get", [:], session: session), context: "drawing.get")
        report.requests += 1
        let drawing = try JSONCodec.decode(Drawing.self, from: .object(got))
        guard drawing == expected.drawing else {
            throw fail("drawing has \(drawing.strokes.count) strokes, \(drawing.texts.count) texts; differs from the model's")
        }
    }

    /// Reads this step's canvas events and compares them with the model's; checks `seq` counts
    /// up by one with no gaps, across every event of the session.
    private func checkEvents(_ session: String, _ expected: Observation, _ seq: inout Int64) throws -> String? {
        var wanted: [JSONValue] = expected.stateChanges.map {
            ["event": "canvas.stateChanged", "from": .string($0.from.rawValue), "to": .string($0.to.rawValue), "cause": .string($0.cause.rawValue)]
        }
        if let result = expected.result, let cause = expected.resultCause {
            wanted.append(["event": "canvas.result", "action": .string(result.action.rawValue),
                           "hasContent": .bool(result.hasContent), "cause": .string(cause.rawValue)])
        }
        var seen: [JSONValue] = []
        let deadline = ContinuousClock.now + .seconds(2)
        while seen.count < wanted.count || ContinuousClock.now < deadline {
            // Once everything wanted is here, only peek briefly for anything extra.
            let wait: Int32 = seen.count < wanted.count ? 200 : 0
            guard let (topic, body) = try events.next(timeoutMilliseconds: wait) else {
                if seen.count >= wanted.count || ContinuousClock.now >= deadline { break }
                continue
            }
            guard topic.hasPrefix(session + ".") else { continue }
            report.events += 1
            guard let eventSeq = body["seq"]?.integerValue, eventSeq == seq + 1 else {
                return "event seq \(String(describing: body["seq"])) after \(seq)"
            }
            seq = eventSeq
            guard let name = body["event"]?.stringValue, topic == "\(session).\(name)", let data = body["data"]?.objectValue else {
                return "malformed event \(topic) \(body)"
            }
            switch name {
            case "canvas.stateChanged":
                seen.append(["event": .string(name), "from": data["from"] ?? .null, "to": data["to"] ?? .null, "cause": data["cause"] ?? .null])
            case "canvas.result":
                seen.append(["event": .string(name), "action": data["action"] ?? .null,
                             "hasContent": data["hasContent"] ?? .null, "cause": data["cause"] ?? .null])
            default:
                continue
            }
        }
        return seen == wanted ? nil : "events \(seen), expected \(wanted)"
    }

    private func expectSuccess(_ reply: Result<[String: JSONValue], ProtocolError>, context: String) throws -> [String: JSONValue] {
        switch reply {
        case .success(let result): return result
        case .failure(let error): throw Divergence(message: "\(context) failed: \(error)")
        }
    }
}
