@testable import CanvasService
import CanvasClient
import CanvasProtocol
import Testing

@Suite("reply cache")
struct ReplyCacheTests {
    /// The cache as it was first written, an array shifted from the front: what it keeps, in
    /// order, is what the ring must keep.
    struct Model {
        var kept: [(id: RequestID, request: [UInt8], reply: [UInt8]?)] = []
        let capacity: Int
        let maxBytes: Int

        var bytes: Int { kept.reduce(0) { $0 + $1.request.count + ($1.reply?.count ?? 0) } }

        mutating func remember(_ reply: [UInt8]?, for id: RequestID, request: [UInt8]) {
            guard capacity > 0, !kept.contains(where: { $0.id == id }) else { return }
            kept.append((id, request, reply))
            while kept.count > capacity || (bytes > maxBytes && kept.count > 1) { kept.removeFirst() }
        }
    }

    @Test("keeps what the shifted array kept, oldest first, under the count and byte limits",
          arguments: [(1, Int.max), (3, Int.max), (8, Int.max), (8, 60), (5, 25), (0, Int.max), (20, Int.max), (64, 400)])
    func sameAsShiftedArray(capacity: Int, maxBytes: Int) {
        var random = SeededGenerator(seed: UInt64(capacity * 1000 + min(maxBytes, 999)))
        var cache = ReplyCache(capacity: capacity, maxBytes: maxBytes)
        var model = Model(capacity: capacity, maxBytes: maxBytes)
        for step in 0..<2_000 {
            // Ids from a small range, so some repeat (and are not remembered twice), some of
            // them strings; sizes that make the byte limit forget one, several or none.
            let number = Int64.random(in: 0..<(Int64(capacity) * 3 + 2), using: &random)
            let id: RequestID = Bool.random(using: &random) ? .integer(number) : .string("r\(number)")
            let request = Array(repeating: UInt8(ascii: "q"), count: Int.random(in: 1...12, using: &random))
            let reply: [UInt8]? = Int.random(in: 0..<5, using: &random) == 0
                ? nil : Array(repeating: UInt8(ascii: "a"), count: Int.random(in: 0...20, using: &random))
            cache.remember(reply, for: id, request: request)
            model.remember(reply, for: id, request: request)
            let entries = cache.entries
            #expect(entries.map(\.id) == model.kept.map(\.id), "step \(step)")
            #expect(entries.map(\.request) == model.kept.map(\.request), "step \(step)")
            #expect(entries.map(\.reply) == model.kept.map(\.reply), "step \(step)")
            if entries.map(\.id) != model.kept.map(\.id) { return }
            // Every id kept answers as a retry (or as not kept); every other as a miss.
            for entry in model.kept {
                switch cache.lookup(entry.id, request: entry.request) {
                case .retry(let bytes): #expect(bytes == entry.reply)
                case .notKept: #expect(entry.reply == nil)
                case .miss, .reused: Issue.record("id \(entry.id) kept by the model, not found at step \(step)")
                }
            }
        }
    }
}
