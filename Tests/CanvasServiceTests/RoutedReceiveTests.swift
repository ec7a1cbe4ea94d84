import Testing
import ZeroMQ

/// `ZMQSocket.receiveRouted`, which hands the last message's envelope out again while it
/// repeats: each message still gets its own sender's envelope, with the delimiter exactly when
/// one came.
@Suite("routed receive")
struct RoutedReceiveTests {
    @Test("envelopes follow the sender and the delimiter, message after message")
    func envelopes() throws {
        let context = try ZMQContext()
        let router = try context.socket(.router)
        try router.bind("inproc://routed-receive")
        let alice = try context.socket(.dealer), bob = try context.socket(.dealer)
        try alice.setRoutingID(Array("alice".utf8))
        try bob.setRoutingID(Array("bob".utf8))
        try alice.connect("inproc://routed-receive")
        try bob.connect("inproc://routed-receive")
        // (sender, delimited, body), in the order sent and received.
        let sent: [(ZMQSocket, [UInt8], Bool, [UInt8])] = [
            (alice, Array("alice".utf8), true, [1]), (alice, Array("alice".utf8), true, [2]),
            (alice, Array("alice".utf8), false, [3]), (alice, Array("alice".utf8), false, [4]),
            (bob, Array("bob".utf8), false, [5]), (alice, Array("alice".utf8), false, [6]),
            (alice, Array("alice".utf8), true, [7]), (bob, Array("bob".utf8), true, [8]),
        ]
        for (socket, id, delimited, body) in sent {
            try socket.send(delimited ? [[], body] : [body])
            let message = try #require(try router.receiveRouted(wait: true, keepingAtMost: 8))
            #expect(message.envelope == (delimited ? [id, []] : [id]), "message \(body)")
            #expect(message.body == [body])
        }
        // Frames past the limit are dropped, the envelope kept.
        try alice.send([[], [9], [10]])
        let cut = try #require(try router.receiveRouted(wait: true, keepingAtMost: 2))
        #expect(cut.envelope == [Array("alice".utf8), []])
        #expect(cut.body.isEmpty && cut.dropped == 2)
    }
}
