@testable import CanvasService
@testable import CanvasServing
import Foundation
import Synchronization
import Testing
import ZeroMQ

/// Subscriptions vetted over a real XPUB in manual mode, with the store's answer given by the
/// test: one awaited holds the socket untouched, so that it is applied to its own subscriber.
@Suite("subscriptions vetted while the store is asked")
struct SubscriptionVettingTests {
    final class Asked: @unchecked Sendable {
        // @unchecked: set and read on the test's thread only.
        var answer: (@Sendable (Bool) -> Void)?
    }

    /// Reads and vets what is waiting on `xpub`: "S." is the store's to answer, anything else allowed.
    static func vet(_ vetting: inout SubscriptionVetting, _ xpub: ZMQSocket, _ asked: Asked) throws {
        try vetting.vet(socket: xpub, next: { () throws(ZMQError) in
            guard let frames = try xpub.receive(wait: false), let frame = frames.first, let kind = frame.first else { return nil }
            return (kind, Array(frame.dropFirst()), nil)
        }, check: { _, topic in topic == Array("S.".utf8) ? .askStore(session: "S") : .allowed },
           ask: { _, _, answer in asked.answer = answer },
           applied: { _, _, _ in })
    }

    @Test("a subscriber that leaves while another's answer is awaited does not take that subscription with it")
    func anotherSubscriberLeaving() throws {
        let context = try ZMQContext()
        let xpub = try context.socket(.xpub)
        try xpub.setManualSubscriptions(true)
        try xpub.bind("tcp://127.0.0.1:*")
        let endpoint = xpub.lastEndpoint
        var vetting = SubscriptionVetting()
        let asked = Asked()

        // B subscribes to something allowed at once.
        var leaving: ZMQSocket? = try context.socket(.sub)
        try leaving!.connect(endpoint)
        try leaving!.subscribe("documents.")
        let a = try context.socket(.sub)
        try a.setReceiveTimeout(milliseconds: 2_000)
        try a.connect(endpoint)
        // A's subscription is the store's to answer: the socket is left alone until it comes.
        try a.subscribe("S.")
        var waited = 0
        while vetting.reading && waited < 200 {
            try Self.vet(&vetting, xpub, asked)
            usleep(10_000)
            waited += 1
        }
        #expect(!vetting.reading && asked.answer != nil, "A's subscription awaits the store")

        // Meanwhile B leaves, and events are published. (Ending a pipe takes libzmq more than
        // one exchange of commands, each seen when the socket is next used: a few uses, apart.)
        leaving = nil
        for number in 0..<4 {
            usleep(50_000)
            try vetting.publish([Array("documents.\(number)".utf8)], on: xpub)
        }

        // The store says yes: applied to A (and the event held meanwhile sent).
        asked.answer!(true)
        try Self.vet(&vetting, xpub, asked)
        #expect(vetting.reading)
        usleep(50_000)
        try vetting.publish([Array("S.event".utf8)], on: xpub)
        let got = try a.receive(wait: true)
        #expect(got == [Array("S.event".utf8)], "A hears its session's events")
    }
}
