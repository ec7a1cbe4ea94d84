import CanvasCore
import Foundation
@testable import InkRendering
import Testing

/// Another program's `/Ink` read as strokes (`InkAnnotations.readOther`), from entries as
/// qpdf's JSON gives them: what each entry becomes, and what is not loaded.
@Suite("Other programs' ink")
struct OtherInkTests {
    /// A US Letter page shown as it is: display y is 792 - user y.
    static let page = InkAnnotations.Placement(width: 612, height: 792, matrix: [1, 0, 0, 1, 0, 0])

    static func read(_ entries: String, appearance: String = "") -> InkAnnotations.OtherInk? {
        InkAnnotations.readOther(entries: Array(entries.utf8), appearance: Array(appearance.utf8), on: page)
    }

    @Test("the centre lines are the /InkList's numbers, not rounded; an odd number at the end of an entry is dropped")
    func centreLines() throws {
        let other = try #require(Self.read(#"{"/Subtype":"/Ink","/InkList":[[10.123456789,700.5,20,690.25,7],[300,400]],"/BS":{"/W":2.75},"/C":[0,0,1]}"#))
        let strokes = other.drawing.strokes
        #expect(strokes.count == 2)
        #expect(strokes[0].points.map(\.x) == [10.123456789, 20] && strokes[0].points.map(\.y) == [792 - 700.5, 792 - 690.25])
        #expect(strokes[1].points.count == 1)
        #expect(strokes.allSatisfy { $0.width == 2.75 && $0.color == (try! InkColor("#0000FF")) && $0.tool == .pen })
        #expect(strokes.allSatisfy { $0.points.allSatisfy { $0.pressure == nil } })
    }

    @Test("width from /BS, else /Border's third number, else 1; colour from grey, RGB or CMYK, none is black",
          arguments: [
              (#""/BS":{"/W":4},"/Border":[0,0,9],"/C":[0.5]"#, 4.0, "#808080"),
              (#""/Border":[0,0,9],"/C":[0,1,0,0]"#, 9.0, "#FF00FF"),
              (#""/C":[]"#, 1.0, "#000000"),
              (#""/BS":{"/W":0}"#, 0.1, "#000000"),
          ])
    func widthAndColour(_ entries: String, _ width: Double, _ color: String) throws {
        let other = try #require(Self.read(#"{"/Subtype":"/Ink","/InkList":[[1,2,3,4]],"# + entries + "}"))
        #expect(other.drawing.strokes[0].width == width)
        #expect(other.drawing.strokes[0].color == (try InkColor(color)))
    }

    @Test("a highlighter by /IT or by a multiply blend in its appearance")
    func highlighter() throws {
        #expect(Self.read(#"{"/InkList":[[1,2,3,4]],"/IT":"/InkHighlight"}"#)?.drawing.strokes[0].tool == .highlighter)
        #expect(Self.read(#"{"/InkList":[[1,2,3,4]],"/CanvasBridgeMultiply":true}"#)?.drawing.strokes[0].tool == .highlighter)
        #expect(Self.read(#"{"/InkList":[[1,2,3,4]],"/IT":"/InkArrow"}"#)?.drawing.strokes[0].tool == .pen)
        // Translucent: a highlighter in the colour it shows over white.
        let translucent = try #require(Self.read(#"{"/InkList":[[1,2,3,4]],"/C":[1,1,0],"/CA":0.4}"#)).drawing.strokes[0]
        let lightYellow = try InkColor("#FFFF99")
        #expect(translucent.tool == .highlighter && translucent.color == lightYellow)
        #expect(Self.read(#"{"/InkList":[[1,2,3,4]],"/CA":1}"#)?.drawing.strokes[0].tool == .pen)
    }

    @Test("nothing to load without an /InkList, with empty entries, entries that are not JSON, or hidden")
    func nothing() {
        #expect(Self.read(#"{"/Subtype":"/Ink","/Rect":[0,0,10,10]}"#) == nil)
        #expect(Self.read(#"{"/Subtype":"/Ink","/InkList":[[],[5]]}"#) == nil)
        #expect(Self.read("not json") == nil)
        // Hidden, or not to be viewed: left as it is.
        #expect(Self.read(#"{"/InkList":[[1,2,3,4]],"/F":2}"#) == nil)
        #expect(Self.read(#"{"/InkList":[[1,2,3,4]],"/F":36}"#) == nil)
        #expect(Self.read(#"{"/InkList":[[1,2,3,4]],"/F":4}"#) != nil)
    }

    @Test("author, subject, dates and name carried as PDF strings; the popup's position kept")
    func carried() throws {
        let other = try #require(Self.read(#"{"/InkList":[[1,2,3,4]],"/T":"u:Zoë","/M":"u:D:2024","/NM":"b:00ff","/Subj":7,"/CanvasBridgePopup":3}"#))
        #expect(other.carried == "/T <FEFF005A006F00EB> /M <FEFF0044003A0032003000320034> /NM <00ff>")
        #expect(other.popup == 3)
    }

    @Test("an outline whose width grows along the line comes back as rising pressure; one width all along as none")
    func pressureFromOutline() throws {
        // A line from (100, 500) to (300, 500) in user space, its outline 1 pt wide at the left
        // and 5 pt wide at the right (a wedge), filled, reaching past the line's ends as a cap
        // does; then the same at one width, 3 pt.
        let wedge = "90 499.45 m 310 497.45 l 310 502.55 l 90 500.55 l h f"
        let bar = "90 498.5 m 310 498.5 l 310 501.5 l 90 501.5 l h f"
        let line = (0...20).map { "\(100 + $0 * 10),500" }.joined(separator: ",")
        let entries = #"{"/InkList":[[\#(line)]],"/BS":{"/W":3},"/Rect":[0,0,612,792],"/BBox":[0,0,612,792]}"#
        let pressed = try #require(Self.read(entries, appearance: wedge)).drawing.strokes[0]
        let pressures = pressed.points.compactMap(\.pressure)
        #expect(pressures.count == 21)
        #expect(zip(pressures, pressures.dropFirst()).allSatisfy { $0 <= $1 }, "\(pressures)")
        #expect(pressures.first! < 0.2 && pressures.last! > 0.7, "\(pressures)")
        // The width at each point is as wide as the outline there.
        for (index, point) in pressed.points.enumerated() {
            let drawn = pressed.width * PenProfile.factor(pressure: point.pressure)
            let outline = 2 * (0.55 + 2 * (100 + 10 * Double(index) - 90) / 220)
            #expect(abs(drawn - outline) < 0.1, "point \(index): \(drawn) for \(outline)")
        }
        let even = try #require(Self.read(entries, appearance: bar)).drawing.strokes[0]
        #expect(even.points.allSatisfy { $0.pressure == nil } && even.width == 3)
        // An outline made to be slow gives no pressure, within a bound of work: thousands of
        // long diagonals (each filed in thousands of grid cells), or 150,000 edges in one spot
        // measured from 2,000 points.
        let diagonals = String(repeating: "100 100 m 300 300 l 301 300 l h f ", count: 5_000)
        let slow = try #require(Self.read(entries, appearance: diagonals)).drawing.strokes[0]
        #expect(slow.points.allSatisfy { $0.pressure == nil })
        let crowd = String(repeating: "200 500 m 200.01 500.01 l 200.02 500 l h f ", count: 50_000)
        let dense = (0..<2_000).map { _ in "200,500" }.joined(separator: ",")
        let crowded = try #require(Self.read(#"{"/InkList":[[\#(dense)]],"/BS":{"/W":3},"/Rect":[0,0,612,792],"/BBox":[0,0,612,792]}"#,
                                             appearance: crowd)).drawing.strokes[0]
        #expect(crowded.points.allSatisfy { $0.pressure == nil })
        // A line stroked at a width is no outline: no pressure.
        let stroked = try #require(Self.read(entries, appearance: "3 w 100 500 m 300 500 l S")).drawing.strokes[0]
        #expect(stroked.points.allSatisfy { $0.pressure == nil })
    }
}
