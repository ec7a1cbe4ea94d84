/// The tools that leave ink. The eraser removes ink and is never stored in a stroke.
public enum InkTool: String, Codable, Sendable, CaseIterable {
    case pen
    case highlighter

    // What the rest of the house asks of a tool, each an exhaustive switch: a tool added here is
    // a compile error in each until it is said, never a pen by default somewhere downstream.

    /// Whether its width follows the pencil's pressure (the pen's profile) rather than staying
    /// the width set.
    public var followsPressure: Bool {
        switch self {
        case .pen: true
        case .highlighter: false
        }
    }

    /// Whether it marks as a highlighter does: translucent, and in a PDF an `/InkHighlight`.
    public var highlights: Bool {
        switch self {
        case .pen: false
        case .highlighter: true
        }
    }

    /// The tool a mark made elsewhere is taken for: a PDF's ink says only whether it highlights.
    public static func forMark(highlighting: Bool) -> InkTool { highlighting ? .highlighter : .pen }
}

/// One sample of a stroke, in display points of the target page (origin top-left, y down).
public struct InkPoint: Hashable, Sendable, Codable {
    public let x: Double
    public let y: Double
    /// Normalised pencil force, 0...1; absent when the input had none.
    public let pressure: Double?

    @inlinable
    public init(x: Double, y: Double, pressure: Double? = nil) throws(DrawingValidationError) {
        try DrawingLimits.check(x, "x", in: DrawingLimits.coordinate)
        try DrawingLimits.check(y, "y", in: DrawingLimits.coordinate)
        if let pressure { try DrawingLimits.check(pressure, "pressure", in: DrawingLimits.pressure) }
        self.x = x
        self.y = y
        self.pressure = pressure
    }

    private enum CodingKeys: String, CodingKey { case x, y, pressure }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        let (x, y) = (try container.decode(Double.self, forKey: .x), try container.decode(Double.self, forKey: .y))
        let pressure = try container.decodeIfPresent(Double.self, forKey: .pressure)
        self = try decoder.validated { try InkPoint(x: x, y: y, pressure: pressure) }
    }
}

/// A pen or highlighter stroke: the points as drawn, in order.
public struct Stroke: Hashable, Sendable, Codable {
    public let tool: InkTool
    public let color: InkColor
    public let width: Double
    public let points: [InkPoint]

    public init(tool: InkTool, color: InkColor, width: Double, points: [InkPoint]) throws(DrawingValidationError) {
        try DrawingLimits.check(width, "width", in: DrawingLimits.strokeWidth)
        guard !points.isEmpty else { throw .emptyPoints }
        self.tool = tool
        self.color = color
        self.width = width
        self.points = points
    }

    /// A piece of this stroke: same tool, colour and width. Used by the partial eraser,
    /// whose pieces come from points that were already valid.
    func withPoints(_ points: [InkPoint]) -> Stroke {
        precondition(!points.isEmpty, "an erased piece must keep at least one point")
        return try! Stroke(tool: tool, color: color, width: width, points: points)
    }

    private enum CodingKeys: String, CodingKey { case tool, color, width, points }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        let tool = try container.decode(InkTool.self, forKey: .tool)
        let color = try container.decode(InkColor.self, forKey: .color)
        let width = try container.decode(Double.self, forKey: .width)
        let points = try container.decode([InkPoint].self, forKey: .points)
        self = try decoder.validated { try Stroke(tool: tool, color: color, width: width, points: points) }
    }
}
