import CanvasCore
import CanvasProtocol

/// A stroke arriving in parts: `drawing.addStroke` with `continued: true` sends some of its
/// points, and the part without it completes the stroke, which is then added as one stroke and
/// one undo step. A browser cannot send a frame of 128 KiB or more, and a long stroke's points
/// can be more than that.
///
/// The parts wait in the session, outside the drawing, as decoded points: whatever else a part
/// carried (unknown fields, the way its numbers were written) is not kept, so what waits is at
/// most `maxPointsPerStroke` points of 32 bytes each per session. Any other method that acts on
/// the session drops them (CanvasMethods), and so does a refused part: a stroke that went wrong
/// ends there, and the next `drawing.addStroke` starts a new one. Each part was acknowledged, so
/// the parts go into the session's snapshot too (SessionSnapshot): a stroke half sent when its
/// instance dies is finished on the instance that takes it over.
struct StrokeParts: Codable, Equatable {
    /// As the first part gave them; later parts must agree (the colour as a colour: `#FFD400`
    /// and `#ffd400` are one), and the stroke keeps the first part's spelling.
    let tool: InkTool
    let color: InkColor
    let width: Double
    /// Whether the stroke joins the drawing's last undo step (`joined`), as every part says.
    let joined: Bool
    var points: [InkPoint]

    init(tool: InkTool, color: InkColor, width: Double, joined: Bool = false, points: [InkPoint]) {
        self.tool = tool
        self.color = color
        self.width = width
        self.joined = joined
        self.points = points
    }

    private enum CodingKeys: String, CodingKey { case tool, color, width, joined, points }
    /// How snapshots written before parts were kept as points hold them: the first part's
    /// `style` and every part's `points`, as JSON.
    private enum EarlierKeys: String, CodingKey { case style, points }

    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        guard container.contains(.tool) else {
            // A session stored by an instance of the earlier version, taken over by this one
            // during an upgrade: its waiting parts are read as the stroke they make so far.
            let earlier = try decoder.container(keyedBy: EarlierKeys.self)
            var whole = try earlier.decode([String: JSONValue].self, forKey: .style)
            whole["points"] = .array(try earlier.decode([JSONValue].self, forKey: .points))
            let stroke: Stroke
            do {
                stroke = try Params(whole).decode(Stroke.self)
            } catch {
                throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: error.message))
            }
            self.init(tool: stroke.tool, color: stroke.color, width: stroke.width, points: stroke.points)
            return
        }
        // Absent in snapshots from before strokes could join, and written only when true, so
        // an instance of that version reads the parts of a stroke of its own kind as it did.
        self.init(tool: try container.decode(InkTool.self, forKey: .tool), color: try container.decode(InkColor.self, forKey: .color),
                  width: try container.decode(Double.self, forKey: .width),
                  joined: try container.decodeIfPresent(Bool.self, forKey: .joined) ?? false,
                  points: try container.decode([InkPoint].self, forKey: .points))
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(tool, forKey: .tool)
        try container.encode(color, forKey: .color)
        try container.encode(width, forKey: .width)
        if joined { try container.encode(joined, forKey: .joined) }
        try container.encode(points, forKey: .points)
    }

    func agrees(with part: Stroke) -> Bool {
        part.sameStyle(tool: tool, color: color, width: width)
    }
}

extension SessionParams {
    /// The whole stroke once the last part is in (or when it came in one request), or nil
    /// while parts are waiting (the reply then says how many points wait).
    ///
    /// A part that could never complete is refused at once, not when the last part comes: the
    /// stroke's points so far past `maxPointsPerStroke`, the drawing's past
    /// `maxPointsPerDrawing`, or a drawing that already has `maxStrokesPerDrawing` strokes.
    ///
    /// `joined` (the stroke joins the last undo step) is said by every part alike; a stroke that
    /// could not join is refused with its first part, as nothing a part waits through can
    /// change the drawing it would join.
    func assembleStroke(_ params: Params, _ session: inout ServiceSession) throws(ProtocolError) -> (stroke: Stroke, joined: Bool)? {
        let continued = try params.bool("continued", default: false)
        let joined = try params.bool("joined", default: false)
        guard continued || session.strokeParts != nil else { return (try stroke(params), joined) }
        try CanvasMethods.requireOpen(session)
        guard let count = Self.pointCount(params), count > 0 else {
            throw ProtocolError(.invalidParams, "points: a part needs at least one point", data: ["field": "points"])
        }
        // Each part is checked as a stroke of its own as it arrives, so a bad point is refused
        // with the part that carries it (its path within this part's `points`), not later.
        let part = try stroke(params)
        var parts = session.strokeParts ?? StrokeParts(tool: part.tool, color: part.color, width: part.width, joined: joined, points: [])
        guard parts.agrees(with: part) else {
            throw ProtocolError(.invalidParams, "a stroke's parts must all have the same tool, color and width; the stroke's earlier parts are dropped",
                                data: ["field": "continued"])
        }
        guard parts.joined == joined else {
            throw ProtocolError(.invalidParams, "joined: a stroke's parts must all say the same `joined`; the stroke's earlier parts are dropped",
                                data: ["field": "joined"])
        }
        if joined, session.strokeParts == nil, let refusal = session.canvas.canvas.editableDrawing?.joinRefusal(part) {
            throw Self.cannotJoin(refusal)
        }
        let strokePoints = parts.points.count + part.points.count
        if strokePoints > limits.maxPointsPerStroke { throw Self.tooLarge("points", strokePoints, limits.maxPointsPerStroke) }
        let drawing = session.canvas.drawing
        if drawing.strokes.count >= limits.maxStrokesPerDrawing {
            throw Self.tooLarge("strokes", drawing.strokes.count + 1, limits.maxStrokesPerDrawing)
        }
        let drawingPoints = drawing.pointCount + strokePoints
        if drawingPoints > limits.maxPointsPerDrawing { throw Self.tooLarge("points", drawingPoints, limits.maxPointsPerDrawing) }
        parts.points += part.points
        guard !continued else {
            session.strokeParts = parts
            return nil
        }
        session.strokeParts = nil
        do {
            return (try Stroke(tool: parts.tool, color: parts.color, width: parts.width, points: parts.points), parts.joined)
        } catch {
            preconditionFailure("parts already checked make a valid stroke: \(error)")
        }
    }

    static func cannotJoin(_ refusal: StrokeJoinRefusal) -> ProtocolError {
        ProtocolError(.invalidParams, "joined: \(refusal); nothing was changed",
                      data: ["field": "joined", "reason": .string(refusal.rawValue)])
    }

    /// One request's stroke (a whole stroke or a part), its point count checked before its
    /// points are decoded.
    private func stroke(_ params: Params) throws(ProtocolError) -> Stroke {
        if let count = Self.pointCount(params), count > limits.maxPointsPerStroke {
            throw Self.tooLarge("points", count, limits.maxPointsPerStroke)
        }
        if let stroke = Self.wellFormedStroke(params) { return stroke }
        return try params.decode(Stroke.self)
    }

    /// How many points the params carry; nil when `points` is not an array.
    private static func pointCount(_ params: Params) -> Int? {
        if let points = params.points { return points.count }
        if case .array(let points)? = params["points"] { return points.count }
        return nil
    }

    /// A stroke read straight from the parsed params when every field is there, of its type and
    /// within its bounds; nil for anything else, which `Params.decode` then reads and refuses
    /// with its exact field and message. The same stroke the decoder makes: unknown members are
    /// ignored, a null pressure is none, and an integral number is the decoder's reading of it
    /// written as an integer (so -0 is 0). The decoder writes the params out as JSON text and
    /// parses them again through Codable: for a stroke of 200 points that was most of
    /// `drawing.addStroke`'s time on the loop (issue 43: 1,140 µs against `canvas.state`'s 150).
    ///
    /// Points the parser read as numbers (`Params.points`, the usual case) are taken as they
    /// are, as the decoder would take them.
    static func wellFormedStroke(_ params: Params) -> Stroke? {
        guard case .string(let toolName)? = params["tool"], let tool = InkTool(rawValue: toolName),
              case .string(let colorName)? = params["color"], let color = try? InkColor(colorName),
              let width = params["width"].flatMap(number) else { return nil }
        if let parsed = params.points {
            var points: [InkPoint] = []
            points.reserveCapacity(parsed.count)
            for point in parsed.points {
                guard let made = try? InkPoint(x: decoded(point.x), y: decoded(point.y), pressure: point.pressure.number.map(decoded)) else { return nil }
                points.append(made)
            }
            return try? Stroke(tool: tool, color: color, width: width, points: points)
        }
        guard case .array(let list)? = params["points"] else { return nil }
        var points: [InkPoint] = []
        points.reserveCapacity(list.count)
        for item in list {
            guard case .object(let point) = item, let x = point["x"].flatMap(number), let y = point["y"].flatMap(number) else { return nil }
            var pressure: Double?
            switch point["pressure"] {
            case nil, .null?: pressure = nil
            case let value?:
                guard let read = number(value) else { return nil }
                pressure = read
            }
            guard let made = try? InkPoint(x: x, y: y, pressure: pressure) else { return nil }
            points.append(made)
        }
        return try? Stroke(tool: tool, color: color, width: width, points: points)
    }

    /// A finite JSON number as the decoder reads it; nil for anything else.
    private static func number(_ value: JSONValue) -> Double? {
        switch value {
        case .integer(let integer): return Double(integer)
        case .number(let double) where double.isFinite: return decoded(double)
        case .null, .bool, .string, .array, .object, .number: return nil
        }
    }

    /// A finite number as the decoder reads it: written as an integer when integral and below
    /// 1e15 (JSONCodec), which reads -0 as 0.
    private static func decoded(_ double: Double) -> Double { double == 0 ? 0 : double }
}
