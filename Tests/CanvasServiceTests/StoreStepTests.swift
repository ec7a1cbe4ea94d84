import CanvasCore
import CanvasProtocol
@testable import CanvasService
import Testing

/// The request life with a session store, as its machine says it (`StoreStep.settle`), without
/// sockets or Redis: every step against every answer the store can give.
@Suite("store steps")
struct StoreStepTests {
    static let session = ServiceSession(id: "s", owner: nil, canvas: CanvasSession(pencil: PencilConfiguration(), transitions: .instant),
                                        transitions: .instant, size: nil, resultImages: false, lastActive: .now,
                                        replies: ReplyCache(capacity: 1))
    static let failure = ProtocolError(.unavailable, "no store", data: ["reason": "sessionStore"])

    static let steps: [StoreStep] = [
        .create(reply: [1]), .takeOver, .fence(.request(.documentFlatten)), .fence(.save(.empty)), .persist(reply: [2]), .persist(reply: nil),
        .confirm(reply: [3]), .close(reply: [4]), .expire,
    ]

    /// The answers a step can get: a take-over finds a session or none; the rest keep or lose.
    static func answers(_ step: StoreStep) -> [StoreAnswer] {
        if case .takeOver = step { return [.tookOver(session, answered: nil), .none, .failed(failure)] }
        return [.kept(version: 7), .lost, .failed(failure)]
    }

    static func hasRequest(_ step: StoreStep) -> Bool {
        switch step {
        case .persist(nil), .expire: return false
        default: return true
        }
    }

    @Test("every step, every answer: the session is given back once, and a request answered once or sent on")
    func everyPathSettlesOnce() {
        for step in Self.steps {
            for answer in Self.answers(step) {
                for retaking in [false, true] {
                    let actions = step.settle(answer, retaking: retaking)
                    let ends = actions.filter {
                        switch $0 {
                        case .resume, .close, .drop, .forget, .adopt, .goOn: return true
                        default: return false
                        }
                    }
                    #expect(ends.count == 1, "\(step) \(answer): \(actions)")
                    let answers = actions.filter {
                        switch $0 {
                        case .reply, .refuse, .goOn, .retake, .adopt: return true
                        default: return false
                        }
                    }
                    #expect(answers.count == (Self.hasRequest(step) ? 1 : 0), "\(step) \(answer): \(actions)")
                    // Events go out only with a change the store kept.
                    if actions.contains(.publish) {
                        guard case .kept = answer else {
                            Issue.record("published on \(answer)")
                            continue
                        }
                    }
                }
            }
        }
    }

    @Test("a stale copy is dropped and its request answered on the session as stored, once; a document method's fence keeps the copy when the store is away")
    func staleCopies() {
        #expect(StoreStep.persist(reply: [1]).settle(.lost, retaking: false) == [.drop, .retake])
        #expect(StoreStep.persist(reply: [1]).settle(.lost, retaking: true) == [.drop, .refuse(.moved)])
        #expect(StoreStep.fence(.save(.empty)).settle(.lost, retaking: false) == [.drop, .retake])
        #expect(StoreStep.fence(.save(.empty)).settle(.kept(version: 3), retaking: false) == [.keep(version: 3), .goOn(.save(.empty))])
        #expect(StoreStep.fence(.request(.documentFlatten)).settle(.failed(Self.failure), retaking: false)
                == [.refuse(.store(Self.failure)), .resume])
        // A submit's canvas is saving when its fence fails: that copy goes, as one with a change.
        #expect(StoreStep.fence(.save(.empty)).settle(.failed(Self.failure), retaking: false) == [.drop, .refuse(.store(Self.failure))])
        #expect(StoreStep.persist(reply: [1]).settle(.failed(Self.failure), retaking: false) == [.drop, .refuse(.store(Self.failure))])
        #expect(StoreStep.persist(reply: [1]).settle(.kept(version: 9), retaking: false) == [.keep(version: 9), .publish, .reply, .resume])
        // A timer's transition or an expiry on a copy another instance moved on from: let go.
        #expect(StoreStep.persist(reply: nil).settle(.lost, retaking: false) == [.drop])
        #expect(StoreStep.expire.settle(.lost, retaking: false) == [.drop])
        #expect(StoreStep.takeOver.settle(.none, retaking: false) == [.forget, .refuse(.unknownSession)])
        #expect(StoreStep.close(reply: [4]).settle(.kept(version: 2), retaking: false)
                == [.keep(version: 2), .publish, .reply, .close(event: "session.closed")])
    }

    @Test("a session the store let go already (its key expired or evicted) still expires or closes here, announced")
    func goneFromTheStore() {
        // Before, an expiry whose removal found no key was settled as one another instance had
        // moved on from: dropped, with no session.expired and nothing logged.
        #expect(StoreStep.expire.settle(.none, retaking: false) == [.close(event: "session.expired")])
        #expect(StoreStep.close(reply: [4]).settle(.none, retaking: false) == [.publish, .reply, .close(event: "session.closed")])
    }
}
