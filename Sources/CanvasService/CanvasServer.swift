public import Logging
public import ZeroMQ

/// The sockets and the loop: a ROUTER for requests, a PUB for events, and the dispatcher
/// between them, all on the calling thread (a ZeroMQ socket belongs to one thread).
public final class CanvasServer {
    private let context: ZMQContext
    private let requests: ZMQSocket
    private let eventSocket: ZMQSocket
    private let dispatcher: Dispatcher
    private let configuration: ServiceConfiguration
    private let logger: Logger
    private let clock = ContinuousClock()

    /// The endpoints actually bound (a `*` port resolved).
    public let endpoint: String
    public let eventsEndpoint: String

    public init(configuration: ServiceConfiguration, logger: Logger) throws(ZMQError) {
        self.configuration = configuration
        self.logger = logger
        context = try ZMQContext()
        requests = try context.socket(.router)
        // libzmq drops a peer that sends one frame over this; requests over the limit but under
        // it get a PAYLOAD_TOO_LARGE reply instead, so the connection survives ordinary mistakes.
        try requests.setMaximumMessageSize(Int64(max(configuration.limits.maxMessageBytes * 4, 16 << 20)))
        try requests.setRouterHandover(true)
        try requests.bind(configuration.endpoint)
        eventSocket = try context.socket(.pub)
        // A subscriber that stops reading loses events past this queue; the server never waits for it.
        try eventSocket.setSendHighWaterMark(10_000)
        try eventSocket.bind(configuration.eventsEndpoint)
        endpoint = requests.lastEndpoint
        eventsEndpoint = eventSocket.lastEndpoint
        dispatcher = Dispatcher(configuration: configuration, logger: logger)
    }

    /// Serves until `shouldStop` says so; it is asked at least every `checkInterval`.
    public func run(checkInterval: Duration = .milliseconds(200), shouldStop: () -> Bool) throws(ZMQError) {
        logger.info("canvasd serving", metadata: [
            "requests": "\(endpoint)", "events": "\(eventsEndpoint)", "zmq": "\(ZMQContext.version)",
        ])
        var nextSweep = clock.now + .seconds(1)
        var timeout: Int32 = -2
        while !shouldStop() {
            var wait = checkInterval
            if let deadline = dispatcher.nextDeadline { wait = min(wait, max(.zero, deadline - clock.now)) }
            // A blocking receive with a timeout, not a poll followed by a receive: one trip into
            // libzmq per request instead of three, which is most of the gap to a bare echo.
            let milliseconds = Int32(wait.components.seconds * 1000 + wait.components.attoseconds / 1_000_000_000_000_000)
            if milliseconds != timeout {
                try requests.setReceiveTimeout(milliseconds: milliseconds)
                timeout = milliseconds
            }
            do {
                if let frames = try requests.receive(wait: milliseconds > 0) { serve(frames) }
            } catch where error.isInterrupted {
                continue   // a signal: go round and ask shouldStop
            }
            let now = clock.now
            if let deadline = dispatcher.nextDeadline, deadline <= now { publish(dispatcher.fireTimers(at: now)) }
            if now >= nextSweep {
                publish(dispatcher.expireIdle(at: now))
                nextSweep = now + .seconds(1)
            }
        }
        logger.info("canvasd stopping", metadata: ["sessions": "\(dispatcher.sessionCount)"])
    }

    private func serve(_ frames: [[UInt8]]) {
        // ROUTER prefixes the sender's identity; REQ clients add an empty delimiter, DEALER
        // clients may not. The reply goes back with the same envelope.
        guard frames.count >= 1 else { return }
        var envelope = [frames[0]]
        var body = frames.dropFirst()
        if body.count > 1 || body.first?.isEmpty == true, body.first?.isEmpty == true {
            envelope.append([])
            body = body.dropFirst()
        }
        let output = dispatcher.handle(Array(body), at: clock.now)
        // Events first: a client that has its reply can expect the events it caused to be on the way.
        publish(output.events)
        do {
            try requests.send(envelope + [output.reply], wait: false)
        } catch {
            logger.warning("reply not sent", metadata: ["error": "\(error)"])
        }
    }

    private func publish(_ events: [[[UInt8]]]) {
        for event in events {
            do {
                try eventSocket.send(event, wait: false)
            } catch {
                logger.warning("event not published", metadata: ["error": "\(error)"])
            }
        }
    }
}
