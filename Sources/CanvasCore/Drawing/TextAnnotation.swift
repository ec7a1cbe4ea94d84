/// Text placed on the page. (`x`, `y`) is the top-left corner of the first line's box, in
/// display points of the target page.
public struct TextAnnotation: Hashable, Sendable, Codable {
    public let text: String
    public let x: Double
    public let y: Double
    public let fontSize: Double
    public let color: InkColor

    public init(text: String, x: Double, y: Double, fontSize: Double, color: InkColor) throws(DrawingValidationError) {
        guard !text.isEmpty else { throw .emptyText }
        try DrawingLimits.check(x, "x", in: DrawingLimits.coordinate)
        try DrawingLimits.check(y, "y", in: DrawingLimits.coordinate)
        try DrawingLimits.check(fontSize, "fontSize", in: DrawingLimits.fontSize)
        self.text = text
        self.x = x
        self.y = y
        self.fontSize = fontSize
        self.color = color
    }

    /// The same annotation with its corner at (x, y): how a text is moved or nudged.
    public func placed(x: Double, y: Double) throws(DrawingValidationError) -> TextAnnotation {
        try TextAnnotation(text: text, x: x, y: y, fontSize: fontSize, color: color)
    }

    private enum CodingKeys: String, CodingKey { case text, x, y, fontSize, color }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        let text = try container.decode(String.self, forKey: .text)
        let (x, y) = (try container.decode(Double.self, forKey: .x), try container.decode(Double.self, forKey: .y))
        let fontSize = try container.decode(Double.self, forKey: .fontSize)
        let color = try container.decode(InkColor.self, forKey: .color)
        self = try decoder.validated { try TextAnnotation(text: text, x: x, y: y, fontSize: fontSize, color: color) }
    }
}
