import CanvasCore
import Foundation
import InkRendering
import TestSupport
import Testing

@Suite("Stored drawing (InkSource)")
struct InkSourceTests {
    static let awkward = Drawing(
        strokes: Handwriting.page().strokes + [
            try! Stroke(tool: .pen, color: InkColor("#0A0B0C"), width: 0.1,
                        points: [try! InkPoint(x: -0.004, y: -12.345, pressure: 0), try! InkPoint(x: 1e6, y: 0.05, pressure: 1),
                                 try! InkPoint(x: -0.0, y: 0.1 + 0.2, pressure: nil), try! InkPoint(x: -1e6, y: 3, pressure: 0.1 + 0.2)]),
        ],
        texts: Handwriting.page().texts + [try! TextAnnotation(text: "\"quoted\" \\ tab\there\nnew line ✓ 𝄞", x: -3.999, y: 0.005, fontSize: 8,
                                                               color: InkColor("blue"))])

    @Test("gives back every number bit for bit: on the ink's grid, off it, -0, pressure on some points only, any Unicode")
    func roundTrip() throws {
        let decoded = try InkSource.decode(InkSource.encode(Self.awkward))
        #expect(decoded == Self.awkward)
        for (a, b) in zip(decoded.strokes.flatMap(\.points), Self.awkward.strokes.flatMap(\.points)) {
            #expect(a.x.bitPattern == b.x.bitPattern && a.y.bitPattern == b.y.bitPattern
                    && a.pressure?.bitPattern == b.pressure?.bitPattern)
        }
        let rounded = InkPrecision.rounded(Self.awkward)
        #expect(try InkSource.decode(InkSource.encode(rounded)) == rounded)
    }

    @Test("recorded handwriting on the ink's grid costs under 4 bytes a point before the PDF's deflate; off it, 8 bytes a number more")
    func compact() throws {
        // Set on the page by sums that leave some numbers a hair off the grid: put back on it.
        let words = InkPrecision.rounded(try RecordedHandwriting.page()).strokes.filter { $0.tool == .pen }
        let onGrid = InkSource.encode(Drawing(strokes: words))
        let points = Double(words.reduce(0) { $0 + $1.points.count })
        print("recorded words: \(Double(onGrid.count) / points) bytes a point before deflate")
        #expect(Double(onGrid.count) / points < 4)
        #expect(try InkSource.decode(onGrid) == Drawing(strokes: words))
        let shifted = words.map { stroke in
            try! Stroke(tool: stroke.tool, color: stroke.color, width: stroke.width,
                        points: stroke.points.map { try! InkPoint(x: $0.x + 1.0 / 3, y: $0.y, pressure: $0.pressure) })
        }
        let offGrid = InkSource.encode(Drawing(strokes: shifted))
        // Each x kept whole: its 8 bytes and its place, a varint of one to three bytes.
        #expect((8.0...11.0).contains(Double(offGrid.count - onGrid.count) / points))
        #expect(try InkSource.decode(offGrid) == Drawing(strokes: shifted))
    }

    @Test("damaged bytes: an error at every truncation and at every flipped byte, never a crash")
    func damaged() throws {
        let bytes = InkSource.encode(Drawing(strokes: Array(Self.awkward.strokes.suffix(3)), texts: Array(Self.awkward.texts.suffix(2))))
        for length in 0..<bytes.count {
            #expect(throws: InkSource.DecodeError.self) { try InkSource.decode(Array(bytes.prefix(length))) }
        }
        for index in bytes.indices {
            for flip: UInt8 in [0x01, 0x80, 0xFF] {
                var changed = bytes
                changed[index] ^= flip
                // Version 2's checksum: no one changed byte decodes (before it, a changed digit
                // decoded as another drawing).
                #expect(throws: InkSource.DecodeError.self, "byte \(index) ^ \(flip) decoded") { try InkSource.decode(changed) }
            }
        }
        var huge = Array(bytes.prefix(4))
        huge += [0xFF, 0xFF, 0xFF, 0xFF, 0x0F, 0]
        #expect(throws: InkSource.DecodeError.self) { try InkSource.decode(huge) }
    }

    @Test("version 1, as canvas/1.8 stored it (no checksum), is still read, and damage there is what the bytes allow")
    func versionOne() throws {
        let drawing = Drawing(strokes: Array(Self.awkward.strokes.suffix(3)), texts: Array(Self.awkward.texts.suffix(2)))
        let two = InkSource.encode(drawing)
        #expect(two[3] == 2)
        var one = Array(two.dropLast(8))
        one[3] = 1
        #expect(try InkSource.decode(one) == drawing)
        var unknown = two
        unknown[3] = 3
        #expect(throws: InkSource.DecodeError.self) { try InkSource.decode(unknown) }
    }
}
