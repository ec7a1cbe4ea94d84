/// Where the canvas is, as clients see it.
public enum CanvasPhase: String, Codable, Sendable, CaseIterable {
    case closed
    case opening
    case open
    case minimizing
    case minimized

    public var isTransition: Bool { self == .opening || self == .minimizing }
}

/// How the canvas animates between open and minimized (or closed and open).
public enum TransitionMode: Hashable, Sendable, Codable {
    /// No animation: open and minimize take effect at once.
    case instant
    /// The canvas stays in `opening` or `minimizing` until `finishTransition`.
    case manual
    /// As `manual`, but the service finishes it after this many milliseconds.
    case timed(milliseconds: Int)
}

/// Names one transition, so a timer that fires late cannot finish a later one.
public struct TransitionTicket: Hashable, Sendable, Codable, CustomStringConvertible {
    public let number: UInt64
    public init(number: UInt64) { self.number = number }
    public var description: String { "transition #\(number)" }
}

/// Why the canvas refused a command. Each is an `INVALID_STATE` on the wire.
public enum CanvasRejection: String, Error, Codable, Sendable, CaseIterable, CustomStringConvertible {
    /// The canvas is animating; only `finishTransition` is taken.
    case transition
    /// The command needs the canvas open (drawing edits, minimize).
    case notOpen
    /// There is no drawing to submit or cancel: the canvas is closed.
    case noDrawing
    /// `finishTransition` with no transition under way.
    case noTransition
    /// A timer for a transition that already finished.
    case staleTransition

    public var description: String {
        switch self {
        case .transition: return "the canvas is animating open or closed"
        case .notOpen: return "the canvas is not open"
        case .noDrawing: return "there is no drawing: the canvas is closed"
        case .noTransition: return "no transition is under way"
        case .staleTransition: return "that transition has already finished"
        }
    }
}
