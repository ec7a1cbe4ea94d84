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
}
