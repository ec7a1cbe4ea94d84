import NIOCore
import NIOHTTP1
import NIOWebSocket

/// A WebSocket connection's end of ZWS 2.0: whole binary messages in (fragments already put
/// together), ZMTP messages to its endpoint, and payloads out. Control frames are answered here
/// and never count as a message.
final class ZWSHandler: ChannelInboundHandler {
    typealias InboundIn = WebSocketFrame
    typealias OutboundOut = WebSocketFrame

    private let endpoint: WebEndpoint
    private let id: UInt64
    private var reader: ZWSReader
    private var context: ChannelHandlerContext?
    /// Where framed messages are written: below the frame encoder.
    private let framed: ChannelHandlerContext
    /// Once a close frame is sent, what comes is read and dropped until the peer closes or the
    /// grace ends: closing with unread bytes would reset the connection and lose the close frame.
    private var closeSent = false
    /// A message in WebSocket fragments being put together (browsers fragment large ones), and
    /// how many fragments it has: bounded like a whole message (`reader.maxBytes`), so a peer
    /// that has not authenticated holds at most the request limit here.
    private var fragments: ByteBuffer?
    private var fragmentCount = 0
    static let maxFragments = 4096
    /// How long a close waits for the peer's side before the connection ends regardless.
    static let closeGrace: TimeAmount = .seconds(1)

    init(endpoint: WebEndpoint, id: UInt64, reader: ZWSReader, framed: ChannelHandlerContext) {
        self.endpoint = endpoint
        self.id = id
        self.reader = reader
        self.framed = framed
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        // The server's routing id first, as ZWS 2.0 has it: an empty one.
        send(context.channel.allocator.buffer(bytes: ZWS.framed([[0]])))
    }

    func handlerRemoved(context: ChannelHandlerContext) { self.context = nil }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        guard !closeSent else { return }
        let opcode = frame.opcode
        if opcode == .binary || opcode == .continuation {
            var payload = frame.unmaskedData
            if opcode == .continuation {
                guard var started = fragments else {
                    return endpoint.refuse(id, code: ZWSReader.CloseCode.protocolError, reason: "a continuation of nothing")
                }
                fragments = nil
                started.writeBuffer(&payload)
                payload = started
            } else if fragments != nil {
                return endpoint.refuse(id, code: ZWSReader.CloseCode.protocolError, reason: "a message inside a message")
            }
            guard frame.fin else {
                fragmentCount += 1
                guard payload.readableBytes <= reader.maxBytes, fragmentCount <= Self.maxFragments else {
                    return endpoint.refuse(id, code: ZWSReader.CloseCode.messageTooLarge, reason: "a message too large")
                }
                fragments = payload
                return
            }
            fragmentCount = 0
            switch reader.read(Array(payload.readableBytesView)) {
            case .nothing: break
            case .message(let frames, let dropped): endpoint.received(id, frames: frames, dropped: dropped)
            case .answer(let payload): endpoint.answer(id, context.channel.allocator.buffer(bytes: ZWS.framed([payload])))
            case .refuse(let code, let reason): endpoint.refuse(id, code: code, reason: reason)
            }
        } else if opcode == .text {
            endpoint.refuse(id, code: ZWSReader.CloseCode.unacceptableData, reason: "ZWS 2.0 takes binary messages only")
        } else if opcode == .ping {
            // A pong goes the way every message does, held to the same queue bound.
            var pong = context.channel.allocator.buffer(capacity: 2 + frame.length)
            pong.writeInteger(UInt8(0x8A))
            pong.writeInteger(UInt8(frame.length))   // a control frame's payload is at most 125 bytes
            var data = frame.unmaskedData
            pong.writeBuffer(&data)
            endpoint.answer(id, pong)
        } else if opcode == .connectionClose {
            // The peer closes: its code echoed, then the connection ends, whether or not the
            // peer reads the echo.
            var data = frame.unmaskedData
            let code = data.readSlice(length: 2) ?? context.channel.allocator.buffer(capacity: 0)
            closeSent = true
            let channel = context.channel
            context.writeAndFlush(wrapOutboundOut(WebSocketFrame(fin: true, opcode: .connectionClose, data: code))).whenComplete { _ in
                channel.close(promise: nil)
            }
            channel.eventLoop.scheduleTask(in: Self.closeGrace) { channel.close(promise: nil) }
        }
        // Pongs, and opcodes no WebSocket defines (the decoder refuses those), need nothing.
    }

    /// The connection has authenticated: its messages may be as large as any.
    func authenticated(maxBytes: Int) { reader.maxBytes = maxBytes }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }

    /// Writes one ZMTP message, framed already (`ZWS.framed`): one write, one flush.
    func send(_ bytes: ByteBuffer) {
        guard context != nil, !closeSent else { return }
        framed.writeAndFlush(NIOAny(bytes), promise: nil)
    }

    /// Sends a close frame and ends the connection once it is written and the peer closes, or
    /// after a second; `abruptly`: at once (a peer that does not read would never take it).
    func close(code: UInt16, reason: String, abruptly: Bool = false) {
        guard let context else { return }
        if abruptly {
            // Even after a close frame went out: a peer that does not read never takes it.
            closeSent = true
            context.close(promise: nil)
            return
        }
        guard !closeSent else { return }
        closeSent = true
        var data = context.channel.allocator.buffer(capacity: 2 + reason.utf8.count)
        data.writeInteger(code)
        // A close frame's reason fits in 123 bytes.
        data.writeBytes(reason.utf8.prefix(123))
        let channel = context.channel
        context.writeAndFlush(wrapOutboundOut(WebSocketFrame(fin: true, opcode: .connectionClose, data: data))).whenComplete { _ in
            channel.close(mode: .output, promise: nil)
        }
        channel.eventLoop.scheduleTask(in: Self.closeGrace) { channel.close(promise: nil) }
    }

    func channelInactive(context: ChannelHandlerContext) {
        context.fireChannelInactive()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        // The peer closed its side after our close frame: done.
        if case ChannelEvent.inputClosed = event {
            context.close(promise: nil)
            return
        }
        context.fireUserInboundEventTriggered(event)
    }
}

/// Passes framed bytes toward the socket from below NIO's WebSocket frame encoder (which
/// takes only `WebSocketFrame`s): `ZWSHandler` writes through this handler's context.
final class FramedWrites: ChannelOutboundHandler {
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer
}

/// What a web port answers a plain HTTP request (one that is not a ZWS 2.0 upgrade): a health
/// check its answer (`/livez`, `/readyz`, so a balancer can check the web ports themselves), an
/// upgrade without the subprotocol 400, anything else 426. Then the connection closes.
final class PlainHTTPHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    static let name = "canvasd.plainHTTP"
    private let health: @Sendable (String) -> (status: Int, body: String)?
    private var head: HTTPRequestHead?

    init(health: @escaping @Sendable (String) -> (status: Int, body: String)?) { self.health = health }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head): self.head = head
        case .body: break
        case .end:
            guard let head else { return }
            self.head = nil
            let status: HTTPResponseStatus
            let body: String
            let path = String(head.uri.prefix { $0 != "?" })
            if head.headers.contains(name: "Upgrade") {
                (status, body) = (.badRequest, "canvasd's web endpoints speak ZWS 2.0: ask for the subprotocol \(ZWS.subprotocol)\n")
            } else if head.method == .GET || head.method == .HEAD, let answer = health(path) {
                (status, body) = (HTTPResponseStatus(statusCode: answer.status), answer.body)
            } else {
                (status, body) = (.upgradeRequired, "a WebSocket endpoint (ZWS 2.0); GET /livez or /readyz for health\n")
            }
            var headers = HTTPHeaders()
            headers.add(name: "Content-Type", value: "text/plain; charset=utf-8")
            headers.add(name: "Content-Length", value: "\(body.utf8.count)")
            headers.add(name: "Connection", value: "close")
            if status == .upgradeRequired {
                headers.add(name: "Upgrade", value: "websocket")
                headers.add(name: "Sec-WebSocket-Protocol", value: ZWS.subprotocol)
            }
            context.write(wrapOutboundOut(.head(HTTPResponseHead(version: head.version, status: status, headers: headers))), promise: nil)
            if head.method != .HEAD {
                context.write(wrapOutboundOut(.body(.byteBuffer(context.channel.allocator.buffer(string: body)))), promise: nil)
            }
            let channel = context.channel
            context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { _ in channel.close(promise: nil) }
        }
    }
}

/// Reads the PROXY v2 header a trusted proxy sends first, admits the connection under the
/// client's address, and steps aside. A connection from the proxy that sends no valid header in
/// time is closed.
final class ProxyHeaderHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    private let endpoint: WebEndpoint
    private let proxy: String
    private let timeout: Duration
    private var bytes: [UInt8] = []
    private var deadline: Scheduled<Void>?

    init(endpoint: WebEndpoint, proxy: String, timeout: Duration) {
        self.endpoint = endpoint
        self.proxy = proxy
        self.timeout = timeout
    }

    func handlerAdded(context: ChannelHandlerContext) {
        let channel = context.channel
        deadline = context.eventLoop.scheduleTask(in: .nanoseconds(Int64(timeout.components.seconds) * 1_000_000_000
                                                                    + timeout.components.attoseconds / 1_000_000_000)) {
            channel.close(promise: nil)
        }
    }

    func handlerRemoved(context: ChannelHandlerContext) { deadline?.cancel() }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var buffer = unwrapInboundIn(data)
        bytes += buffer.readBytes(length: buffer.readableBytes) ?? []
        let source: String
        let length: Int
        switch ProxyHeader.parse(bytes) {
        case .incomplete: return
        case .invalid:
            context.close(promise: nil)
            return
        case .local(let headerLength): (source, length) = (proxy, headerLength)
        case .proxied(let client, let headerLength): (source, length) = (client, headerLength)
        }
        deadline?.cancel()
        do {
            try endpoint.admit(context.channel, source: source)
        } catch {
            context.close(promise: nil)
            return
        }
        let rest = Array(bytes[length...])
        bytes = []
        if !rest.isEmpty { context.fireChannelRead(wrapInboundOut(context.channel.allocator.buffer(bytes: rest))) }
        context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
    }
}
