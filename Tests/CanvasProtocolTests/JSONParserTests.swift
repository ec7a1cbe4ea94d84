import CanvasProtocol
import Foundation
import Testing

@Suite("JSON parser")
struct JSONParserTests {
    @Test("valid documents parse to the values they spell")
    func valid() throws {
        #expect(try JSONCodec.parse(Array(#" {"a": [1, -2, 3.5, 1e2, -0, true, false, null], "b": "x\"\\\/\n\u00e9\ud83d\ude00"} "#.utf8))
            == ["a": [1, -2, 3.5, 100.0, 0, true, false, nil], "b": "x\"\\/\né😀"])
        #expect(try JSONCodec.parse(Array("9223372036854775807".utf8)) == .integer(Int64.max))
        #expect(try JSONCodec.parse(Array("9223372036854775808".utf8)) == .number(9223372036854775808.0))
    }

    @Test("an integer is read as one exactly up to 64 bits, at both ends, and as a number past them")
    func integerEdges() throws {
        for value in [Int64.min, Int64.min + 1, -10, -1, 0, 1, 9, 10, 4_294_967_296, Int64.max - 1, Int64.max] {
            #expect(try JSONCodec.parse(Array(String(value).utf8)) == .integer(value), "\(value)")
        }
        #expect(try JSONCodec.parse(Array("-0".utf8)) == .integer(0))
        #expect(try JSONCodec.parse(Array("-9223372036854775809".utf8)) == .number(-9223372036854775809.0))
        // Past what even the digits' running value holds (UInt64.max and beyond).
        #expect(try JSONCodec.parse(Array("18446744073709551615".utf8)) == .number(18446744073709551615.0))
        #expect(try JSONCodec.parse(Array("18446744073709551616".utf8)) == .number(18446744073709551616.0))
        #expect(try JSONCodec.parse(Array("-184467440737095516160".utf8)) == .number(-184467440737095516160.0))
        #expect(try JSONCodec.parse(Array("12.5".utf8)) == .number(12.5) && JSONCodec.parse(Array("12e0".utf8)) == .number(12))
        #expect(try JSONCodec.parse(Array("\"Hé ✓\"".utf8)) == "Hé ✓")
        #expect(try JSONCodec.parse(Array("{}".utf8)) == .object([:]))
        #expect(try JSONCodec.parse(Array("[ ]".utf8)) == .array([]))
    }

    @Test("what is not JSON is refused", arguments: [
        "", " ", "{", "}", "[1,]", "{\"a\":1,}", "{'a':1}", "{\"a\" 1}", "01", "1.", ".5", "-", "1e", "+1",
        "NaN", "Infinity", "nul", "truex", "\"abc", "\"a\tb\"", "\"\\x\"", "\"\\u12\"", "\"\\ud800\"",
        "\"\\udc00\"", "\"\\ud800\\u0041\"", "1 2", "[1] x", "1e400",
    ])
    func invalid(_ text: String) {
        #expect(throws: (any Error).self) { try JSONCodec.parse(Array(text.utf8)) }
    }

    @Test("a request frame that is not JSON is a PARSE_ERROR, read as a document would be", arguments: [
        "", " ", "{", "}", "{\"a\":1,}", "{'a':1}", "{\"a\" 1}", "{\"id\":01}", "{\"id\":1} x", "{\"a\":NaN}",
        "{\"a\":\"\\ud800\"}", "{\"id\":1,\"method\":\"a\"", "[1] x",
    ])
    func requestNotJSON(_ text: String) {
        guard case .failure(let unreadable) = RequestDecoder.decode([Array(text.utf8)]) else {
            Issue.record("\(text) was read as a request")
            return
        }
        #expect(unreadable.error.code == .parseError)
    }

    @Test("a request's top level is read as an object: a field given twice counts once, the last")
    func requestFields() throws {
        let frame = #" {"id": 1, "method": "x", "params": {"a": 1, "a": 2}, "id": "two", "method": "hello", "extra": [{}]} "#
        guard case .success(let request) = RequestDecoder.decode([Array(frame.utf8)]) else {
            Issue.record("not read")
            return
        }
        #expect(request.id == .string("two"))
        #expect(request.method == "hello")
        #expect(request.params == ["a": 2])
        #expect(request.session == nil)
        guard case .failure(let array) = RequestDecoder.decode([Array("[1]".utf8)]) else {
            Issue.record("an array was read as a request")
            return
        }
        #expect(array.error == ProtocolError(.invalidRequest, "a request is a JSON object, not array"))
    }

    @Test("a request's keys are JSON strings: escapes spell the same key, near names are other keys, and a bad key is a PARSE_ERROR")
    func requestKeys() throws {
        // Keys compared in place must agree with keys read as strings (escapes, other scripts).
        let frame = #"{"\u0069d": 5, "m\u0065thod": "hello", "ids": 1, "i": 2, "méthod": "x", "Session": "s", "params\u0000": 3, "sessio": 4}"#
        guard case .success(let request) = RequestDecoder.decode([Array(frame.utf8)]) else {
            Issue.record("not read")
            return
        }
        #expect(request.id == .integer(5))
        #expect(request.method == "hello")
        #expect(request.params.isEmpty && request.session == nil)
        for bad in [#"{"id":1,"method":"x","a\#u{01}b":1}"#, #"{"id":1,"method":"x","ab"#, #"{"id":1,"method":"x","\q":1}"#] {
            guard case .failure(let unreadable) = RequestDecoder.decode([Array(bad.utf8)]) else {
                Issue.record("\(bad) was read as a request")
                continue
            }
            #expect(unreadable.error.code == .parseError, "\(bad)")
        }
        // A key that is not UTF-8 fails, as a value that is not would.
        guard case .failure(let notUTF8) = RequestDecoder.decode([Array(#"{"id":1,"method":"x",""#.utf8) + [0xFF] + Array(#"":1}"#.utf8)]) else {
            Issue.record("a key that is not UTF-8 was read")
            return
        }
        #expect(notUTF8.error.code == .parseError)
    }

    @Test("replies written member by member are the bytes of the whole reply serialized")
    func replyBytes() {
        let result: [String: JSONValue] = ["state": "open", "seq": 3, "pencil": ["supported": true, "policy": "alwaysToggle"], "é": "\u{01}"]
        for id in [RequestID.integer(-7), .integer(Int64.min), .string("a\"b\\ é")] {
            #expect(ReplyEncoder.success(id: id, result: result) == JSONCodec.serialize(["id": id.json, "result": .object(result)]))
            #expect(ReplyEncoder.success(id: id, rawResult: JSONCodec.serialize(.object(result)))
                == JSONCodec.serialize(["id": id.json, "result": .object(result)]))
            let error = ProtocolError(.conflict, "no \"x\"", data: ["id": id.json])
            #expect(ReplyEncoder.failure(id: id, error: error) == JSONCodec.serialize([
                "id": id.json, "error": ["code": "CONFLICT", "message": "no \"x\"", "data": ["id": id.json]],
            ]))
        }
        #expect(ReplyEncoder.failure(id: nil, error: ProtocolError(.parseError, "m"))
            == JSONCodec.serialize(["id": nil, "error": ["code": "PARSE_ERROR", "message": "m"]]))
    }

    @Test("integers are written as Swift prints them")
    func integers() {
        for value: Int64 in [0, 9, 10, -1, -10, 99, 100, 1234567890, Int64.max, Int64.min, -9_999_999] {
            #expect(JSONCodec.serialize(.integer(value)) == Array(String(value).utf8))
        }
        #expect(JSONCodec.serialize(.number(-0.0)) == Array("0".utf8))
        #expect(JSONCodec.serialize(.number(123456789012345)) == Array("123456789012345".utf8))
        #expect(JSONCodec.serialize(.number(1.5)) == Array("1.5".utf8))
    }

    @Test("a request frame keeps a number past a double's range as an infinity; documents refuse it")
    func overflow() throws {
        #expect(try JSONCodec.parseRequest(Array(#"{"x": [1e400, -1E+999, 2]}"#.utf8))
            == ["x": [.number(.infinity), .number(-.infinity), 2]])
        #expect(throws: (any Error).self) { try JSONCodec.parseRequest(Array("[1e400".utf8)) }
        #expect(throws: (any Error).self) { try JSONCodec.parseRequest(Array("NaN".utf8)) }
    }

    @Test("invalid UTF-8 is refused, inside strings and out")
    func invalidUTF8() {
        for bytes: [UInt8] in [[0x22, 0xFF, 0x22], [0x22, 0xC3, 0x22], [0xEF, 0xBB, 0xBF, 0x31], [0x22, 0xED, 0xA0, 0x80, 0x22]] {
            #expect(throws: (any Error).self) { try JSONCodec.parse(bytes) }
        }
    }

    @Test("deep nesting is refused, not a stack overflow")
    func deepNesting() throws {
        #expect(throws: (any Error).self) { try JSONCodec.parse(Array(repeating: UInt8(ascii: "["), count: 200_000)) }
        let fine = String(repeating: "[", count: 500) + String(repeating: "]", count: 500)
        #expect(try JSONCodec.parse(Array(fine.utf8)).arrayValue != nil)
    }

    @Test("serialize then parse gives the value back, and agrees with Foundation's reader")
    func roundTrip() throws {
        let value: JSONValue = ["id": 7, "s": "quote \" backslash \\ control \u{01} é 😀", "n": [1.25, -3, 1e-7], "o": ["k": nil]]
        let bytes = JSONCodec.serialize(value)
        #expect(try JSONCodec.parse(bytes) == value)
        let foundation = try JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any]
        #expect(foundation?["s"] as? String == "quote \" backslash \\ control \u{01} é 😀")
    }

    @Test("decimals read without making their text give the very double the text parses to, digits and places of every count")
    func decimalsParseExactly() throws {
        var state: UInt64 = 12
        func next() -> UInt64 {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return state >> 11
        }
        for round in 0..<60_000 {
            let whole = Int(next() % 19), places = Int(next() % 26)
            var text = next() % 3 == 0 ? "-" : ""
            text += whole == 0 ? "0" : String((0..<whole).map { index in Character(String(index == 0 ? 1 + next() % 9 : next() % 10)) })
            if places > 0 || round % 2 == 0 {
                text += "." + String((0..<max(1, places)).map { _ in Character(String(next() % 10)) })
            }
            let parsed = try JSONCodec.parse(Array(text.utf8))
            let expected = try #require(Double(text))
            switch parsed {
            case .number(let number): #expect(number.bitPattern == expected.bitPattern, "\(text)")
            case .integer(let integer): #expect(Double(integer) == expected, "\(text)")
            default: Issue.record("\(text) parsed as \(parsed)")
            }
        }
    }
}
