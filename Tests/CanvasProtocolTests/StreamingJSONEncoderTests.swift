import CanvasProtocol
import Foundation
import Testing

/// What the one-pass encoder writes, JSONDecoder reads back to the same value, and reads the
/// same as what JSONEncoder writes for it.
@Suite("streaming JSON encoder")
struct StreamingJSONEncoderTests {
    enum Shape: Codable, Equatable {
        case dot
        case line(from: Double, to: Double)
        case labelled(String, [Int]?)
    }

    struct Inner: Codable, Equatable {
        var name: String
        var values: [Double]
        var optional: Int?
        var nested: [[UInt8]]
    }

    struct Everything: Codable, Equatable {
        var flag: Bool
        var small: Int8
        var large: UInt64
        var negative: Int64
        var doubles: [Double]
        var float: Float
        var text: String
        var none: String?
        var some: String?
        var inner: Inner
        var inners: [Inner]
        var shapes: [Shape]
        var table: [String: [Int]]
        var byNumber: [Int: String]
        var data: Data
        var empty: [String]
        var emptyObject: [String: Int]
    }

    static let everything = Everything(
        flag: true, small: -128, large: .max, negative: .min,
        doubles: [0, -0.0, 0.1, 1e-5, .leastNonzeroMagnitude, 1.7976931348623157e308, 123456789.125, -2.5e-8, 1, 3],
        float: 0.3, text: "quote \" backslash \\ tab \t newline \n nul \u{0} é 😀 \u{1F}",
        none: nil, some: "",
        inner: Inner(name: "a", values: [1.5], optional: nil, nested: [[], [0, 255]]),
        inners: [Inner(name: "b", values: [], optional: 3, nested: []), Inner(name: "c", values: [-1], optional: nil, nested: [[7]])],
        shapes: [.dot, .line(from: 0.25, to: -4), .labelled("x", nil), .labelled("", [1, 2])],
        table: ["one": [1], "": [], "three": [1, 2, 3]], byNumber: [2: "two", -1: "minus one"],
        data: Data([0, 1, 2, 254, 255]), empty: [], emptyObject: [:])

    @Test("every kind of value comes back the same, and as JSONEncoder's text does")
    func roundTrips() throws {
        let ours = try StreamingJSONEncoder.encode(Self.everything)
        let decoded = try JSONDecoder().decode(Everything.self, from: Data(ours))
        #expect(decoded == Self.everything)
        // The same values as Foundation's text gives, compared as parsed JSON.
        let theirs = try JSONEncoder().encode(Self.everything)
        #expect(try JSONCodec.parse(ours) == JSONCodec.parse(Array(theirs)), "\(String(decoding: ours, as: UTF8.self))\n\(String(decoding: theirs, as: UTF8.self))")
        #expect(Self.everything.doubles.map(\.bitPattern) == decoded.doubles.map(\.bitPattern), "-0.0 and the extremes keep their bits")
    }

    @Test("a number JSON cannot hold is refused, as JSONEncoder refuses it")
    func nonFinite() {
        #expect(throws: EncodingError.self) { try StreamingJSONEncoder.encode([1, Double.nan]) }
        #expect(throws: EncodingError.self) { try StreamingJSONEncoder.encode(["x": Double.infinity]) }
    }

    @Test("top-level values and containers closed at the end")
    func shapes() throws {
        #expect(try StreamingJSONEncoder.encode(3) == Array("3".utf8))
        #expect(try StreamingJSONEncoder.encode([[1], [], [2, 3]]) == Array("[[1],[],[2,3]]".utf8))
        #expect(try StreamingJSONEncoder.encode(Inner(name: "n", values: [], optional: nil, nested: [[]]))
                == Array(#"{"name":"n","values":[],"nested":[[]]}"#.utf8))
    }
}
