import CanvasProtocol
import Testing

@Suite("Params")
struct ParamsTests {
    @Test("a whole-number param that is not one says which number and why, naming the field")
    func integerRefusals() throws {
        let params = Params(["size": ["width": .number(.infinity), "height": 2.5, "depth": 1e30, "n": "7", "ok": 12.0]])
        let size = Params(try #require(try params.object("size")), at: "size")
        let cases: [(String, String)] = [
            ("width", "size.width: number out of range"),   // what the parser keeps of 1e400
            ("height", "size.height: must be a whole number, not 2.5"),
            ("depth", "size.depth: 1e+30 is outside 1...4096"),
            ("n", "size.n: must be a whole number, not string"),
        ]
        for (field, message) in cases {
            #expect(throws: ProtocolError(.invalidParams, message, data: ["field": .string("size.\(field)")])) {
                try size.integer(field, in: 1...4096)
            }
        }
        #expect(try size.integer("ok", in: 1...4096) == 12)
    }
}
