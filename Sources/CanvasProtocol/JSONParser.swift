/// A strict RFC 8259 parser from UTF-8 bytes straight to `JSONValue`.
///
/// Every request frame goes through here, so it is the hot path of the service: decoding
/// `JSONValue` through `JSONDecoder` costs tens of microseconds per small request (each
/// failed `try?` type probe is a thrown error), more than the whole libzmq round trip.
/// Anything that is not JSON fails: invalid UTF-8, trailing bytes, `NaN`, leading zeros,
/// raw control characters in strings, lone surrogate escapes, and nesting deeper than
/// `maxDepth` (which also keeps a hostile `[[[[…` from exhausting the stack).
struct JSONParser {
    struct Failure: Error, CustomStringConvertible {
        let offset: Int
        let reason: String
        var description: String { "invalid JSON at byte \(offset): \(reason)" }
    }

    static let maxDepth = 512

    /// The document's bytes, valid for as long as the parser: each parse makes its parser
    /// inside `withUnsafeBufferPointer`. Read through a buffer rather than the array, every
    /// byte read is without the array's bounds check and the reach through its storage; the
    /// parser checks `index < bytes.count` itself before each read.
    private let bytes: UnsafeBufferPointer<UInt8>
    /// Whether a well-formed number past Double's range (`1e400`) is read as an infinity
    /// instead of failing, so a request can be answered about that one field.
    private let keepsOverflow: Bool
    private var index = 0
    private var depth = 0
    /// The members of the objects being read, innermost last: an object's dictionary is made
    /// once, at its end, at its final size, instead of growing (and rehashing) key by key.
    private var members: [(key: String, value: JSONValue)] = []
    /// While a request's params are read, the depth of their object (whose `points` member is
    /// tried as `ParsedPoints`), and what that gave for the last `points` read.
    private var paramsDepth = -1
    private var parsedPoints: ParsedPoints?

    static func parse(_ bytes: [UInt8], keepingOverflow: Bool = false) throws(Failure) -> JSONValue {
        try bytes.withUnsafeBufferPointer { (bytes) throws(Failure) -> JSONValue in
            var parser = JSONParser(bytes: bytes, keepsOverflow: keepingOverflow)
            parser.skipWhitespace()
            let value = try parser.parseValue()
            parser.skipWhitespace()
            guard parser.index == bytes.count else { throw parser.failure("unexpected bytes after the document") }
            return value
        }
    }

    /// The members of a top-level object a request is read for (nil: absent; a repeated key's
    /// last value counts).
    struct RequestMembers {
        var id: JSONValue?
        var method: JSONValue?
        var params: JSONValue?
        var session: JSONValue?
        /// A web peer's access token (`--web-tokens`), read in the same pass as the rest, so
        /// the request that is authenticated is the request that runs.
        var token: JSONValue?
        /// The params' `points`, when they have a stroke's shape: then `params` is without them.
        var points: ParsedPoints?
    }

    /// A document read as `parse` reads it, except that of a top-level object only the members
    /// a request has come back. The others are read, so the whole document is still checked,
    /// and dropped.
    enum TopLevel {
        case object(RequestMembers)
        case other(JSONValue)
    }

    /// For request frames, whose top level is read once for four fields: building and hashing
    /// a dictionary for it cost more than the rest of reading the frame, and making a string
    /// of every key and searching the members for each name was a third of what was left.
    static func parseRequest(_ bytes: [UInt8], keepingOverflow: Bool = false) throws(Failure) -> TopLevel {
        try bytes.withUnsafeBufferPointer { (bytes) throws(Failure) -> TopLevel in
            var parser = JSONParser(bytes: bytes, keepsOverflow: keepingOverflow)
            parser.skipWhitespace()
            let value: TopLevel
            if parser.index < bytes.count, bytes[parser.index] == UInt8(ascii: "{") {
                value = .object(try parser.parseRequestMembers())
            } else {
                value = .other(try parser.parseValue())
            }
            parser.skipWhitespace()
            guard parser.index == bytes.count else { throw parser.failure("unexpected bytes after the document") }
            return value
        }
    }

    private init(bytes: UnsafeBufferPointer<UInt8>, keepsOverflow: Bool) {
        self.bytes = bytes
        self.keepsOverflow = keepsOverflow
    }

    private func failure(_ reason: String) -> Failure { Failure(offset: index, reason: reason) }

    private mutating func skipWhitespace() {
        while index < bytes.count {
            switch bytes[index] {
            case 0x20, 0x09, 0x0A, 0x0D: index += 1
            default: return
            }
        }
    }

    private mutating func parseValue() throws(Failure) -> JSONValue {
        guard index < bytes.count else { throw failure("unexpected end") }
        switch bytes[index] {
        case UInt8(ascii: "{"): return try parseObject()
        case UInt8(ascii: "["): return try parseArray()
        case UInt8(ascii: "\""): return .string(try parseString())
        case UInt8(ascii: "t"): try expect("true"); return .bool(true)
        case UInt8(ascii: "f"): try expect("false"); return .bool(false)
        case UInt8(ascii: "n"): try expect("null"); return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return try parseNumber()
        default: throw failure("unexpected character")
        }
    }

    private mutating func expect(_ literal: String) throws(Failure) {
        for expected in literal.utf8 {
            guard index < bytes.count, bytes[index] == expected else { throw failure("unknown literal") }
            index += 1
        }
    }

    private mutating func enter() throws(Failure) {
        depth += 1
        guard depth <= Self.maxDepth else { throw failure("nested deeper than \(Self.maxDepth)") }
        index += 1
    }

    private mutating func parseObject() throws(Failure) -> JSONValue {
        let first = members.count
        defer {
            while members.count > first { members.removeLast() }
        }
        try parseMembers()
        if members.count == first { return .object([:]) }
        var object = [String: JSONValue](minimumCapacity: members.count - first)
        // A repeated key keeps its last value.
        for member in members[first...] { object[member.key] = member.value }
        return .object(object)
    }

    /// Reads an object, `{` to `}`, appending its members to `members`.
    private mutating func parseMembers() throws(Failure) {
        try enter()
        defer { depth -= 1 }
        skipWhitespace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "}") {
            index += 1
            return
        }
        if members.capacity == 0 { members.reserveCapacity(8) }
        while true {
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else { throw failure("expected a key") }
            let key = try parseString()
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { throw failure("expected ':'") }
            index += 1
            skipWhitespace()
            if depth == paramsDepth, key == "points" {
                // The last `points` counts, as the last of any repeated key does.
                parsedPoints = scanPoints()
                if parsedPoints == nil { members.append((key, try parseValue())) }
            } else {
                members.append((key, try parseValue()))
            }
            skipWhitespace()
            guard index < bytes.count else { throw failure("unexpected end") }
            if bytes[index] == UInt8(ascii: ",") { index += 1; continue }
            if bytes[index] == UInt8(ascii: "}") {
                index += 1
                return
            }
            throw failure("expected ',' or '}'")
        }
    }

    /// Reads an object, `{` to `}`, keeping the values of a request's keys.
    private mutating func parseRequestMembers() throws(Failure) -> RequestMembers {
        var found = RequestMembers()
        try enter()
        defer { depth -= 1 }
        skipWhitespace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "}") {
            index += 1
            return found
        }
        while true {
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else { throw failure("expected a key") }
            let key = try parseRequestKey()
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { throw failure("expected ':'") }
            index += 1
            skipWhitespace()
            let value: JSONValue
            if key == .params {
                (value, found.points) = try parseParams()
            } else {
                value = try parseValue()
            }
            switch key {
            case .id: found.id = value
            case .method: found.method = value
            case .params: found.params = value
            case .session: found.session = value
            case .token: found.token = value
            case nil: break
            }
            skipWhitespace()
            guard index < bytes.count else { throw failure("unexpected end") }
            if bytes[index] == UInt8(ascii: ",") { index += 1; continue }
            if bytes[index] == UInt8(ascii: "}") {
                index += 1
                return found
            }
            throw failure("expected ',' or '}'")
        }
    }

    /// A request's params: an object is read with its `points` tried as `ParsedPoints` (and
    /// then left out of it); anything else as any value.
    private mutating func parseParams() throws(Failure) -> (JSONValue, ParsedPoints?) {
        guard index < bytes.count, bytes[index] == UInt8(ascii: "{") else { return (try parseValue(), nil) }
        paramsDepth = depth + 1
        parsedPoints = nil
        defer {
            paramsDepth = -1
            parsedPoints = nil
        }
        let value = try parseObject()
        guard let points = parsedPoints else { return (value, nil) }
        // An earlier `points` read the generic way was repeated by the one kept.
        guard case .object(var object) = value, object["points"] != nil else { return (value, points) }
        object["points"] = nil
        return (.object(object), points)
    }

    /// Reads a stroke's points at `index` as numbers; nil, with nothing read, for anything
    /// else (another shape, or not JSON, which the generic reading then says exactly).
    private mutating func scanPoints() -> ParsedPoints? {
        let start = index, startDepth = depth
        if let points = (try? readPoints()) ?? nil { return points }
        index = start
        depth = startDepth
        return nil
    }

    private mutating func readPoints() throws(Failure) -> ParsedPoints? {
        guard index < bytes.count, bytes[index] == UInt8(ascii: "[") else { return nil }
        try enter()
        var points: [ParsedPoints.Point] = []
        skipWhitespace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "]") {
            index += 1
            depth -= 1
            return ParsedPoints(points: points)
        }
        // Sized for the bytes left, a point taking at least 13 (`{"x":0,"y":0}`), so the array
        // grows at most once whatever the count.
        points.reserveCapacity(min((bytes.count - index) / 13 + 1, 4096))
        while true {
            skipWhitespace()
            guard let point = try readPoint() else { return nil }
            points.append(point)
            skipWhitespace()
            guard index < bytes.count else { return nil }
            if bytes[index] == UInt8(ascii: ",") { index += 1; continue }
            guard bytes[index] == UInt8(ascii: "]") else { return nil }
            index += 1
            depth -= 1
            return ParsedPoints(points: points)
        }
    }

    private enum PointKey { case x, y, pressure }

    /// One `{"x":…,"y":…,"pressure":…}`, its keys plain (no escapes), each at most once.
    private mutating func readPoint() throws(Failure) -> ParsedPoints.Point? {
        guard index < bytes.count, bytes[index] == UInt8(ascii: "{") else { return nil }
        try enter()
        var x: Double?, y: Double?
        var pressure = ParsedPoints.Pressure.absent
        while true {
            skipWhitespace()
            guard let key = pointKey() else { return nil }
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { return nil }
            index += 1
            skipWhitespace()
            guard index < bytes.count else { return nil }
            switch key {
            case .x:
                guard x == nil, let number = try pointNumber() else { return nil }
                x = number
            case .y:
                guard y == nil, let number = try pointNumber() else { return nil }
                y = number
            case .pressure:
                guard pressure == .absent else { return nil }
                if bytes[index] == UInt8(ascii: "n") {
                    try expect("null")
                    pressure = .null
                } else {
                    guard let number = try pointNumber() else { return nil }
                    pressure = .value(number)
                }
            }
            skipWhitespace()
            guard index < bytes.count else { return nil }
            if bytes[index] == UInt8(ascii: ",") { index += 1; continue }
            guard bytes[index] == UInt8(ascii: "}"), let x, let y else { return nil }
            index += 1
            depth -= 1
            return ParsedPoints.Point(x: x, y: y, pressure: pressure)
        }
    }

    /// `"x"`, `"y"` or `"pressure"` at `index`, read past; nil for any other key.
    private mutating func pointKey() -> PointKey? {
        guard index + 2 < bytes.count, bytes[index] == UInt8(ascii: "\"") else { return nil }
        if bytes[index + 2] == UInt8(ascii: "\"") {
            let key: PointKey
            switch bytes[index + 1] {
            case UInt8(ascii: "x"): key = .x
            case UInt8(ascii: "y"): key = .y
            default: return nil
            }
            index += 3
            return key
        }
        let pressure: StaticString = "\"pressure\""
        guard index + pressure.utf8CodeUnitCount <= bytes.count else { return nil }
        let matches = pressure.withUTF8Buffer { name in
            for (offset, byte) in name.enumerated() where bytes[index + offset] != byte { return false }
            return true
        }
        guard matches else { return nil }
        index += pressure.utf8CodeUnitCount
        return .pressure
    }

    private mutating func pointNumber() throws(Failure) -> Double? {
        let byte = bytes[index]
        guard byte == UInt8(ascii: "-") || isDigit(byte) else { return nil }
        return ParsedPoints.number(try parseNumber())
    }

    private enum RequestKey: String {
        case id, method, params, session, token
    }

    /// Reads a key and says which of a request's it is, if any. A plain ASCII key, as keys
    /// almost always are, is compared in place; one with escapes or other characters is read
    /// as a string first (so `"\u0069d"` is `id`, as JSON says).
    private mutating func parseRequestKey() throws(Failure) -> RequestKey? {
        let start = index + 1
        var end = start
        while end < bytes.count {
            let byte = bytes[end]
            if byte == UInt8(ascii: "\"") { break }
            guard byte != UInt8(ascii: "\\"), byte >= 0x20, byte < 0x80 else { return RequestKey(rawValue: try parseString()) }
            end += 1
        }
        guard end < bytes.count else { return RequestKey(rawValue: try parseString()) }
        index = end + 1
        func key(_ name: StaticString) -> Bool {
            name.utf8CodeUnitCount == end - start && name.withUTF8Buffer { name in
                var at = start
                for byte in name {
                    guard bytes[at] == byte else { return false }
                    at += 1
                }
                return true
            }
        }
        if key("id") { return .id }
        if key("method") { return .method }
        if key("params") { return .params }
        if key("session") { return .session }
        if key("token") { return .token }
        return nil
    }

    private mutating func parseArray() throws(Failure) -> JSONValue {
        try enter()
        defer { depth -= 1 }
        var array: [JSONValue] = []
        skipWhitespace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "]") {
            index += 1
            return .array(array)
        }
        while true {
            skipWhitespace()
            array.append(try parseValue())
            skipWhitespace()
            guard index < bytes.count else { throw failure("unexpected end") }
            if bytes[index] == UInt8(ascii: ",") { index += 1; continue }
            if bytes[index] == UInt8(ascii: "]") { index += 1; return .array(array) }
            throw failure("expected ',' or ']'")
        }
    }

    private mutating func parseString() throws(Failure) -> String {
        index += 1   // the opening quote
        let start = index
        // The common case, no escapes: validate the run's UTF-8 once and copy it (and plain
        // ASCII, by far the most common, needs no validating).
        var highBits: UInt8 = 0
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "\"") {
                let text = highBits < 0x80 ? ascii(start..<index) : try utf8(start..<index)
                index += 1
                return text
            }
            highBits |= byte
            if byte == UInt8(ascii: "\\") { break }
            if byte < 0x20 { throw failure("control character in a string") }
            index += 1
        }
        var scalars = String.UnicodeScalarView()
        scalars.append(contentsOf: try utf8(start..<index).unicodeScalars)
        while index < bytes.count {
            let byte = bytes[index]
            switch byte {
            case UInt8(ascii: "\""):
                index += 1
                return String(scalars)
            case UInt8(ascii: "\\"):
                index += 1
                guard index < bytes.count else { throw failure("unexpected end") }
                let escape = bytes[index]
                index += 1
                switch escape {
                case UInt8(ascii: "\""): scalars.append("\"")
                case UInt8(ascii: "\\"): scalars.append("\\")
                case UInt8(ascii: "/"): scalars.append("/")
                case UInt8(ascii: "b"): scalars.append("\u{08}")
                case UInt8(ascii: "f"): scalars.append("\u{0C}")
                case UInt8(ascii: "n"): scalars.append("\n")
                case UInt8(ascii: "r"): scalars.append("\r")
                case UInt8(ascii: "t"): scalars.append("\t")
                case UInt8(ascii: "u"): scalars.append(try parseUnicodeEscape())
                default: throw failure("unknown escape")
                }
            default:
                if byte < 0x20 { throw failure("control character in a string") }
                let runStart = index
                while index < bytes.count, bytes[index] != UInt8(ascii: "\""), bytes[index] != UInt8(ascii: "\\"), bytes[index] >= 0x20 {
                    index += 1
                }
                scalars.append(contentsOf: try utf8(runStart..<index).unicodeScalars)
            }
        }
        throw failure("unterminated string")
    }

    private mutating func hex4() throws(Failure) -> UInt32 {
        guard index + 4 <= bytes.count else { throw failure("unexpected end") }
        var value: UInt32 = 0
        for _ in 0..<4 {
            let byte = bytes[index]
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
            default: throw failure("bad \\u escape")
            }
            value = value << 4 | UInt32(digit)
            index += 1
        }
        return value
    }

    private mutating func parseUnicodeEscape() throws(Failure) -> Unicode.Scalar {
        let first = try hex4()
        if (0xD800...0xDBFF).contains(first) {
            guard index + 2 <= bytes.count, bytes[index] == UInt8(ascii: "\\"), bytes[index + 1] == UInt8(ascii: "u") else {
                throw failure("unpaired surrogate")
            }
            index += 2
            let second = try hex4()
            guard (0xDC00...0xDFFF).contains(second) else { throw failure("unpaired surrogate") }
            return Unicode.Scalar(0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00))!
        }
        guard let scalar = Unicode.Scalar(first) else { throw failure("unpaired surrogate") }
        return scalar
    }

    private func utf8(_ range: Range<Int>) throws(Failure) -> String {
        guard let text = String(validating: UnsafeBufferPointer(rebasing: bytes[range]), as: UTF8.self) else {
            throw Failure(offset: range.lowerBound, reason: "invalid UTF-8")
        }
        return text
    }

    /// Bytes known to be ASCII, which is always valid UTF-8.
    private func ascii(_ range: Range<Int>) -> String {
        String(decoding: UnsafeBufferPointer(rebasing: bytes[range]), as: UTF8.self)
    }

    /// The most digits, as an integer, that a double holds exactly (2⁵³); ten times it still fits a UInt64.
    private static let exactDigits: UInt64 = 1 << 53
    /// 10⁰ to 10²², each exact as a double.
    private static let powersOfTen: [Double] = (0...22).map { power in (0..<power).reduce(1.0) { value, _ in value * 10 } }

    private mutating func parseNumber() throws(Failure) -> JSONValue {
        let start = index
        var isInteger = true
        let negative = bytes[index] == UInt8(ascii: "-")
        if negative { index += 1 }
        guard index < bytes.count, isDigit(bytes[index]) else { throw failure("expected a digit") }
        // The integer part's value, kept as it is read: a plain integer (an id, a coordinate)
        // then needs no text made and parsed again. nil once it no longer fits.
        var magnitude: UInt64? = 0
        if bytes[index] == UInt8(ascii: "0") {
            index += 1
            if index < bytes.count, isDigit(bytes[index]) { throw failure("leading zero") }
        } else {
            while index < bytes.count, isDigit(bytes[index]) {
                if let value = magnitude {
                    let (times10, over1) = value.multipliedReportingOverflow(by: 10)
                    let (sum, over2) = times10.addingReportingOverflow(UInt64(bytes[index] - UInt8(ascii: "0")))
                    magnitude = over1 || over2 ? nil : sum
                }
                index += 1
            }
        }
        // A decimal whose digits make an integer up to 2⁵³, with no exponent (a coordinate, a
        // pressure: most numbers a stroke brings), is that integer over a power of ten, both
        // exact as doubles, so their quotient is the correctly rounded value, which parsing the
        // text gives too, without making the text (Clinger's fast path).
        var digits = magnitude ?? 0, fraction = 0
        var fast = magnitude.map { $0 <= Self.exactDigits } ?? false
        if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
            isInteger = false
            index += 1
            guard index < bytes.count, isDigit(bytes[index]) else { throw failure("expected a digit after '.'") }
            while index < bytes.count, isDigit(bytes[index]) {
                if fast {
                    digits = digits * 10 + UInt64(bytes[index] - UInt8(ascii: "0"))
                    fraction += 1
                    fast = digits <= Self.exactDigits && fraction <= 22
                }
                index += 1
            }
        }
        var exponent = false
        if index < bytes.count, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") {
            exponent = true
            isInteger = false
            index += 1
            if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") { index += 1 }
            guard index < bytes.count, isDigit(bytes[index]) else { throw failure("expected an exponent") }
            while index < bytes.count, isDigit(bytes[index]) { index += 1 }
        }
        if isInteger, let magnitude {
            if !negative, magnitude <= UInt64(Int64.max) { return .integer(Int64(magnitude)) }
            if negative, magnitude <= UInt64(Int64.max) + 1 { return .integer(Int64(truncatingIfNeeded: 0 &- magnitude)) }
        }
        if !isInteger, fast, !exponent {
            let value = Double(digits) / Self.powersOfTen[fraction]
            return .number(negative ? -value : value)
        }
        // The grammar is checked above, so the text is plain ASCII that Swift parses exactly.
        let text = String(decoding: bytes[start..<index], as: UTF8.self)
        if isInteger, let integer = Int64(text) { return .integer(integer) }
        guard let number = Double(text), number.isFinite || keepsOverflow else {
            throw Failure(offset: start, reason: "number out of range")
        }
        return .number(number)
    }

    private func isDigit(_ byte: UInt8) -> Bool { byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") }
}
