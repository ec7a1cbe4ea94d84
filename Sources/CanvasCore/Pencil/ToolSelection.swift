/// The tools a user holds on the canvas, the eraser among them.
public enum CanvasTool: String, Codable, Sendable, CaseIterable {
    case pen
    case highlighter
    case eraser

    public init(_ ink: InkTool) {
        switch ink {
        case .pen: self = .pen
        case .highlighter: self = .highlighter
        }
    }
}

/// The tool in hand and the one before it, which `switchPrevious` and `switchEraser` go back to.
///
/// A new session holds the pen with the eraser as the previous tool, so the first
/// `switchPrevious` double-tap reaches the eraser as it does on an iPad.
public struct ToolSelection: Hashable, Sendable, Codable {
    public private(set) var current: CanvasTool
    public private(set) var previous: CanvasTool

    public init(current: CanvasTool = .pen, previous: CanvasTool = .eraser) {
        self.current = current
        self.previous = previous
    }

    /// The user picked up `tool` (by drawing or erasing with it). Returns whether anything changed.
    @discardableResult
    public mutating func use(_ tool: CanvasTool) -> Bool {
        guard tool != current else { return false }
        previous = current
        current = tool
        return true
    }

    /// `switchEraser`: to the eraser, or from it back to the tool before.
    public mutating func switchEraser() {
        if current == .eraser { swap(&current, &previous) } else { use(.eraser) }
    }

    /// `switchPrevious`: trade the tool in hand for the one before.
    public mutating func switchPrevious() {
        swap(&current, &previous)
    }
}
