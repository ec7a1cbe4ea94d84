import CanvasCore
@testable import CanvasProtocol
@testable import CanvasService
import Testing

/// `drawing.addStroke` reads a well-formed stroke straight from the parsed params
/// (`SessionParams.wellFormedStroke`) instead of writing them out as JSON and decoding them
/// through Codable. The two must make the same stroke, bit for bit, and the direct reading must
/// give way (nil) on everything the decoder refuses, so that its field and message are the
/// answer as before.
@Suite("a stroke read from the params")
struct StrokeReadingTests {
    /// The params as the request path has them: parsed, overflow kept.
    static func params(_ text: String) throws -> [String: JSONValue] {
        guard case .object(let values) = try JSONParser.parse(Array(text.utf8), keepingOverflow: true) else {
            throw ProtocolError(.invalidParams, "not an object")
        }
        return values
    }

    /// The params both ways the service reads them: parsed as any JSON, and as a request's
    /// params, whose stroke-shaped `points` the parser reads as numbers (`ParsedPoints`).
    static func readings(_ text: String) throws -> [Params] {
        let frame = Array(#"{"id":1,"method":"drawing.addStroke","params":"#.utf8) + Array(text.utf8) + [UInt8(ascii: "}")]
        guard case .success(let request) = RequestDecoder.decode([frame]) else { throw ProtocolError(.invalidParams, "not a request") }
        return [Params(try params(text)), Params(request)]
    }

    static func decoded(_ values: [String: JSONValue]) -> Stroke? {
        try? JSONCodec.decode(Stroke.self, from: .object(values))
    }

    /// Every number bit for bit (`==` takes -0 for 0).
    static func same(_ a: Stroke, _ b: Stroke) -> Bool {
        func bits(_ value: Double?) -> UInt64? { value?.bitPattern }
        return a.tool == b.tool && a.color == b.color && a.width.bitPattern == b.width.bitPattern && a.points.count == b.points.count
            && zip(a.points, b.points).allSatisfy {
                $0.x.bitPattern == $1.x.bitPattern && $0.y.bitPattern == $1.y.bitPattern && bits($0.pressure) == bits($1.pressure)
            }
    }

    @Test("the same stroke as the decoder makes, for strokes as clients write them")
    func sameAsDecoded() throws {
        let texts = [
            #"{"tool":"pen","color":"black","width":2,"points":[{"x":1,"y":2}]}"#,
            ##"{"tool":"highlighter","color":"#12AbEf","width":12.5,"points":[{"x":-0.0,"y":0,"pressure":null},{"x":3.3333333333333335,"y":1e-7,"pressure":0.5555}]}"##,
            #"{"tool":"pen","color":"red","width":0.5,"points":[{"x":999999,"y":-123456,"pressure":1}],"joined":false,"continued":false,"extra":[1,2]}"#,
            #"{"tool":"pen","color":"blue","width":1e0,"points":[{"x":42.176144743080584,"y":612.0000000000001,"pressure":0,"z":3}]}"#,
        ]
        for text in texts {
            let values = try Self.params(text)
            for params in try Self.readings(text) {
                guard let direct = SessionParams.wellFormedStroke(params), let decoded = Self.decoded(values) else {
                    Issue.record("not read both ways: \(text)")
                    continue
                }
                #expect(Self.same(direct, decoded), "\(text): \(direct) against \(decoded)")
            }
        }
    }

    @Test("the same stroke as the decoder makes, for 500 random strokes of every kind of number")
    func sameForRandomStrokes() throws {
        var generator = SystemRandomNumberGenerator()
        func number() -> String {
            switch Int.random(in: 0..<6, using: &generator) {
            case 0: return String(Int.random(in: -5000...5000, using: &generator))
            case 1: return String(Double.random(in: -5000...5000, using: &generator))
            case 2: return "-0.0"
            case 3: return String(format: "%.17g", Double.random(in: 0...1, using: &generator))
            case 4: return "\(Int.random(in: 0...999, using: &generator))e-\(Int.random(in: 1...12, using: &generator))"
            default: return String(Double(Int.random(in: -1000...1000, using: &generator)) / 8)
            }
        }
        for _ in 0..<500 {
            let points = (0..<Int.random(in: 1...20, using: &generator)).map { _ in
                let pressure = Bool.random(using: &generator) ? #","pressure":\#(Double.random(in: 0...1, using: &generator))"# : ""
                return #"{"x":\#(number()),"y":\#(number())\#(pressure)}"#
            }
            let text = #"{"tool":"pen","color":"black","width":\#(Double.random(in: 0.1...50, using: &generator)),"points":[\#(points.joined(separator: ","))]}"#
            let values = try Self.params(text)
            let decoded = Self.decoded(values)
            for params in try Self.readings(text) {
                let direct = SessionParams.wellFormedStroke(params)
                #expect((direct == nil) == (decoded == nil), "\(text)")
                if let direct, let decoded { #expect(Self.same(direct, decoded), "\(text)") }
            }
        }
    }

    @Test("anything the decoder refuses is left to it, so its field and message answer")
    func refusalsLeftToTheDecoder() throws {
        let texts = [
            #"{"color":"black","width":2,"points":[{"x":1,"y":2}]}"#,
            #"{"tool":"eraser","color":"black","width":2,"points":[{"x":1,"y":2}]}"#,
            #"{"tool":"pen","color":"no such colour","width":2,"points":[{"x":1,"y":2}]}"#,
            #"{"tool":"pen","color":"black","width":"2","points":[{"x":1,"y":2}]}"#,
            #"{"tool":"pen","color":"black","width":0,"points":[{"x":1,"y":2}]}"#,
            #"{"tool":"pen","color":"black","width":2,"points":[]}"#,
            #"{"tool":"pen","color":"black","width":2,"points":[{"x":1}]}"#,
            #"{"tool":"pen","color":"black","width":2,"points":[{"x":1,"y":2,"pressure":2}]}"#,
            #"{"tool":"pen","color":"black","width":2,"points":[{"x":1e999,"y":2}]}"#,
            #"{"tool":"pen","color":"black","width":2,"points":[{"x":1,"y":2,"pressure":"0.5"}]}"#,
            #"{"tool":"pen","color":"black","width":2,"points":[[1,2]]}"#,
            #"{"tool":"pen","color":"black","width":2,"points":{"x":1,"y":2}}"#,
        ]
        for text in texts {
            let values = try Self.params(text)
            #expect(Self.decoded(values) == nil, "the decoder took \(text)")
            for params in try Self.readings(text) {
                #expect(SessionParams.wellFormedStroke(params) == nil, "read directly: \(text)")
            }
        }
    }
}
