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
        unknown[3] = 4
        #expect(throws: InkSource.DecodeError.self) { try InkSource.decode(unknown) }
    }

    /// An annotation's drawing (version 3): the strokes its /InkList gives back exactly leave
    /// their positions out, and take them from there; a stroke it does not (a -0, a number off
    /// the grid, a point missing) keeps its own.
    @Test("version 3 takes the positions the /InkList gives back bit for bit from there, and refuses any change to them")
    func positionsFromInkList() throws {
        let words = InkPrecision.rounded(try RecordedHandwriting.page()).strokes.filter { $0.tool == .pen }
        var strokes = Array(words.prefix(6))
        strokes[1] = try Stroke(tool: .pen, color: strokes[1].color, width: strokes[1].width,
                                points: [try InkPoint(x: -0.0, y: 3, pressure: 0.5)] + strokes[1].points)
        var positions: [InkSource.Positions] = strokes.map { $0.points.map { ($0.x, $0.y) } }
        positions[1][0].x = 0                       // the -0 an /InkList writes as 0
        positions[2][5].y += 0.01                   // a number the /InkList does not give back
        positions[3].removeLast()                   // a point it lacks
        let drawing = Drawing(strokes: strokes, texts: Array(Self.awkward.texts.suffix(1)))
        let bytes = InkSource.encode(drawing, positions: positions)
        let full = InkSource.encode(drawing)
        #expect(bytes[3] == 3 && full[3] == 2)
        let taken = Double([0, 4, 5].reduce(0) { $0 + strokes[$1].points.count })
        print("version 3: \(full.count - bytes.count) bytes fewer for \(taken) points taken from the /InkList")
        // Each taken point's x and y steps, a byte or two each, less the second checksum.
        #expect(Double(full.count - bytes.count - 8) / taken > 1.5)
        let decoded = try InkSource.decode(bytes, positions: positions)
        #expect(decoded == drawing)
        #expect(zip(decoded.strokes.flatMap(\.points), drawing.strokes.flatMap(\.points)).allSatisfy {
            $0.x.bitPattern == $1.x.bitPattern && $0.y.bitPattern == $1.y.bitPattern
        })
        // Without them, with one taken number moved 0.01 pt, or with a point more: refused.
        #expect(throws: InkSource.DecodeError.self) { try InkSource.decode(bytes) }
        var moved = positions
        moved[4][7].x += 0.01
        #expect(throws: InkSource.DecodeError.self) { try InkSource.decode(bytes, positions: moved) }
        var longer = positions
        longer[0].append((1, 1))
        #expect(throws: InkSource.DecodeError.self) { try InkSource.decode(bytes, positions: longer) }
        // What else it says is read from its own bytes, whatever the positions.
        #expect(InkSource.firstStroke(bytes).map { "\($0.color) \($0.width)" } == "\(strokes[0].color) \(strokes[0].width)")
        var damaged = bytes
        damaged[6] ^= 1
        #expect(InkSource.firstStroke(damaged) == nil && InkSource.firstStroke(Array(bytes.prefix(12))) == nil)
        for length in 0..<bytes.count {
            #expect(throws: InkSource.DecodeError.self) { try InkSource.decode(Array(bytes.prefix(length)), positions: positions) }
        }
        for index in bytes.indices {
            for flip: UInt8 in [0x01, 0x80, 0xFF] {
                var changed = bytes
                changed[index] ^= flip
                #expect(throws: InkSource.DecodeError.self, "byte \(index) ^ \(flip) decoded") {
                    try InkSource.decode(changed, positions: positions)
                }
            }
        }
        // A version 2 reader's flags: bit 3 is refused there, never read as steps.
        var relabelled = Array(bytes.dropLast(8))
        relabelled[3] = 2
        #expect(throws: InkSource.DecodeError.self) { try InkSource.decode(relabelled, checkingSum: false, positions: positions) }
    }
}
