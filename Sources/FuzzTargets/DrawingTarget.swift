import CanvasCore
import CanvasProtocol
import InkRendering

/// The drawing validator: JSON edits decoded as the dispatcher decodes them, applied to an
/// editable drawing, the result rendered.
///
/// An input is edits separated by newlines; each starts with a byte naming its kind (`s`
/// stroke, `t` text, `e` erase, `m` move text, `d` a whole drawing as `document.flatten` takes
/// it, `u` undo, `r` redo, `c` clear) followed by its JSON params.
///
/// Besides crashes, it traps when a value the validator accepted is one it should not have
/// (a coordinate, width or size that is not finite or out of range), when a drawing does not
/// survive its own JSON, or when undo does not give back the drawing before the edit.
public enum DrawingTarget {
    public static func run(_ input: [UInt8]) {
        var editable = EditableDrawing(historyLimit: 16)
        for line in input.split(separator: UInt8(ascii: "\n")).prefix(32) {
            guard let kind = line.first else { continue }
            let json = Array(line.dropFirst())
            let params = (try? JSONCodec.parse(json))?.objectValue.map(Params.init)
            let edit: DrawingEdit?
            switch kind {
            case UInt8(ascii: "s"): edit = (try? params?.decode(Stroke.self)).map { DrawingEdit.addStroke($0) }
            case UInt8(ascii: "t"): edit = (try? params?.decode(TextAnnotation.self)).map(DrawingEdit.addText)
            case UInt8(ascii: "e"): edit = (try? params?.decode(EraseRequest.self)).map(DrawingEdit.erase)
            case UInt8(ascii: "m"):
                if let params, let index = try? params.integer("index", in: 0...1_000), let x = try? params.number("x"),
                   let y = try? params.number("y") {
                    edit = .moveText(index: Int(index), x: x, y: y)
                } else {
                    edit = nil
                }
            case UInt8(ascii: "d"):
                if let drawing = try? params?.decode(Drawing.self) {
                    validate(drawing)
                    editable = EditableDrawing(drawing, historyLimit: 16)
                }
                edit = nil
            case UInt8(ascii: "u"): edit = .undo
            case UInt8(ascii: "r"): edit = .redo
            case UInt8(ascii: "c"): edit = .clear
            default: edit = nil
            }
            guard let edit else { continue }
            let before = editable.drawing
            guard let changed = try? editable.apply(edit) else {
                if editable.drawing != before { fatalError("a refused edit changed the drawing") }
                continue
            }
            validate(editable.drawing)
            if changed, edit != .undo, edit != .redo {
                var probe = editable
                _ = try? probe.apply(.undo)
                if probe.drawing != before { fatalError("undo after \(edit) did not give the drawing back") }
            }
        }
        let drawing = editable.drawing
        // The drawing must round-trip through the wire's JSON exactly, as drawing.get promises.
        guard let json = try? JSONCodec.value(of: drawing), let back = try? JSONCodec.decode(Drawing.self, from: json) else {
            fatalError("an accepted drawing does not survive JSON")
        }
        if back != drawing { fatalError("JSON changed the drawing") }
        let reparsed = try? JSONCodec.parse(JSONCodec.serialize(json))
        if reparsed != json { fatalError("the JSON writer and reader disagree on \(json)") }
        // And Cairo must draw it without complaint at a small size (huge coordinates included).
        if drawing.hasContent { _ = try? InkRenderer.png(drawing, width: 64, height: 48) }
    }

    private static func validate(_ drawing: Drawing) {
        for stroke in drawing.strokes {
            guard !stroke.points.isEmpty, stroke.width.isFinite, stroke.width > 0 else { fatalError("stroke accepted with width \(stroke.width)") }
            for point in stroke.points {
                guard point.x.isFinite, point.y.isFinite, point.pressure.map({ $0.isFinite && $0 >= 0 && $0 <= 1 }) ?? true else {
                    fatalError("point accepted: \(point)")
                }
            }
        }
        for text in drawing.texts {
            guard text.x.isFinite, text.y.isFinite, text.fontSize >= 8, text.fontSize <= 48 else { fatalError("text accepted: \(text)") }
        }
    }
}
