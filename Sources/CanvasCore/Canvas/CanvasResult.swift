/// How a drawing left the screen.
public enum CanvasResultAction: String, Codable, Sendable, CaseIterable {
    case submitted
    case minimized
    case cancelled
}

/// What the web layer is told when a canvas is submitted, minimized or cancelled:
/// `CanvasResult { action, imageData?, hasContent }`.
public struct CanvasResult: Hashable, Sendable, Codable {
    public var action: CanvasResultAction
    /// A base64 PNG of the drawing, when the caller asked for one; the service fills it in.
    public var imageData: String?
    /// True exactly when the drawing has a stroke or a text.
    public var hasContent: Bool

    public init(action: CanvasResultAction, imageData: String? = nil, hasContent: Bool) {
        self.action = action
        self.imageData = imageData
        self.hasContent = hasContent
    }
}

/// Who made something happen: a client's request, the pencil's double-tap, or the timer
/// that ends a timed transition.
public enum Cause: String, Codable, Sendable, CaseIterable {
    case client
    case pencil
    case timer
}
