/// What the system asks a pencil double-tap to do (UIPencilInteraction's preferred action).
public enum PreferredTapAction: String, Codable, Sendable, CaseIterable {
    case switchEraser
    case switchPrevious
    case showColorPalette
    case showInkAttributes
    case ignore
}

/// Whether the double-tap always toggles the canvas (the original design), or, while the
/// canvas is open, does what the system preference says (the design's "future enhancement").
public enum TapPolicy: String, Codable, Sendable, CaseIterable {
    case alwaysToggle
    case respectPreference
}

/// The pencil part of a session's set-up; `pencil.configure` changes the fields it names.
public struct PencilConfiguration: Hashable, Sendable, Codable {
    /// False on a device without pencil interaction: it gets no gesture at all.
    public var supported: Bool
    public var preferredTapAction: PreferredTapAction
    public var policy: TapPolicy

    public init(
        supported: Bool = true,
        preferredTapAction: PreferredTapAction = .switchEraser,
        policy: TapPolicy = .alwaysToggle
    ) {
        self.supported = supported
        self.preferredTapAction = preferredTapAction
        self.policy = policy
    }

    private enum CodingKeys: String, CodingKey { case supported, preferredTapAction, policy }

    // Every field is optional on the wire; a missing one takes its default.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        supported = try container.decodeIfPresent(Bool.self, forKey: .supported) ?? true
        preferredTapAction = try container.decodeIfPresent(PreferredTapAction.self, forKey: .preferredTapAction) ?? .switchEraser
        policy = try container.decodeIfPresent(TapPolicy.self, forKey: .policy) ?? .alwaysToggle
    }
}
