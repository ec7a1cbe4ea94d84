/// A change to a placed text, as the original design's controls make it: the arrows move or
/// nudge it, A−/A+ resize it (8 to 48 pt), and it can be recoloured or given new words. Fields
/// left nil keep what the text has; a nudge (`dx`, `dy`) is added after any move.
public struct TextChange: Hashable, Sendable {
    public var x: Double?
    public var y: Double?
    public var dx: Double?
    public var dy: Double?
    public var fontSize: Double?
    public var color: InkColor?
    public var text: String?

    public init(x: Double? = nil, y: Double? = nil, dx: Double? = nil, dy: Double? = nil, fontSize: Double? = nil,
                color: InkColor? = nil, text: String? = nil) {
        self.x = x
        self.y = y
        self.dx = dx
        self.dy = dy
        self.fontSize = fontSize
        self.color = color
        self.text = text
    }
}

extension TextAnnotation {
    /// This text with `change` applied, checked as a new text would be.
    public func changed(_ change: TextChange) throws(DrawingValidationError) -> TextAnnotation {
        try TextAnnotation(text: change.text ?? text,
                           x: (change.x ?? x) + (change.dx ?? 0), y: (change.y ?? y) + (change.dy ?? 0),
                           fontSize: change.fontSize ?? fontSize, color: change.color ?? color)
    }
}
