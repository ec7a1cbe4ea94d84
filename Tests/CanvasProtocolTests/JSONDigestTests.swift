import CanvasProtocol
import Testing

/// `JSONDigest` agrees with the spec's "same request" (§2.4), which the canonical JSON text
/// (`JSONCodec.serialize`: keys sorted, numbers in one form) spells out: two values digest alike
/// exactly when their canonical texts are the same, over many random values and their near misses.
@Suite("JSON digests")
struct JSONDigestTests {
    struct Random {
        var state: UInt64
        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
        mutating func below(_ count: Int) -> Int { Int(next() % UInt64(count)) }
    }

    /// A value as a client might send one: small numbers written as integers or doubles, a few
    /// keys that recur, nesting.
    static func value(_ random: inout Random, depth: Int = 0) -> JSONValue {
        switch random.below(depth > 2 ? 6 : 8) {
        case 0: return .null
        case 1: return .bool(random.below(2) == 0)
        case 2: return .integer(Int64(random.below(5)) - 2)
        case 3: return .number(Double(random.below(5)) - 2)
        case 4: return .number(Double(random.below(1000)) / 8 - 60)
        case 5: return .string(["x", "y", "", "é", "pressure", "a longer string of words"][random.below(6)])
        case 6: return .array((0..<random.below(4)).map { _ in value(&random, depth: depth + 1) })
        default:
            var members: [String: JSONValue] = [:]
            for _ in 0..<random.below(4) { members[["x", "y", "pressure", "tool", "é"][random.below(5)]] = value(&random, depth: depth + 1) }
            return .object(members)
        }
    }

    @Test("digests agree exactly when canonical JSON does, over 20,000 random pairs")
    func agreesWithCanonicalText() {
        var random = Random(state: 77)
        var same = 0
        for _ in 0..<20_000 {
            let a = Self.value(&random), b = Self.value(&random)
            let equalText = JSONCodec.serialize(a) == JSONCodec.serialize(b)
            #expect((JSONDigest.value(a) == JSONDigest.value(b)) == equalText, "\(a) and \(b)")
            if equalText { same += 1 }
        }
        #expect(same > 500, "only \(same) pairs were the same value: the test would not see a digest that tells them apart")
    }

    @Test("how a number is written and the order of keys do not matter; every param does")
    func requestDigests() throws {
        let sent = try #require(JSONCodec.parse(Array(#"{"points":[{"x":3,"y":4.5,"pressure":0.5}],"width":2}"#.utf8)).objectValue)
        let again = try #require(JSONCodec.parse(Array(#"{"width":2.0,"points":[{"pressure":0.50,"y":4.5,"x":3.0}]}"#.utf8)).objectValue)
        #expect(JSONDigest.request(method: "drawing.addStroke", params: sent) == JSONDigest.request(method: "drawing.addStroke", params: again))
        #expect(JSONDigest.request(method: "drawing.addStroke", params: sent) != JSONDigest.request(method: "drawing.addText", params: sent))
        var extra = sent
        extra["note"] = .null
        #expect(JSONDigest.request(method: "drawing.addStroke", params: sent) != JSONDigest.request(method: "drawing.addStroke", params: extra))
        var moved = sent
        moved["points"] = [["x": 3, "y": 4.5, "pressure": 0.5000001]]
        #expect(JSONDigest.request(method: "drawing.addStroke", params: sent) != JSONDigest.request(method: "drawing.addStroke", params: moved))
        // Stable across processes and builds: kept in shared sessions.
        #expect(JSONDigest.request(method: "canvas.state", params: [:]).bytes.hex == "5155178e0df7e151e7509d9a6f5f9632")
    }
}

extension Array where Element == UInt8 {
    var hex: String { map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined() }
}
