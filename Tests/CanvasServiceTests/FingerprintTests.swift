@testable import CanvasService
import CanvasProtocol
import Testing

@Suite("retry fingerprint")
struct FingerprintTests {
    @Test("written directly, it is the serialized {method, params}, so retries match as before")
    func sameBytes() {
        let params: [[String: JSONValue]] = [[:], ["b": [1, 2.0, "x\u{e9}\n"], "a": ["z": nil, "y": true]], ["c": .number(.infinity)]]
        for params in params {
            let request = Request(id: .integer(1), method: "canvas.state", params: params, session: "s")
            #expect(ReplyCache.fingerprint(request)
                == JSONCodec.serialize(["method": .string(request.method), "params": .object(request.params)]))
            #expect(ReplyCache.fingerprint(request, method: .canvasState) == ReplyCache.fingerprint(request))
        }
    }

    @Test("each method's without params, written once, is the serialized {method, params} too")
    func withoutParams() {
        for method in Method.allCases {
            let request = Request(id: .integer(1), method: method.rawValue, session: "s")
            #expect(ReplyCache.fingerprint(request, method: method) == JSONCodec.serialize(["method": .string(method.rawValue), "params": [:]]))
        }
    }
}
