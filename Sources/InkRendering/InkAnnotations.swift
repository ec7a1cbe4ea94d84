public import CanvasCore
import Foundation

/// Ink as standard PDF annotations, for other PDF tools to show and edit: each run of strokes
/// of one tool and colour as an `/Ink` annotation (its `/InkList` the strokes' centre
/// lines, one entry a stroke), each text as a `/FreeText`. The appearance of each is the ink a
/// flattened edit draws for it, outline for outline, so a viewer shows exactly our ink; the
/// drawing it was made from rides along, every number as it was submitted. A reopen uses that
/// drawing only while the entries another program may change (`/InkList`, `/Rect`, `/C`, `/BS`,
/// `/CA`, `/IT`; a text's `/Rect` and `/Contents`) are what the drawing makes of them: a change
/// made elsewhere, or a stored drawing that is not the annotation's ink, is seen, and the
/// annotation then reopens from what it says now.
public enum InkAnnotations {
    /// One annotation to add: its dictionary's entries (PDF syntax, user space), what its
    /// appearance draws (as a form: stroke operators in display points, then page `overlayPage`
    /// of a PDF of texts, one page a text, which all the texts of a save share, and with it
    /// their font), the box it covers in ink space, and its drawing.
    public struct Annotation: Sendable {
        public let dictionary: String
        public let strokes: [UInt8]
        public let overlay: [UInt8]
        public var overlayPage = 0
        public let box: [Double]
        public let source: [UInt8]
    }

    /// A page's place: its display size and the matrix from its ink space (display points,
    /// y up) to default user space.
    public struct Placement: Sendable {
        public let width: Double
        public let height: Double
        public let matrix: [Double]

        public init(width: Double, height: Double, matrix: [Double]) {
            precondition(matrix.count == 6, "a matrix is six numbers")
            self.width = width
            self.height = height
            self.matrix = matrix
        }

        /// A point in display points (y down) in user space.
        func user(_ x: Double, _ y: Double) -> (Double, Double) {
            let m = matrix, inkY = height - y
            return (m[0] * x + m[2] * inkY + m[4], m[1] * x + m[3] * inkY + m[5])
        }

        /// A point in user space in display points; nil when the matrix cannot be inverted.
        func display(_ x: Double, _ y: Double) -> (Double, Double)? {
            let m = matrix, determinant = m[0] * m[3] - m[1] * m[2]
            guard determinant != 0, determinant.isFinite else { return nil }
            let dx = x - m[4], dy = y - m[5]
            let inkX = (m[3] * dx - m[2] * dy) / determinant, inkY = (m[0] * dy - m[1] * dx) / determinant
            return (inkX, height - inkY)
        }

        /// The user-space rectangle around an ink-space box.
        func rect(_ box: [Double]) -> [Double] {
            let corners = [(box[0], box[1]), (box[2], box[1]), (box[0], box[3]), (box[2], box[3])].map { corner in
                user(corner.0, height - corner.1)
            }
            return [corners.map(\.0).min()!, corners.map(\.1).min()!, corners.map(\.0).max()!, corners.map(\.1).max()!]
        }
    }

    /// Consecutive strokes of one tool and colour: one `/Ink` each. Not split by width: a page
    /// written with a pen whose width changes from word to word (as recorded ink's often does)
    /// would be an annotation a word, each with its own appearance, stored drawing and their
    /// objects, about 400 bytes apiece (the recorded page: 30 annotations, 19.0 bytes a point
    /// in all; 9 and 16.7 so). Each stroke's appearance keeps its own width; `/BS /W` is the
    /// mean drawn over the run, which is what it already was for a pen that follows pressure.
    static func runs(_ strokes: [Stroke]) -> [[Stroke]] {
        var runs: [[Stroke]] = []
        for stroke in strokes {
            if let last = runs.last?.last, last.tool == stroke.tool, last.color == stroke.color {
                runs[runs.count - 1].append(stroke)
            } else {
                runs.append([stroke])
            }
        }
        return runs
    }

    /// What an `/Ink` of a run of strokes says: its entries, and the box it covers in ink space.
    /// Made from the strokes on the ink grid (`InkPrecision`), as the page draws them; `make`
    /// writes it, and `read` makes it again from a stored drawing to see that the annotation
    /// still says it.
    struct InkEntries {
        let fields: Fields
        let width: Double
        let highlighter: Bool
        let box: [Double]
        let drawn: [Stroke]

        init(_ run: [Stroke], on page: Placement) {
            drawn = InkPrecision.rounded(Drawing(strokes: run)).strokes
            let first = drawn[0]
            // The box reaches past the centre lines as far as the widest stroke's ink can.
            let widest = drawn.map(\.width).max()!
            let reach = (first.tool.followsPressure ? widest * PenProfile.maximumFactor / 2 : widest / 2) + 1
            let xs = drawn.flatMap { $0.points.map(\.x) }, ys = drawn.flatMap { $0.points.map(\.y) }
            box = [xs.min()! - reach, page.height - ys.max()! - reach, xs.max()! + reach, page.height - ys.min()! + reach]
            let inkList = drawn.map { stroke in
                stroke.points.flatMap { point in
                    let (x, y) = page.user(point.x, point.y)
                    return [x, y]
                }
            }
            // A viewer that draws the annotation itself draws one width: the mean of ours, over
            // every point of every stroke of the run. A run of one width is reckoned as it always
            // was (the width times the mean factor), so that the `/BS /W` a file already holds is
            // the one its stored drawing makes again, to the last decimal.
            func factors(_ stroke: Stroke) -> [Double] {
                stroke.points.map { first.tool.followsPressure ? PenProfile.factor(pressure: $0.pressure) : 1 }
            }
            let points = Double(drawn.map(\.points.count).reduce(0, +))
            if drawn.allSatisfy({ $0.width == first.width }) {
                width = first.width * drawn.flatMap(factors).reduce(0, +) / points
            } else {
                width = drawn.map { $0.width * factors($0).reduce(0, +) }.reduce(0, +) / points
            }
            highlighter = first.tool.highlights
            fields = Fields(inkList: inkList, rect: page.rect(box), color: Fields.components(first.color))
        }

        /// The entries as an annotation gives them now: the same text, number for number.
        func agrees(with found: Fields, width foundWidth: Double?, opacity: Double?, highlighter foundHighlighter: Bool) -> Bool {
            found.digest == fields.digest && foundWidth.map { Fields.number($0) } == Fields.number(width)
                && opacity.map { Fields.number($0) } == Fields.number(1) && foundHighlighter == highlighter
        }
    }

    /// What a `/FreeText` of a text says: its `/Rect`, and the box it covers in ink space. Made
    /// from the text on the ink grid, as `InkEntries`, for `make` and `read` alike.
    struct TextEntries {
        let fields: Fields
        let box: [Double]
        let drawn: TextAnnotation

        init(_ exact: TextAnnotation, on page: Placement) {
            let text = InkPrecision.rounded(Drawing(texts: [exact])).texts[0]
            drawn = text
            let lines = TextLayout.lines(of: text)
            let longest = Double(lines.map(\.count).max() ?? 0)
            let top = text.y - text.fontSize, bottom = text.y + Double(lines.count) * text.fontSize * 1.4 + 2
            box = [text.x - 2, page.height - bottom, text.x + longest * text.fontSize + 2, page.height - top]
            fields = Fields(rect: page.rect(box), contents: text.text)
        }
    }

    /// The drawing's annotations, strokes first and texts after them, as a form draws them:
    /// the appearance and the entries from the drawing on the ink grid, the stored drawing
    /// exactly as given.
    /// `carrying`: other programs' annotations the drawing replaces, each with the strokes it
    /// was loaded as: a run that starts with one of those strokes carries its author, subject,
    /// dates and name (`OtherInk.carried`).
    public static func make(_ drawing: Drawing, on page: Placement, carrying: [(strokes: [Stroke], carried: String)] = []) throws(RenderError) -> [Annotation] {
        var annotations: [Annotation] = []
        for run in runs(drawing.strokes) {
            let entries = InkEntries(run, on: page)
            let fields = entries.fields
            // Each number as the /InkList writes it, made once: the dictionary's text, and what a
            // reader parses back from it (below).
            let numbers = fields.inkList.map { line in line.map { Fields.number($0) } }
            var dictionary = "<< /Type /Annot /Subtype /Ink /F 4 /Rect \(fields.text(fields.rect)) /InkList [ "
            dictionary += numbers.map(Fields.array).joined(separator: " ")
            dictionary += " ] /C \(fields.text(fields.color, decimals: 3)) /CA 1 /BS << /W \(Fields.number(entries.width)) /S /S >>"
            if entries.highlighter { dictionary += " /IT /InkHighlight" }
            if let other = carrying.first(where: { $0.strokes.contains(run[0]) }), !other.carried.isEmpty { dictionary += " " + other.carried }
            dictionary += " /CanvasBridgeHash (\(fields.digest)) >>"
            // Where the /InkList just written gives a stroke's points back exactly (a client on
            // the grid), its stored drawing leaves them out (InkSource, version 3).
            let written = numbers.map { line in line.map { Double($0) ?? .nan } }
            annotations.append(Annotation(dictionary: dictionary, strokes: InkRenderer.strokeContent(entries.drawn), overlay: [],
                                          box: entries.box, source: InkSource.encode(Drawing(strokes: run), positions: positions(written, on: page))))
        }
        // Every text on a page of its own in one PDF: Cairo embeds the font subset they use
        // once, and the document gets one copy of it, not one a text.
        let texts = drawing.texts.map { TextEntries($0, on: page) }
        let overlay = texts.isEmpty ? [] : try InkRenderer.textPDF(pages: texts.map { [$0.drawn] }, width: page.width, height: page.height)
        for (index, (text, entries)) in zip(drawing.texts, texts).enumerated() {
            let fields = entries.fields, drawn = entries.drawn
            let color = Fields.components(text.color).map { Fields.number($0, decimals: 3) }
            let dictionary = "<< /Type /Annot /Subtype /FreeText /F 4 /Rect \(fields.text(fields.rect)) /Contents \(Fields.utf16(text.text))"
                + " /DA (/Helv \(Fields.number(drawn.fontSize)) Tf \(color.joined(separator: " ")) rg) /CanvasBridgeHash (\(fields.digest)) >>"
            annotations.append(Annotation(dictionary: dictionary, strokes: [], overlay: overlay, overlayPage: index, box: entries.box,
                                          source: InkSource.encode(Drawing(texts: [text]))))
        }
        return annotations
    }

    /// An `/InkList`'s points in display points, on the ink grid: where a stroke's positions are
    /// when its stored drawing leaves them out, and what a changed annotation reopens as. A
    /// point the page's matrix cannot place is left out.
    public static func positions(_ inkList: [[Double]], on page: Placement) -> [InkSource.Positions] {
        inkList.map { line in
            stride(from: 0, to: line.count - 1, by: 2).compactMap { index -> (x: Double, y: Double)? in
                guard let (x, y) = page.display(line[index], line[index + 1]) else { return nil }
                return ((x * 100).rounded() / 100, (y * 100).rounded() / 100)
            }
        }
    }

    /// The drawing an annotation of ours holds: its stored drawing while the annotation says
    /// what that drawing makes of it (`InkEntries`, `TextEntries`); otherwise what the annotation
    /// says now (an `/Ink`'s strokes from its `/InkList`, at its `/BS` width and `/C` colour,
    /// without pressure; a text's words and place from `/Contents` and `/Rect`). `changed` says
    /// which. `source` decodes the stored drawing, given the positions its `/InkList` gives back
    /// (`positions`); nil when it cannot be read (damaged, or an `/InkList` changed under a
    /// drawing that takes its positions from it): an `/Ink` then reopens from what it says, a
    /// `/FreeText` (whose size and colour only the drawing has) not at all.
    /// `model`: the stored drawing's first stroke's colour and width, read from its bytes alone
    /// (`InkSource.firstStroke`), for an annotation changed elsewhere: its colour keeps its name.
    public static func read(entries: [UInt8], source decode: (_ positions: [InkSource.Positions]) -> Drawing?,
                            model stored: () -> (color: InkColor, width: Double)? = { nil },
                            on page: Placement) -> (drawing: Drawing, changed: Bool)? {
        guard let object = try? JSONSerialization.jsonObject(with: Data(entries)) as? [String: Any] else { return nil }
        func number(_ value: Any?) -> Double? { (value as? Double) ?? (value as? Int).map(Double.init) ?? (value as? NSNumber)?.doubleValue }
        func numbers(_ value: Any?) -> [Double]? { (value as? [Any])?.compactMap(number) }
        let rect = numbers(object["/Rect"]) ?? []
        switch object["/Subtype"] as? String {
        case "/Ink":
            let inkList = (object["/InkList"] as? [Any])?.compactMap(numbers) ?? []
            let color = numbers(object["/C"]) ?? []
            let fields = Fields(inkList: inkList, rect: rect, color: color)
            let foundWidth = (object["/BS"] as? [String: Any]).flatMap { number($0["/W"]) }
            let highlighted = (object["/IT"] as? String) == "/InkHighlight"
            let placed = positions(inkList, on: page)
            let source = decode(placed)
            if let source, !source.strokes.isEmpty, source.texts.isEmpty,
               InkEntries(source.strokes, on: page).agrees(with: fields, width: foundWidth, opacity: number(object["/CA"]), highlighter: highlighted) {
                return (source, false)
            }
            if let source, source.strokes.isEmpty { return nil }
            // Changed elsewhere: the drawing's own bytes still name the colour and give the width.
            let model = source?.strokes.first.map { (color: $0.color, width: $0.width) } ?? stored()
            let width = min(max(foundWidth ?? model?.width ?? 1,
                                DrawingLimits.strokeWidth.lowerBound), DrawingLimits.strokeWidth.upperBound)
            let tool = InkTool.forMark(highlighting: highlighted)
            // The colour keeps its name while /C is still that colour.
            var inkColor = model?.color ?? InkColor.black
            if color.count == 3, model.map({ fields.text(color, decimals: 3) != fields.text(Fields.components($0.color), decimals: 3) }) ?? true {
                inkColor = Self.color(color)
            }
            let strokes = placed.compactMap { line -> Stroke? in
                let points = line.compactMap { try? InkPoint(x: $0.x, y: $0.y) }
                return points.isEmpty ? nil : try? Stroke(tool: tool, color: inkColor, width: (width * 100).rounded() / 100, points: points)
            }
            return (Drawing(strokes: strokes), true)
        case "/FreeText":
            var contents = object["/Contents"] as? String ?? ""
            if contents.hasPrefix("u:") { contents = String(contents.dropFirst(2)) }
            let fields = Fields(rect: rect, contents: contents)
            guard let source = decode([]) else { return nil }
            if source.strokes.isEmpty, source.texts.count == 1,
               TextEntries(source.texts[0], on: page).fields.digest == fields.digest {
                return (source, false)
            }
            guard let model = source.texts.first, rect.count == 4,
                  let corner = page.display(rect[0], rect[3]), let other = page.display(rect[2], rect[1]) else { return nil }
            // The box starts 2 pt left of the text and a line above it (`make`).
            let x = min(corner.0, other.0) + 2, y = min(corner.1, other.1) + model.fontSize
            guard let text = try? TextAnnotation(text: contents.isEmpty ? model.text : contents, x: (x * 100).rounded() / 100,
                                                 y: (y * 100).rounded() / 100, fontSize: model.fontSize, color: model.color) else { return nil }
            return (Drawing(texts: [text]), true)
        default:
            return nil
        }
    }

    /// Another program's `/Ink`, loaded as strokes (`readOther`).
    public struct OtherInk: Sendable {
        public let drawing: Drawing
        /// The position in /Annots of its `/Popup`, which leaves the page with it.
        public let popup: Int?
        /// Its author, subject, dates, name and note (`/Contents`, `/RC`) as PDF entries
        /// (`/T <…> /M <…>`), which the annotation that replaces it carries.
        public let carried: String
    }

    /// Another program's `/Ink` as strokes, from what it says (`entries`, qpdf's JSON of them,
    /// `ps_page_annotations`): each `/InkList` entry a stroke, its numbers as the file writes
    /// them (taken from user space to display points, not rounded), at `/BS /W` (else
    /// `/Border`'s third number, else 1 pt), in `/C`'s colour (grey, RGB or CMYK; none: black), a
    /// highlighter when `/IT` is `/InkHighlight`, its appearance multiplies or it is translucent
    /// (`/CA` below 1: its colour then as it shows over white). Where its
    /// appearance (`appearance`, its content) fills an outline whose width varies along the
    /// line, as pressure-sensitive tools draw, that width comes back as pressure
    /// (`AppearanceWidths`). Nil when there is no line to load (no `/InkList`: an appearance
    /// alone), or the annotation is hidden (`/F` 2 or 32): it then stays on the page as it is.
    public static func readOther(entries: [UInt8], appearance: [UInt8], on page: Placement) -> OtherInk? {
        guard let object = try? JSONSerialization.jsonObject(with: Data(entries)) as? [String: Any] else { return nil }
        func number(_ value: Any?) -> Double? { (value as? Double) ?? (value as? Int).map(Double.init) ?? (value as? NSNumber)?.doubleValue }
        func numbers(_ value: Any?) -> [Double]? { (value as? [Any])?.compactMap(number) }
        let inkList = ((object["/InkList"] as? [Any])?.compactMap(numbers) ?? []).filter { $0.count >= 2 }
        guard !inkList.isEmpty else { return nil }
        // Hidden (flag 2) or not to be shown (32): not ink anyone sees, and not made visible.
        if let flags = object["/F"] as? Int, flags & (2 | 32) != 0 { return nil }
        let border = numbers(object["/Border"]).flatMap { $0.count >= 3 ? $0[2] : nil }
        let drawnWidth = (object["/BS"] as? [String: Any]).flatMap { number($0["/W"]) } ?? border ?? 1
        let width = min(max(drawnWidth, DrawingLimits.strokeWidth.lowerBound), DrawingLimits.strokeWidth.upperBound)
        // Translucent ink (/CA below 1) is a highlighter in the colour it shows over white: a
        // multiply by 1 - CA × (1 - c) is what a translucent multiply does exactly, and what a
        // translucent pen does over white paper (over dark content it stays darker).
        let opacity = min(max(number(object["/CA"]) ?? 1, 0), 1)
        let highlighter = (object["/IT"] as? String) == "/InkHighlight" || (object["/CanvasBridgeMultiply"] as? Bool) == true || opacity < 0.999
        let color = Self.color((Self.components(numbers(object["/C"]) ?? [])).map { 1 - opacity * (1 - $0) })
        let lines: [[InkPoint]] = inkList.map { line in
            stride(from: 0, to: line.count - 1, by: 2).compactMap { index -> InkPoint? in
                guard let (x, y) = page.display(line[index], line[index + 1]) else { return nil }
                return try? InkPoint(x: x, y: y)
            }
        }
        // Pressure, where the appearance says the width varies (a pen's, never a highlighter's).
        var widths: [(width: Double, pressures: [Double])?] = Array(repeating: nil, count: lines.count)
        if !highlighter, !appearance.isEmpty {
            let placed = AppearanceWidths.Placement(bbox: numbers(object["/BBox"]) ?? [], matrix: numbers(object["/Matrix"]) ?? [1, 0, 0, 1, 0, 0],
                                                    rect: numbers(object["/Rect"]) ?? [])
            widths = AppearanceWidths.pressures(appearance, placed: placed, inkList: inkList, width: width)
        }
        let tool = InkTool.forMark(highlighting: highlighter)
        let strokes = zip(lines, widths).compactMap { (points, varying) -> Stroke? in
            guard !points.isEmpty else { return nil }
            // (a point the page's matrix could not place leaves the pressures unmatched: none)
            if let varying, varying.pressures.count == points.count,
               let pressed = try? zip(points, varying.pressures).map({ (point, pressure) throws(DrawingValidationError) in
                   try InkPoint(x: point.x, y: point.y, pressure: pressure)
               }),
               let stroke = try? Stroke(tool: tool, color: color, width: min(max(varying.width, DrawingLimits.strokeWidth.lowerBound),
                                                                                 DrawingLimits.strokeWidth.upperBound), points: pressed) {
                return stroke
            }
            return try? Stroke(tool: tool, color: color, width: width, points: points)
        }
        guard !strokes.isEmpty else { return nil }
        var carried: [String] = []
        for key in ["/T", "/Subj", "/M", "/NM", "/CreationDate", "/Contents", "/RC"] {
            guard let value = object[key] as? String else { continue }
            if value.hasPrefix("u:") {
                carried.append("\(key) \(Fields.utf16(String(value.dropFirst(2))))")
            } else if value.hasPrefix("b:"), value.dropFirst(2).allSatisfy(\.isHexDigit) {
                carried.append("\(key) <\(value.dropFirst(2))>")
            }
        }
        return OtherInk(drawing: Drawing(strokes: strokes), popup: (object["/CanvasBridgePopup"] as? Int),
                        carried: carried.joined(separator: " "))
    }

    /// A PDF colour (`/C`: none, grey, RGB or CMYK) as red, green and blue from 0 to 1: black
    /// when there is none.
    static func components(_ components: [Double]) -> [Double] {
        let unit = components.map { min(max($0, 0), 1) }
        switch unit.count {
        case 1: return [unit[0], unit[0], unit[0]]
        case 3: return unit
        case 4: return unit.prefix(3).map { (1 - $0) * (1 - unit[3]) }
        default: return [0, 0, 0]
        }
    }

    /// Red, green and blue from 0 to 1 as ink's colour.
    static func color(_ rgb: [Double]) -> InkColor {
        let hex = rgb.map { String(format: "%02X", Int((min(max($0, 0), 1) * 255).rounded())) }.joined()
        return (try? InkColor("#" + hex)) ?? InkColor.black
    }

    /// What the digest covers, each number as written (2 decimals; a colour 3).
    struct Fields {
        var inkList: [[Double]] = []
        var rect: [Double] = []
        var color: [Double] = []
        var contents: String?

        init(inkList: [[Double]], rect: [Double], color: [Double]) {
            self.inkList = inkList
            self.rect = rect
            self.color = color
        }

        /// A colour as PDF gives it: red, green and blue from 0 to 1.
        static func components(_ color: InkColor) -> [Double] {
            [Double(color.red), Double(color.green), Double(color.blue)].map { $0 / 255 }
        }

        init(rect: [Double], contents: String) {
            self.rect = rect
            self.contents = contents
        }

        static func number(_ value: Double, decimals: Int = 2) -> String {
            var bytes: [UInt8] = []
            DecimalText.append(value, decimals: decimals, json: true, to: &bytes)
            return String(decoding: bytes, as: UTF8.self)
        }

        func text(_ values: [Double]) -> String { text(values, decimals: 2) }

        func text(_ values: [Double], decimals: Int) -> String { Self.array(values.map { Self.number($0, decimals: decimals) }) }

        /// Numbers already written, as a PDF array.
        static func array(_ numbers: [String]) -> String { "[ " + numbers.joined(separator: " ") + " ]" }

        /// A PDF text string in UTF-16BE with its byte-order mark, as hex.
        static func utf16(_ text: String) -> String {
            "<FEFF" + text.utf16.map { String(format: "%04X", $0) }.joined() + ">"
        }

        /// FNV-1a (64 bits) of the fields as written: it tells a change made elsewhere, which
        /// is all it is for (not a defence against someone forging one).
        var digest: String {
            var written = "ink" + inkList.map(text).joined()
            written += "rect" + text(rect) + "color" + text(color, decimals: 3)
            if let contents { written += "contents" + contents }
            return String(InkSource.checksum(Array(written.utf8)[...]), radix: 16)
        }
    }
}
