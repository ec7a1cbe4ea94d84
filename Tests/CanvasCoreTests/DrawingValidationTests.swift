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

    @Test("named colours have CSS's values, as a web page drawing with them shows them")
    func cssNames() throws {
        let css = ["black": "#000000", "blue": "#0000FF", "red": "#FF0000", "purple": "#800080",
                   "green": "#008000", "yellow": "#FFFF00", "orange": "#FFA500", "white": "#FFFFFF"]
        #expect(Set(InkColor.named.keys) == Set(css.keys))
        for (name, hex) in css {
            let named = try InkColor(name), spelled = try InkColor(hex)
            #expect((named.red, named.green, named.blue) == (spelled.red, spelled.green, spelled.blue), "\(name)")
        }
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

        // A refused value is a DecodingError at its own path, which the service reports as
        // `data.field`, with words a client can act on.
        let badWidth = #"{"tool":"pen","color":"blue","width":0,"points":[{"x":1,"y":2}]}"#
        #expect(failure(Stroke.self, badWidth) == FieldFailure("width", "width is 0.0, outside 0.1...200.0"))
        let noPoints = #"{"tool":"pen","color":"blue","width":2,"points":[]}"#
        #expect(failure(Stroke.self, noPoints) == FieldFailure("points", "a stroke needs at least one point"))
        let badTool = #"{"tool":"eraser","color":"blue","width":2,"points":[{"x":1,"y":2}]}"#
        #expect(failure(Stroke.self, badTool) == FieldFailure("tool", #""eraser" is not one of pen, highlighter"#))
        let badColor = #"{"text":"a","x":0,"y":0,"fontSize":12,"color":"mauve"}"#
        #expect(failure(TextAnnotation.self, badColor) == FieldFailure("color", #"colour "mauve" is neither a named colour nor #RRGGBB"#))
        let farPoint = #"{"strokes":[{"tool":"pen","color":"blue","width":2,"points":[{"x":1,"y":2},{"x":1,"y":1e7}]}]}"#
        #expect(failure(Drawing.self, farPoint)?.path == "strokes[0].points[1].y")
        let badMode = #"{"x":1,"y":1,"radius":2,"mode":"smudge"}"#
        #expect(failure(EraseRequest.self, badMode) == FieldFailure("mode", #""smudge" is not one of stroke, partial"#))
    }
}

/// Where a decode failed, as a dotted path (`points[1].y`), and why.
private struct FieldFailure: Equatable {
    let path: String
    let message: String
    init(_ path: String, _ message: String) {
        self.path = path
        self.message = message
    }
}

private func failure<T: Decodable>(_ type: T.Type, _ json: String) -> FieldFailure? {
    do {
        _ = try JSONDecoder().decode(T.self, from: Data(json.utf8))
        return nil
    } catch DecodingError.dataCorrupted(let context) {
        let path = context.codingPath.map { $0.intValue.map { "[\($0)]" } ?? $0.stringValue }.joined(separator: ".")
        return FieldFailure(path.replacingOccurrences(of: ".[", with: "["), context.debugDescription)
    } catch {
        return FieldFailure("", "\(error)")
    }
}
