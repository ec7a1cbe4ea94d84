/// Why a double-tap did nothing.
public enum IgnoreReason: String, Codable, Sendable, CaseIterable {
    /// The canvas was animating open or closed.
    case transition
    /// The device has no pencil interaction.
    case unsupported
    /// The plugin had not been initialized yet.
    case notInitialized
    /// Under `respectPreference`, the system preference is `ignore`.
    case preference
}

/// The pencil's side of a double-tap: whether there is a gesture at all, and what it means.
///
/// It knows nothing of the canvas but whether it is open; `CanvasSession` combines the two.
public struct PencilInteraction: Hashable, Sendable, Codable {
    public var configuration: PencilConfiguration
    public private(set) var initialized: Bool
    public private(set) var tools = ToolSelection()

    /// What a double-tap comes to, before the canvas has its say.
    private enum CodingKeys: String, CodingKey { case configuration, initialized, tools }

    public enum Decision: Hashable, Sendable {
        /// Toggle the canvas (it may still refuse while animating).
        case toggle
        case ignore(IgnoreReason)
        /// The preference was carried out on the tools; the canvas is not touched.
        case preference(PreferredTapAction)
    }

    public init(configuration: PencilConfiguration = PencilConfiguration(), initialized: Bool = true) {
        self.configuration = configuration
        self.initialized = initialized
    }

    public mutating func initialize() {
        initialized = true
    }

    public mutating func toolUsed(_ tool: CanvasTool) -> Bool {
        tools.use(tool)
    }

    public mutating func doubleTap(canvasIsOpen: Bool) -> Decision {
        // No gesture reaches a device without pencil interaction, initialized or not.
        guard configuration.supported else { return .ignore(.unsupported) }
        guard initialized else { return .ignore(.notInitialized) }
        guard canvasIsOpen, configuration.policy == .respectPreference else { return .toggle }
        let action = configuration.preferredTapAction
        switch action {
        case .switchEraser: tools.switchEraser()
        case .switchPrevious: tools.switchPrevious()
        case .showColorPalette, .showInkAttributes: break
        case .ignore: return .ignore(.preference)
        }
        return .preference(action)
    }
}
