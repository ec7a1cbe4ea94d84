/// Why a drawing value was refused. Values that fail validation are never constructed, so a
/// `Drawing` in memory always holds only values that can be rendered and flattened.
public enum DrawingValidationError: Error, Hashable, Sendable, CustomStringConvertible {
    /// A coordinate, width, radius or pressure was NaN or infinite.
    case notFinite(field: String)
    /// A value lies outside its allowed range.
    case outOfRange(field: String, value: Double, allowed: ClosedRange<Double>)
    /// A stroke must have at least one point.
    case emptyPoints
    /// A text annotation must have some text.
    case emptyText
    /// A colour must be one of the named colours or `#RRGGBB`.
    case invalidColor(String)

    /// The field at fault, as the wire names it.
    public var field: String {
        switch self {
        case .notFinite(let field), .outOfRange(let field, _, _): return field
        case .emptyPoints: return "points"
        case .emptyText: return "text"
        case .invalidColor: return "color"
        }
    }

    public var description: String {
        switch self {
        case .notFinite(let field):
            return "\(field) must be a finite number"
        case .outOfRange(let field, let value, let allowed):
            return "\(field) is \(value), outside \(allowed.lowerBound)...\(allowed.upperBound)"
        case .emptyPoints:
            return "a stroke needs at least one point"
        case .emptyText:
            return "a text annotation needs some text"
        case .invalidColor(let raw):
            return "colour \"\(raw)\" is neither a named colour nor #RRGGBB"
        }
    }
}

/// The numeric bounds every drawing value is checked against.
public enum DrawingLimits {
    /// Display points. Far beyond any real page, but small enough that geometry stays exact.
    public static let coordinate: ClosedRange<Double> = -1_000_000...1_000_000
    public static let strokeWidth: ClosedRange<Double> = 0.1...200
    public static let pressure: ClosedRange<Double> = 0...1
    public static let fontSize: ClosedRange<Double> = 8...48
    public static let eraserRadius: ClosedRange<Double> = 0.01...1_000_000

    // Inlinable with InkPoint's initializer: a stored drawing's take-over makes every one of
    // its points through them.
    @inlinable
    static func check(_ value: Double, _ field: String, in range: ClosedRange<Double>) throws(DrawingValidationError) {
        guard value.isFinite else { throw .notFinite(field: field) }
        guard range.contains(value) else { throw .outOfRange(field: field, value: value, allowed: range) }
    }
}
