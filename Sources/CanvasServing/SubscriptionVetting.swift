import CanvasOperations
import CanvasService
import Synchronization
import ZeroMQ

/// The subscriptions of one XPUB socket (in manual mode) being vetted, one at a time.
///
/// libzmq applies a subscription to the subscriber whose message was read last, so one whose
/// answer is not known yet (a session held by another instance: the store is asked, on the
/// session's store lane, never on the loop) stops the use of that socket until the answer
/// comes; the loop serves everything else meanwhile. Not only its reading: libzmq also forgets
/// the last subscriber when any subscriber that subscribed goes, which it learns the next time
/// this thread uses the socket for anything (a read, a poll, a send). So the events published
/// meanwhile are held here (`publish`), and sent once the answer is applied.
struct SubscriptionVetting {
    /// The subscription whose answer is awaited, and the answer once it came (set on a lane).
    private final class Pending: Sendable {
        let topic: [UInt8]
        let client: String?
        let answer = Mutex<Bool?>(nil)
        init(topic: [UInt8], client: String?) { (self.topic, self.client) = (topic, client) }
    }

    private var pending: Pending?
    /// Events published while an answer is awaited, to send once it is applied.
    private var held: [[[UInt8]]] = []
    /// Held beyond this many, an event is dropped, as a subscriber's full queue drops them (a
    /// subscriber tells from `seq`). The store answers or fails within its timeout (500 ms).
    static let maxHeld = 10_000

    /// Whether the socket may be read (and so polled): not while an answer is awaited.
    var reading: Bool { pending == nil }

    /// Whether an awaited answer has come, for the loop to call `vet` again without the socket
    /// being readable.
    var answered: Bool { pending.map { $0.answer.withLock { $0 != nil } } ?? false }

    /// Publishes `event` on `socket` now, or holds it while an answer is awaited (see above).
    mutating func publish(_ event: [[UInt8]], on socket: ZMQSocket) throws(ZMQError) {
        guard pending != nil else {
            try socket.send(event, wait: false)
            return
        }
        if held.count < Self.maxHeld { held.append(event) }
    }

    /// Applies an answer that came (and sends the events held meanwhile), then reads the socket's subscriptions while each can be
    /// decided at once. `next` reads the next subscription (kind 1: subscribe, 0: unsubscribe;
    /// its topic; who sent it), nil when none is waiting; `check` decides one; `ask` starts the
    /// store's answer (true: the client's session) and must call the closure it is given once.
    mutating func vet(socket: ZMQSocket, next: () throws(ZMQError) -> (kind: UInt8, topic: [UInt8], client: String?)?,
                      check: (String?, [UInt8]) -> SubscriptionCheck,
                      ask: (_ session: String, _ client: String?, _ answer: @escaping @Sendable (Bool) -> Void) -> Void,
                      applied: (_ topic: [UInt8], _ client: String?, _ allowed: Bool) -> Void) throws(ZMQError) {
        if let waiting = pending {
            guard let allowed = waiting.answer.withLock({ $0 }) else { return }
            pending = nil
            if allowed { try socket.subscribe(bytes: waiting.topic) }
            applied(waiting.topic, waiting.client, allowed)
            // A send that fails is an event lost to every subscriber, as in `CanvasServer.publish`.
            for event in held { _ = try? socket.send(event, wait: false) }
            held = []
        }
        while let (kind, topic, client) = try next() {
            if kind == 0 {
                // Undoing a subscription that was never applied is harmless either way.
                try? socket.unsubscribe(bytes: topic)
                continue
            }
            switch check(client, topic) {
            case .allowed:
                try socket.subscribe(bytes: topic)
                applied(topic, client, true)
            case .refused:
                applied(topic, client, false)
            case .askStore(let session):
                let waiting = Pending(topic: topic, client: client)
                pending = waiting
                ask(session, client) { allowed in waiting.answer.withLock { $0 = allowed } }
                return
            }
        }
    }
}
