import Foundation

/// Typed access to a request's params. Every failure is an `INVALID_PARAMS` that names the field.
public struct Params: Sendable {
    /// The params but `points`, when `points` is set (as `Request.otherParams`).
    private let others: [String: JSONValue]
    /// The params' `points` as the parser read them, when it read them as numbers.
    public let points: ParsedPoints?
    /// Where these params sit in the request's params (`size` for the object under `size`),
    /// so that errors name the whole path (`size.width`).
    public let path: String

    public init(_ values: [String: JSONValue]) { self.init(values, at: "") }

    public init(_ values: [String: JSONValue], at path: String) {
        self.others = values
        self.points = nil
        self.path = path
    }

    /// A request's params, its points kept as the parser read them.
    public init(_ request: Request) {
        self.others = request.otherParams
        self.points = request.points
        self.path = ""
    }

    /// All the params as JSON (`points` made JSON if it was read as numbers).
    public var values: [String: JSONValue] {
        guard let points else { return others }
        var all = others
        all["points"] = points.json
        return all
    }

    /// One param as JSON.
    public subscript(field: String) -> JSONValue? {
        if let points, field == "points" { return points.json }
        return others[field]
    }

    private func qualified(_ field: String) -> String { path.isEmpty ? field : "\(path).\(field)" }

    private func invalid(_ field: String, _ message: String) -> ProtocolError {
        let field = qualified(field)
        return ProtocolError(.invalidParams, "\(field): \(message)", data: ["field": .string(field)])
    }

    public func has(_ field: String) -> Bool {
        if points != nil, field == "points" { return true }
        if let value = self[field], value != .null { return true }
        return false
    }

    public func string(_ field: String) throws(ProtocolError) -> String {
        guard let value = self[field] else { throw invalid(field, "required") }
        guard case .string(let s) = value else { throw invalid(field, "must be a string, not \(value.typeName)") }
        return s
    }

    public func optionalString(_ field: String) throws(ProtocolError) -> String? {
        has(field) ? try string(field) : nil
    }

    public func bool(_ field: String, default fallback: Bool) throws(ProtocolError) -> Bool {
        guard has(field) else { return fallback }
        guard case .bool(let b) = self[field]! else { throw invalid(field, "must be true or false") }
        return b
    }

    public func number(_ field: String) throws(ProtocolError) -> Double {
        guard let value = self[field] else { throw invalid(field, "required") }
        guard let d = value.doubleValue else { throw invalid(field, "must be a number, not \(value.typeName)") }
        guard d.isFinite else { throw invalid(field, "number out of range") }
        return d
    }

    public func number(_ field: String, in range: ClosedRange<Double>) throws(ProtocolError) -> Double {
        let d = try number(field)
        guard range.contains(d) else { throw invalid(field, "\(d) is outside \(range.lowerBound)...\(range.upperBound)") }
        return d
    }

    public func integer(_ field: String, in range: ClosedRange<Int64>) throws(ProtocolError) -> Int64 {
        guard let value = self[field] else { throw invalid(field, "required") }
        guard let i = value.integerValue else {
            // Say which number, and why: past a double's range, past 64 bits, or with a fraction.
            guard case .number(let d) = value else { throw invalid(field, "must be a whole number, not \(value.typeName)") }
            guard d.isFinite else { throw invalid(field, "number out of range") }
            guard d.rounded() != d else { throw invalid(field, "\(d) is outside \(range.lowerBound)...\(range.upperBound)") }
            throw invalid(field, "must be a whole number, not \(d)")
        }
        guard range.contains(i) else { throw invalid(field, "\(i) is outside \(range.lowerBound)...\(range.upperBound)") }
        return i
    }

    public func optionalInteger(_ field: String, in range: ClosedRange<Int64>) throws(ProtocolError) -> Int64? {
        has(field) ? try integer(field, in: range) : nil
    }

    public func object(_ field: String) throws(ProtocolError) -> [String: JSONValue]? {
        guard has(field) else { return nil }
        guard case .object(let o) = self[field]! else { throw invalid(field, "must be an object") }
        return o
    }

    /// One of a string enum's values.
    public func choice<T: RawRepresentable & CaseIterable>(_ field: String, _ type: T.Type, default fallback: T? = nil) throws(ProtocolError) -> T
    where T.RawValue == String {
        guard has(field) else {
            if let fallback { return fallback }
            throw invalid(field, "required")
        }
        let raw = try string(field)
        guard let value = T(rawValue: raw) else {
            throw invalid(field, "\"\(raw)\" is not one of \(T.allCases.map(\.rawValue).joined(separator: ", "))")
        }
        return value
    }

    /// Decodes a Decodable from the whole params object or one field, turning its
    /// validation errors into `INVALID_PARAMS`.
    public func decode<T: Decodable>(_ type: T.Type, field: String? = nil) throws(ProtocolError) -> T {
        let source: JSONValue
        if let field {
            guard let value = self[field] else { throw invalid(field, "required") }
            source = value
        } else {
            source = .object(values)
        }
        let base = field.map(qualified) ?? path
        do {
            return try JSONCodec.decode(T.self, from: source)
        } catch let error as DecodingError {
            // The decoder fails on an out-of-range number in a field it reads (and skips one in
            // a field it does not know), but cannot say where: the value itself can.
            if let at = Self.firstInfinity(in: source, at: base) {
                throw ProtocolError(.invalidParams, "\(at): number out of range", data: ["field": .string(at)])
            }
            let (at, message) = Self.describe(error, in: base)
            throw ProtocolError(.invalidParams, at.isEmpty ? message : "\(at): \(message)",
                                data: at.isEmpty ? [:] : ["field": .string(at)])
        } catch {
            throw ProtocolError(.invalidParams, (base.isEmpty ? "" : "\(base): ") + "\(error)",
                                data: base.isEmpty ? [:] : ["field": .string(base)])
        }
    }

    /// The dotted path (`points[3].x`) of the first number too large for a Double, which the
    /// request parser kept as an infinity.
    static func firstInfinity(in value: JSONValue, at path: String) -> String? {
        switch value {
        case .number(let d) where !d.isFinite: return path
        case .array(let items):
            for (index, item) in items.enumerated() {
                if let found = firstInfinity(in: item, at: "\(path)[\(index)]") { return found }
            }
        case .object(let object):
            for key in object.keys.sorted() {
                if let found = firstInfinity(in: object[key]!, at: path.isEmpty ? key : "\(path).\(key)") { return found }
            }
        default: break
        }
        return nil
    }

    /// The dotted path of the value at fault (`points[3].x`) and what is wrong with it.
    private static func describe(_ error: DecodingError, in base: String) -> (path: String, message: String) {
        func path(_ keys: [any CodingKey]) -> String {
            let parts = (base.isEmpty ? [] : [base]) + keys.map { $0.intValue.map { "[\($0)]" } ?? $0.stringValue }
            return parts.joined(separator: ".").replacingOccurrences(of: ".[", with: "[")
        }
        switch error {
        case .keyNotFound(let key, let context): return (path(context.codingPath + [key]), "required")
        case .typeMismatch(_, let context): return (path(context.codingPath), "wrong type")
        case .valueNotFound(_, let context): return (path(context.codingPath), "must not be null")
        case .dataCorrupted(let context): return (path(context.codingPath), context.debugDescription)
        @unknown default: return (base, "\(error)")
        }
    }
}
