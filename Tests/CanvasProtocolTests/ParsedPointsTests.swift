@testable import CanvasProtocol
import Testing

/// A request's stroke-shaped `params.points` is read as numbers (`ParsedPoints`), every other
/// shape as any JSON. Either way the request is the same: its params as JSON, their canonical
/// text and their digest are what the generic parser makes of the same frame, and a frame the
/// generic parser refuses is refused alike.
@Suite("points read as numbers")
struct ParsedPointsTests {
    static func frame(_ params: String) -> [UInt8] {
        Array(#"{"id":7,"method":"drawing.addStroke","params":"#.utf8) + Array(params.utf8) + [UInt8(ascii: "}")]
    }

    /// The params as the generic parser reads the whole frame.
    static func generic(_ params: String) throws -> JSONValue? {
        try JSONParser.parse(frame(params), keepingOverflow: true)["params"]
    }

    /// Checks `params` read as a request against the generic reading; returns whether its points
    /// were read as numbers.
    @discardableResult
    static func check(_ params: String, sourceLocation: SourceLocation = #_sourceLocation) throws -> Bool {
        guard case .success(let request) = RequestDecoder.decode([frame(params)]),
              case .object(let expected)? = try generic(params) else {
            Issue.record("not a request: \(params)", sourceLocation: sourceLocation)
            return false
        }
        #expect(JSONCodec.serialize(.object(request.params)) == JSONCodec.serialize(.object(expected)),
                "\(params)", sourceLocation: sourceLocation)
        #expect(request.digest == JSONDigest.request(method: "drawing.addStroke", params: expected),
                "\(params)", sourceLocation: sourceLocation)
        #expect(Params(request).values == request.params, sourceLocation: sourceLocation)
        if let points = request.points {
            #expect(request.otherParams["points"] == nil, sourceLocation: sourceLocation)
            #expect(points.digest == JSONDigest.value(expected["points"] ?? .null), "\(params)", sourceLocation: sourceLocation)
        }
        return request.points != nil
    }

    @Test("a stroke's points are read as numbers, and are the same request")
    func strokeShapes() throws {
        let packed = [
            #"{"tool":"pen","color":"black","width":2,"points":[{"x":1,"y":2}]}"#,
            #"{"points":[{"x":-0.0,"y":0,"pressure":null},{"y":3.3333333333333335,"x":1e-7,"pressure":0.5555}],"width":1}"#,
            #"{"points" : [ { "pressure" : 1 , "x" : 999999 , "y" : -123456 } , {"x":5.0,"y":-0} ] }"#,
            #"{"points":[]}"#,
            #"{"points":[{"x":999999999999999,"y":1e15,"pressure":0.1}]}"#,
            #"{"points":[{"x":1,"y":1}],"points":[{"x":2,"y":2}]}"#,
            #"{"points":"first","points":[{"x":2,"y":2}]}"#,
            #"{"nested":{"points":[{"x":1,"y":1}]},"points":[{"x":2,"y":2}]}"#,
        ]
        for params in packed { #expect(try Self.check(params), "not read as numbers: \(params)") }
    }

    @Test("any other shape is read as any JSON, and is the same request")
    func otherShapes() throws {
        let generic = [
            #"{"points":[{"x":1,"y":2,"t":3}]}"#,
            #"{"points":[{"x":1}]}"#,
            #"{"points":[{"x":1,"y":2,"x":3}]}"#,
            #"{"points":[{"\u0078":1,"y":2}]}"#,
            #"{"points":[{"x":"1","y":2}]}"#,
            #"{"points":[{"x":1,"y":2,"pressure":true}]}"#,
            #"{"points":[{"x":1000000000000000,"y":2}]}"#,
            // The integers at Int64's ends: abs(Int64.min) traps, and took canvasd down.
            #"{"points":[{"x":-9223372036854775808,"y":10}]}"#,
            #"{"points":[{"x":1,"y":9223372036854775807}]}"#,
            #"{"points":[{"x":1,"y":2,"pressure":-9223372036854775808}]}"#,
            #"{"points":[{"x":1e400,"y":2}]}"#,
            #"{"points":[[1,2]]}"#,
            #"{"points":[{"x":1,"y":2},null]}"#,
            #"{"points":[{}]}"#,
            #"{"points":{"x":1,"y":2}}"#,
            #"{"points":[{"x":1,"y":1}],"points":[{"x":2,"y":2,"t":0}]}"#,
            #"{"points":[{"x":1,"y":1}],"points":null}"#,
        ]
        for params in generic { #expect(try !Self.check(params), "read as numbers: \(params)") }
    }

    @Test("a frame the generic parser refuses is refused alike")
    func refusals() throws {
        let broken = [
            #"{"points":[{"x":1,"y":2},]}"#,
            #"{"points":[{"x":01,"y":2}]}"#,
            #"{"points":[{"x":1,"y":2}"#,
            #"{"points":[{"x":1,"y":nul}]}"#,
            #"{"points":[{"x":1,"y":2,}]}"#,
            #"{"points":[{"x":-,"y":2}]}"#,
            #"{"points":[{"x":1 "y":2}]}"#,
        ]
        for params in broken {
            #expect(throws: (any Error).self) { try Self.generic(params) }
            guard case .failure(let refused) = RequestDecoder.decode([Self.frame(params)]) else {
                Issue.record("taken: \(params)")
                continue
            }
            #expect(refused.error.code == .parseError, "\(params)")
        }
    }

    @Test("random strokes, numbers of every form, read alike both ways")
    func randomStrokes() throws {
        var random = JSONDigestTests.Random(state: 43)
        func number() -> String {
            switch random.below(7) {
            case 0: return String(random.below(10_000) - 5000)
            case 1: return String(Double(random.below(1 << 20)) / 1024 - 512)
            case 2: return "-0.0"
            case 3: return "\(random.below(999))e-\(random.below(12) + 1)"
            case 4: return "\(random.below(9) + 1).\(random.below(1000))E+\(random.below(3))"
            case 5: return String(Double(bitPattern: random.next() >> 2))
            default: return "\(random.below(1000)).0"
            }
        }
        var packed = 0
        for _ in 0..<2000 {
            let points = (0..<random.below(12)).map { _ in
                var members = [#""x":\#(number())"#, #""y":\#(number())"#]
                switch random.below(3) {
                case 0: members.append(#""pressure":\#(number())"#)
                case 1: members.append(#""pressure":null"#)
                default: break
                }
                if random.below(4) == 0 { members.reverse() }
                return "{" + members.joined(separator: random.below(2) == 0 ? "," : " , ") + "}"
            }
            if try Self.check(#"{"tool":"pen","points":[\#(points.joined(separator: ","))]}"#) { packed += 1 }
        }
        // Every one has a stroke's shape and numbers a double keeps.
        #expect(packed == 2000)
    }

    /// What a hostile or broken client sends: a stroke's frame with bytes replaced, put in and
    /// taken out (structure, numbers at and past every limit, escapes). Whatever the reading of
    /// points makes of it, the request is the one the generic parser reads, or refused as it is.
    @Test("a stroke's frame changed byte by byte reads as the generic parser reads it, or is refused alike")
    func mutatedFrames() throws {
        var random = JSONDigestTests.Random(state: 4_343)
        let base = Array(#"{"tool":"pen","color":"black","width":2,"points":[{"x":12.5,"y":-3,"pressure":0.25},{"y":1e2,"x":-0.0},{"x":7,"y":8,"pressure":null}]}"#.utf8)
        let pieces = ["0", "9", "-", "+", ".", "e", "E", "{", "}", "[", "]", ",", ":", "\"", " ", "n", "x", "y", "\\", "null",
                      "-9223372036854775808", "9223372036854775808", "1e400", "-1e-400", "999999999999999", "1000000000000000",
                      "\"pressure\"", "\"x\":", ",\"y\":1", "{\"x\":1,\"y\":2}", "\"\\u0078\""].map { Array($0.utf8) }
        var read = 0, refused = 0
        for _ in 0..<6000 {
            var params = base
            for _ in 0...random.below(3) {
                let at = random.below(params.count + 1)
                switch random.below(3) {
                case 0 where at < params.count: params[at] = pieces[random.below(pieces.count)][0]
                case 1 where at < params.count: params.remove(at: at)
                default: params.insert(contentsOf: pieces[random.below(pieces.count)], at: at)
                }
            }
            let text = String(decoding: params, as: UTF8.self), frame = Self.frame(text)
            do {
                _ = try JSONParser.parse(frame, keepingOverflow: true)
            } catch {
                guard case .failure(let refusal) = RequestDecoder.decode([frame]) else {
                    Issue.record("taken, though not JSON: \(text)")
                    continue
                }
                #expect(refusal.error.code == .parseError, "\(text)")
                refused += 1
                continue
            }
            switch RequestDecoder.decode([frame]) {
            case .success:
                // The same request as the generic reading, params, canonical text and digest.
                try Self.check(text)
                read += 1
            case .failure(let refusal):
                // JSON, but not a request (params that are no object): never a parse error.
                #expect(refusal.error.code != .parseError, "\(text)")
            }
        }
        // Both kinds came up often enough to have been tried.
        #expect(read > 500 && refused > 500, "read \(read), refused \(refused)")
    }
}
