/// Why a stroke cannot join the drawing's last undo step (`DrawingEdit.addStroke` with
/// `joiningLastStep`). A gesture longer than a server takes in one stroke is sent as several
/// strokes, each after the first starting where the one before ended; joined, they are undone
/// and redone as the one gesture they were drawn as. Only a stroke that really continues the
/// last one joins, so nothing else can be folded into someone's step by mistake.
public enum StrokeJoinRefusal: String, Hashable, Sendable, CaseIterable, CustomStringConvertible {
    /// Something was undone, and redo would bring it back: the step on top is not the last
    /// one drawn.
    case undone
    /// No undo step, or the last one did more than add strokes (texts, an erase, a clear).
    case notAfterStroke
    /// The tool, width or colour is not the last stroke's.
    case style
    /// The stroke's first point is not where the last stroke ended.
    case gap

    public var description: String {
        switch self {
        case .undone: return "the last step was undone; a stroke joins only the step drawn last"
        case .notAfterStroke: return "the last step did not add strokes; there is no gesture to continue"
        case .style: return "a joined stroke needs the last stroke's tool, width and color"
        case .gap: return "a joined stroke starts at the point where the last stroke ended"
        }
    }
}

extension Stroke {
    /// Whether `other` is drawn with the same tool, width and colour; a colour is compared as a
    /// colour (`#FFD400`, `#ffd400` and the name of that colour are one), as stroke parts are.
    public func sameStyle(as other: Stroke) -> Bool {
        sameStyle(tool: other.tool, color: other.color, width: other.width)
    }

    /// `sameStyle(as:)` against a style held apart from any stroke (a stroke's waiting parts).
    public func sameStyle(tool: InkTool, color: InkColor, width: Double) -> Bool {
        self.tool == tool && self.width == width
            && (self.color.red, self.color.green, self.color.blue) == (color.red, color.green, color.blue)
    }
}
