/// A request's `params.points` read straight into numbers, when it has the shape a stroke's
/// points have: an array of objects whose members are `x` and `y` (numbers) and at most a
/// `pressure` (a number or null), each once, in any order.
///
/// The parser reads it this way (`JSONParser.parseRequest`) so that a stroke's points never
/// become a dictionary each: for a 200-point stroke, making, hashing, looking up, digesting and
/// freeing 200 small dictionaries was most of `drawing.addStroke`'s time in canvasd (issue 43:
/// 3.0x a `canvas.state`'s round trip). Any other shape is read as any other JSON, so this is a
/// faster reading of the same value, never a different one: `json` gives that value, and
/// `digest` is `JSONDigest.value(json)`.
public struct ParsedPoints: Sendable, Equatable {
    /// A point's pressure as the request wrote it: `null` and a missing member are the same
    /// stroke, but not the same request (a retry must repeat its params).
    public enum Pressure: Sendable, Equatable {
        case absent
        case null
        case value(Double)

        /// The number, if there is one.
        public var number: Double? {
            switch self {
            case .absent, .null: return nil
            case .value(let value): return value
            }
        }
    }

    public struct Point: Sendable, Equatable {
        public var x: Double
        public var y: Double
        public var pressure: Pressure
    }

    public private(set) var points: [Point]

    init(points: [Point]) { self.points = points }

    public var count: Int { points.count }

    /// The points as the generic parser would have read them (a number that the text wrote
    /// whole, as `5.0`, comes back as the integer 5: the same JSON, written and digested alike).
    public var json: JSONValue {
        .array(points.map { point in
            var object: [String: JSONValue] = ["x": Self.json(point.x), "y": Self.json(point.y)]
            switch point.pressure {
            case .absent: break
            case .null: object["pressure"] = .null
            case .value(let value): object["pressure"] = Self.json(value)
            }
            return .object(object)
        })
    }

    /// A number as JSONCodec writes it: whole and below 1e15 as an integer.
    private static func json(_ number: Double) -> JSONValue {
        number.rounded() == number && abs(number) < 1e15 ? .integer(Int64(number)) : .number(number)
    }

    /// `JSONDigest.value(json)`, without making `json`.
    public var digest: JSONDigest { JSONDigest.points(self) }

    /// The number the parser read, as kept here: nil for what this reading cannot keep exactly
    /// (an integer at or past 1e15, which the digest tells from the double it would become, or
    /// an overflow kept as an infinity), so that the points are read the generic way instead.
    static func number(_ value: JSONValue) -> Double? {
        switch value {
        // `magnitude`, not `abs`: abs(Int64.min) traps, and a client may send it.
        case .integer(let integer): return integer.magnitude < 1_000_000_000_000_000 ? Double(integer) : nil
        case .number(let number): return number.isFinite ? number : nil
        case .null, .bool, .string, .array, .object: return nil
        }
    }
}
