import CanvasCore
import Foundation
import Testing

@Suite("Drawing values refuse bad input")
struct DrawingValidationTests {
    @Test("non-finite coordinates are refused", arguments: [Double.nan, .infinity, -.infinity])
    func nonFinite(value: Double) {
        #expect(throws: DrawingValidationError.notFinite(field: "x")) { try InkPoint(x: value, y: 0) }
        #expect(throws: DrawingValidationError.notFinite(field: "y")) { try InkPoint(x: 0, y: value) }
        #expect(throws: DrawingValidationError.notFinite(field: "pressure")) { try InkPoint(x: 0, y: 0, pressure: value) }
        #expect(throws: DrawingValidationError.notFinite(field: "fontSize")) {
            try TextAnnotation(text: "a", x: 0, y: 0, fontSize: value, color: .black)
        }
        #expect(throws: DrawingValidationError.notFinite(field: "radius")) {
            try EraseRequest(x: 0, y: 0, radius: value, mode: .stroke)
        }
    }

    @Test("widths, pressures and font sizes out of range are refused")
    func outOfRange() throws {
        let point = try InkPoint(x: 1, y: 1)
        for width in [0, -1, 0.05, 200.5, 1e9] {
            #expect(throws: DrawingValidationError.self) { try Stroke(tool: .pen, color: .black, width: width, points: [point]) }
        }
        for pressure in [-0.01, 1.01] {
            #expect(throws: DrawingValidationError.self) { try InkPoint(x: 0, y: 0, pressure: pressure) }
        }
        for size in [7.99, 48.01, 0] {
            #expect(throws: DrawingValidationError.self) {
                try TextAnnotation(text: "a", x: 0, y: 0, fontSize: size, color: .black)
            }
        }
        #expect(throws: DrawingValidationError.self) { try InkPoint(x: 2e6, y: 0) }
        // The bounds themselves are allowed.
        _ = try Stroke(tool: .pen, color: .black, width: 0.1, points: [point])
        _ = try Stroke(tool: .pen, color: .black, width: 200, points: [point])
        _ = try TextAnnotation(text: "a", x: 0, y: 0, fontSize: 8, color: .black)
        _ = try TextAnnotation(text: "a", x: 0, y: 0, fontSize: 48, color: .black)
    }

    @Test("empty strokes and empty texts are refused")
    func empty() {
        #expect(throws: DrawingValidationError.emptyPoints) { try Stroke(tool: .pen, color: .black, width: 2, points: []) }
        #expect(throws: DrawingValidationError.emptyText) {
            try TextAnnotation(text: "", x: 0, y: 0, fontSize: 12, color: .black)
        }
    }

    @Test("colours are named or #RRGGBB, and keep their spelling")
    func colors() throws {
        for bad in ["", "blu", "#12345", "#1234567", "#GGGGGG", "0000FF", "Blue", "#00 0FF"] {
            #expect(throws: DrawingValidationError.invalidColor(bad)) { try InkColor(bad) }
        }
        let hex = try InkColor("#fF8000")
        #expect((hex.red, hex.green, hex.blue) == (0xFF, 0x80, 0x00))
        #expect(hex.rawValue == "#fF8000")
        for name in ["blue", "black", "red", "purple"] { _ = try InkColor(name) }
    }

    @Test("decoding validates, so bad JSON never becomes a value")
    func decoding() throws {
        let decoder = JSONDecoder()
        let good = ##"{"strokes":[{"tool":"pen","color":"blue","width":2,"points":[{"x":1,"y":2,"pressure":0.5}]}],"texts":[{"text":"hé","x":3,"y":4,"fontSize":12,"color":"#FF0000"}]}"##
        let drawing = try decoder.decode(Drawing.self, from: Data(good.utf8))
        #expect(drawing.strokes.count == 1 && drawing.texts.count == 1)
        #expect(drawing.strokes[0].points[0] == (try InkPoint(x: 1, y: 2, pressure: 0.5)))
        // Encoding and decoding again gives exactly what was drawn.
        #expect(try decoder.decode(Drawing.self, from: JSONEncoder().encode(drawing)) == drawing)
        // Absent lists are empty lists.
        #expect(try decoder.decode(Drawing.self, from: Data("{}".utf8)) == .empty)

        let badWidth = #"{"tool":"pen","color":"blue","width":0,"points":[{"x":1,"y":2}]}"#
        #expect(throws: DrawingValidationError.self) { try decoder.decode(Stroke.self, from: Data(badWidth.utf8)) }
        let noPoints = #"{"tool":"pen","color":"blue","width":2,"points":[]}"#
        #expect(throws: DrawingValidationError.emptyPoints) { try decoder.decode(Stroke.self, from: Data(noPoints.utf8)) }
        let badTool = #"{"tool":"eraser","color":"blue","width":2,"points":[{"x":1,"y":2}]}"#
        #expect(throws: DecodingError.self) { try decoder.decode(Stroke.self, from: Data(badTool.utf8)) }
        let badColor = #"{"text":"a","x":0,"y":0,"fontSize":12,"color":"mauve"}"#
        #expect(throws: DrawingValidationError.invalidColor("mauve")) {
            try decoder.decode(TextAnnotation.self, from: Data(badColor.utf8))
        }
    }
}
