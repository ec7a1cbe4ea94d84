import Testing
@testable import WebTransport

@Suite("ZWS 2.0 reading")
struct ZWSReaderTests {
    func greeted(maxFrames: Int = 4, maxBytes: Int = 100) -> ZWSReader {
        var reader = ZWSReader(maxFrames: maxFrames, maxBytes: maxBytes)
        #expect(reader.read([0x00]) == .nothing)   // the peer's routing id
        return reader
    }

    @Test("frames with MORE make one message; the routing id is not one")
    func message() {
        var reader = greeted()
        #expect(reader.read([0x01] + Array("{\"id\":1}".utf8)) == .nothing)
        #expect(reader.partial)
        #expect(reader.read([0x00, 7, 8]) == .message(frames: [Array("{\"id\":1}".utf8), [7, 8]], dropped: 0))
        #expect(!reader.partial)
        #expect(reader.read([0x00]) == .message(frames: [[]], dropped: 0))
    }

    @Test("frames past maxFrames are counted, not kept; bytes past maxBytes close the connection")
    func bounds() {
        var reader = greeted(maxFrames: 2, maxBytes: 10)
        #expect(reader.read([0x01, 1]) == .nothing)
        #expect(reader.read([0x01, 2]) == .nothing)
        #expect(reader.read([0x00, 3]) == .message(frames: [[1], [2]], dropped: 1))
        #expect(reader.read([0x01, 1, 2, 3, 4, 5]) == .nothing)
        guard case .refuse(let code, _) = reader.read([0x00, 1, 2, 3, 4, 5]) else {
            Issue.record("a message past maxBytes was taken")
            return
        }
        #expect(code == ZWSReader.CloseCode.messageTooLarge)
    }

    @Test("an empty message is refused with a protocol error; commands are no messages, and a PING gets its PONG")
    func commandsAndEmpty() {
        var reader = greeted()
        guard case .refuse(let code, _) = reader.read([]) else {
            Issue.record("an empty message was taken")
            return
        }
        #expect(code == ZWSReader.CloseCode.protocolError)
        let ping: [UInt8] = [0x02, 4] + Array("PING".utf8) + [0, 100] + Array("ctx".utf8)
        #expect(reader.read(ping) == .answer([0x02, 4] + Array("PONG".utf8) + Array("ctx".utf8)))
        #expect(reader.read([0x02, 5] + Array("READY".utf8)) == .nothing)
        #expect(reader.read([0x02, 9] + Array("SUBSCRIBE".utf8) + Array("s.".utf8)) == .message(frames: [[1] + Array("s.".utf8)], dropped: 0))
        #expect(reader.read([0x02, 6] + Array("CANCEL".utf8) + Array("s.".utf8)) == .message(frames: [[0] + Array("s.".utf8)], dropped: 0))
        #expect(reader.read([0x02, 200]) == .nothing)
        // A command whose name is empty (it trapped once: a range 1...0).
        #expect(reader.read([0x02, 0]) == .nothing)
        #expect(reader.read([0x02, 0, 1, 2]) == .nothing)
        // On the request endpoint a command is never a request.
        var requests = ZWSReader(maxFrames: 4, maxBytes: 100, subscriptions: false)
        _ = requests.read([0x00])
        #expect(requests.read([0x02, 9] + Array("SUBSCRIBE".utf8) + Array("s.".utf8)) == .nothing)
        #expect(requests.read([0x02, 4] + Array("PING".utf8) + [0, 1]) == .answer([0x02, 4] + Array("PONG".utf8)))
        #expect(!reader.partial)
    }

    @Test("outgoing payloads carry MORE on every frame but the last")
    func payloads() {
        #expect(ZWS.payloads([[1], [2, 3], []]) == [[0x01, 1], [0x01, 2, 3], [0x00]])
    }

    @Test("framed messages carry RFC 6455's three length forms, unmasked, one per payload")
    func framed() {
        #expect(ZWS.framed([[0x00, 7]]) == [0x82, 2, 0x00, 7])
        for (size, header) in [(125, [0x82, 125]), (126, [0x82, 126, 0, 126]), (65_535, [0x82, 126, 0xFF, 0xFF]),
                               (65_536, [0x82, 127, 0, 0, 0, 0, 0, 1, 0, 0])] as [(Int, [UInt8])] {
            let bytes = ZWS.framed([[UInt8](repeating: 9, count: size)])
            #expect(Array(bytes.prefix(header.count)) == header && bytes.count == header.count + size)
        }
        #expect(ZWS.framed([[1], [2, 3]]) == [0x82, 1, 1, 0x82, 2, 2, 3])
    }

    @Test("a PROXY v2 header gives the client's address, IPv4 and IPv6, in the kernel's own text")
    func proxyHeader() {
        let signature: [UInt8] = [0x0D, 0x0A, 0x0D, 0x0A, 0x00, 0x0D, 0x0A, 0x51, 0x55, 0x49, 0x54, 0x0A]
        let v4 = signature + [0x21, 0x11, 0, 12] + [192, 0, 2, 7] + [10, 0, 0, 1] + [0x30, 0x39, 0x15, 0xB3]
        #expect(ProxyHeader.parse(v4) == .proxied(source: "192.0.2.7", length: 28))
        #expect(ProxyHeader.parse(Array(v4.prefix(20))) == .incomplete)
        #expect(ProxyHeader.parse(Array(signature.prefix(5))) == .incomplete)
        var six: [UInt8] = [0x20, 0x01, 0x0d, 0xb8] + [UInt8](repeating: 0, count: 11) + [1]
        six += [UInt8](repeating: 0, count: 16) + [0, 1, 0, 2]
        #expect(ProxyHeader.parse(signature + [0x21, 0x21, 0, 36] + six) == .proxied(source: "2001:db8::1", length: 52))
        #expect(ProxyHeader.parse(signature + [0x20, 0x00, 0, 0]) == .local(length: 16))
        #expect(ProxyHeader.parse(Array("GET / HTTP/1.1\r\n".utf8)) == .invalid("no PROXY protocol v2 signature"))
        if case .invalid = ProxyHeader.parse(signature + [0x21, 0x11, 0xFF, 0xFF]) {} else { Issue.record("a huge header was taken") }
        if case .invalid = ProxyHeader.parse(signature + [0x11, 0x11, 0, 12] + [UInt8](repeating: 0, count: 12)) {} else {
            Issue.record("version 1 in a v2 header was taken")
        }
    }

    @Test("endpoints: host and port, IPv6 in brackets, a path ignored, * or none for any port")
    func endpoints() {
        #expect(WebTransport.hostAndPort("ws://127.0.0.1:5580")! == ("127.0.0.1", 5580))
        #expect(WebTransport.hostAndPort("ws://[::1]:80/requests")! == ("::1", 80))
        #expect(WebTransport.hostAndPort("ws://127.0.0.1:*")! == ("127.0.0.1", 0))
        #expect(WebTransport.hostAndPort("tcp://127.0.0.1:1") == nil)
        #expect(WebTransport.hostAndPort("ws://127.0.0.1:99999") == nil)
    }
}
