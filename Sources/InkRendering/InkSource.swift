public import CanvasCore

/// The drawing a save stores beside its ink, so that the page's ink can be reopened as the
/// strokes and texts that were submitted, every number bit for bit.
///
/// Handwriting arrives at the precision ink is drawn at (`InkPrecision`: hundredths of a point,
/// thousandths of pressure) or close to it, so each number is kept as an integer count of that
/// step, and a point as its step from the point before: two or three small integers a point,
/// stored column by column (all x steps of a stroke, then all y, then all pressures) so that
/// the deflate the PDF applies finds runs of like bytes. A number the step does not give back
/// exactly (a client may send any double) is kept besides as its 8 bytes, so nothing is lost:
/// it costs only where it happens.
///
/// Layout, version 2 (integers are LEB128 varints, signed ones zigzag-coded first):
///
///     "CBI" 2                      magic and version
///     strokes, texts               counts
///     per stroke: flags            bit 0 highlighter; bit 1 some points have pressure,
///                                  bit 2 some have none (both: a presence bit per point follows)
///                 color            length and UTF-8
///                 width            a number (below)
///                 points           count
///                 [presence]       with flags 1|2 set, one bit a point, low bit first
///                 x steps, y steps, pressure steps (only points with pressure)
///                 exceptions       count, then each: index (column × count + point), 8 bytes
///     per text:   color, text      length and UTF-8 each
///                 x, y, fontSize   numbers
///
///     checksum                     8 bytes: FNV-1a (64 bits, little-endian) of every byte
///                                  before it, magic and version included
///
/// A number alone (a width, a text's place) is its count of hundredths, doubled, plus 1 when
/// its 8 bytes follow because the count does not give it back.
///
/// Version 1 (canvas/1.8) is the same without the checksum, and is still read. The checksum is
/// what lets stored ink prove itself: a byte changed anywhere (FNV-1a changes for any one byte
/// changed) makes the drawing refused, never loaded as strokes that are not the page's ink.
/// It tells damage, not forgery: anyone can compute it.
///
/// Version 3 is version 2 for an `/Ink` annotation, whose `/InkList` already writes each
/// stroke's centre line (`InkAnnotations`): a stroke whose every x and y the `/InkList` gives
/// back exactly (its numbers read, taken to display points and put on the 0.01 pt grid) has
/// flag bit 3 set and no x or y steps; its positions are read from the `/InkList`. They were
/// more than four fifths of an annotation's stored drawing, written twice over. After the
/// checksum come 8 more bytes, FNV-1a of those strokes' x and y, point by point, 8 bytes each
/// (little-endian IEEE 754): an `/InkList` changed since is told from damage to the drawing,
/// so that what else it says (`firstStroke`: a colour's name, a width) can still serve a
/// reopen of what the annotation now says. A drawing with no such stroke is written as
/// version 2.
public enum InkSource {
    static let magic: [UInt8] = [UInt8(ascii: "C"), UInt8(ascii: "B"), UInt8(ascii: "I")]
    static let version: UInt8 = 3
    static let checksumSize = 8
    /// Stroke flag bit 3 (version 3): its positions are its annotation's `/InkList`'s.
    static let positionsGiven: UInt8 = 8

    /// A stroke's x and y as an annotation's `/InkList` gives them back
    /// (`InkAnnotations.positions`).
    public typealias Positions = [(x: Double, y: Double)]

    /// FNV-1a, 64 bits, of `bytes`; `from`: a sum to go on from.
    public static func checksum(_ bytes: ArraySlice<UInt8>, from start: UInt64 = 0xcbf2_9ce4_8422_2325) -> UInt64 {
        var hash = start
        for byte in bytes {
            hash ^= UInt64(byte)
            hash = hash &* 0x100_0000_01b3
        }
        return hash
    }

    /// Whether `bytes` are in this encoding (the other kind of stored drawing is JSON, from
    /// before canvas/1.8).
    public static func isEncoded(_ bytes: [UInt8]) -> Bool { bytes.starts(with: magic) }

    /// `positions`: for an annotation's drawing, each stroke's positions as its `/InkList` will
    /// give them back; a stroke they match bit for bit is stored without its own (version 3).
    public static func encode(_ drawing: Drawing, positions: [Positions] = []) -> [UInt8] {
        var out = Writer()
        out.bytes.reserveCapacity(16 + drawing.pointCount * 4)
        out.bytes += magic
        out.bytes.append(2)
        out.unsigned(UInt64(drawing.strokes.count))
        out.unsigned(UInt64(drawing.texts.count))
        // What the second checksum covers (version 3): each given stroke's x and y.
        var given = Writer()
        // Each column's last value: a stroke's first steps are from where the one before ended.
        var previous: [Int64] = [0, 0, 0]
        for (strokeIndex, stroke) in drawing.strokes.enumerated() {
            let pressured = stroke.points.count(where: { $0.pressure != nil })
            var flags: UInt8 = stroke.tool.storedCode
            if pressured > 0 { flags |= 2 }
            if pressured < stroke.points.count { flags |= 4 }
            // Bit for bit: -0.0 written as 0 does not come back, and is kept.
            let fromInkList = strokeIndex < positions.count && positions[strokeIndex].count == stroke.points.count
                && zip(stroke.points, positions[strokeIndex]).allSatisfy { point, position in
                    point.x.bitPattern == position.x.bitPattern && point.y.bitPattern == position.y.bitPattern
                }
            if fromInkList {
                flags |= positionsGiven
                for point in stroke.points {
                    given.raw(point.x)
                    given.raw(point.y)
                }
            }
            out.bytes.append(flags)
            out.string(stroke.color.rawValue)
            out.number(stroke.width)
            out.unsigned(UInt64(stroke.points.count))
            if flags & 6 == 6 {
                var byte: UInt8 = 0
                for (index, point) in stroke.points.enumerated() {
                    if point.pressure != nil { byte |= 1 << UInt8(index % 8) }
                    if index % 8 == 7 || index == stroke.points.count - 1 {
                        out.bytes.append(byte)
                        byte = 0
                    }
                }
            }
            var exceptions: [(index: Int, value: Double)] = []
            let columns: [(step: Double, value: (InkPoint) -> Double?)] = [(100, { $0.x }), (100, { $0.y }), (1000, { $0.pressure })]
            for (column, (step, value)) in columns.enumerated() where column == 2 || !fromInkList {
                for (index, point) in stroke.points.enumerated() {
                    guard let value = value(point) else { continue }
                    let count = Quantized(value, step: step)
                    if !count.exact { exceptions.append((column * stroke.points.count + index, value)) }
                    out.signed(count.steps &- previous[column])
                    previous[column] = count.steps
                }
            }
            out.unsigned(UInt64(exceptions.count))
            for exception in exceptions {
                out.unsigned(UInt64(exception.index))
                out.raw(exception.value)
            }
        }
        for text in drawing.texts {
            out.string(text.color.rawValue)
            out.string(text.text)
            out.number(text.x)
            out.number(text.y)
            out.number(text.fontSize)
        }
        // Version 3 only where some stroke takes its positions (each has a point at least).
        if !given.bytes.isEmpty { out.bytes[magic.count] = version }
        let body = checksum(out.bytes[...])
        for var sum in given.bytes.isEmpty ? [body] : [body, checksum(given.bytes[...])] {
            for _ in 0..<checksumSize {
                out.bytes.append(UInt8(truncatingIfNeeded: sum))
                sum >>= 8
            }
        }
        return out.bytes
    }

    /// Why stored bytes are not a drawing: where decoding stopped and what was wrong there.
    public struct DecodeError: Error, CustomStringConvertible {
        public let offset: Int
        public let reason: String
        public var description: String { "the stored drawing is damaged at byte \(offset): \(reason)" }
    }

    /// The drawing `encode` stored. Every count is checked against the bytes left (a stroke
    /// that takes its positions, against those), and every value against the limits a drawing
    /// sent over the wire must meet, so damaged or hostile bytes give an error, never a crash or
    /// an allocation larger than the input and the positions given.
    /// `maxPoints`: refused past this many points in all, counted before any is made.
    /// `checkingSum`: false where a checksum of the container the bytes came in covers them
    /// already (a shared session's log entry), so they are not summed twice.
    /// `positions`: for an annotation's drawing (version 3), each stroke's positions as its
    /// `/InkList` gives them back now (`InkAnnotations.positions`).
    public static func decode(_ bytes: [UInt8], maxPoints: Int = .max, checkingSum: Bool = true,
                              positions: [Positions] = []) throws(DecodeError) -> Drawing {
        let (format, end, written) = try framing(bytes)
        if checkingSum, let sum = written.first, sum != checksum(bytes[..<end]) {
            throw DecodeError(offset: end, reason: "its checksum does not match its bytes (changed since it was written)")
        }
        // Read in place through a buffer: a shared session's take-over decodes every point of its
        // snapshot and of each logged stroke, and reading them through the array (a bounds check
        // and a reach through its storage per byte, a column array per value kind per stroke) was
        // a third of the take-over (issue 43).
        var taken = Writer()
        let drawing = try bytes.withUnsafeBufferPointer { (buffer) throws(DecodeError) -> Drawing in
            var input = Reader(bytes: UnsafeBufferPointer(rebasing: buffer[..<end]), offset: magic.count + 1)
            return try decodeBody(&input, maxPoints: maxPoints, positions: format == 3 ? positions : nil, taken: &taken)
        }
        if format == 3, written[1] != checksum(taken.bytes[...]) {
            throw DecodeError(offset: end + checksumSize, reason: "the positions it takes from its annotation's /InkList are not those it was stored with")
        }
        return drawing
    }

    /// The first stroke's colour and width, from a drawing whose own bytes are whole (its
    /// checksum) whatever positions it takes: what a reopen keeps of it for an annotation
    /// another program changed (its colour's name, its width where `/BS` gives none), however
    /// the `/InkList` changed, a point or a stroke more or fewer. Nil for a drawing without
    /// strokes, damaged, or not in this encoding.
    public static func firstStroke(_ bytes: [UInt8]) -> (color: InkColor, width: Double)? {
        guard let (_, end, written) = try? framing(bytes), written.first.map({ $0 == checksum(bytes[..<end]) }) ?? true else { return nil }
        return bytes.withUnsafeBufferPointer { buffer -> (color: InkColor, width: Double)? in
            var input = Reader(bytes: UnsafeBufferPointer(rebasing: buffer[..<end]), offset: magic.count + 1)
            guard let strokes = try? input.count(each: 5), strokes > 0, (try? input.count(each: 5)) != nil,
                  let flags = try? input.byte(), flags & ~(7 | positionsGiven) == 0,
                  let color = try? input.color(), let width = try? input.number(), DrawingLimits.strokeWidth.contains(width) else { return nil }
            return (color, width)
        }
    }

    /// A drawing's version, where its body ends, and the checksums written after it: none for
    /// version 1, one for 2, two for 3 (the body's, then the positions').
    private static func framing(_ bytes: [UInt8]) throws(DecodeError) -> (format: UInt8, end: Int, written: [UInt64]) {
        guard bytes.starts(with: magic) else { throw DecodeError(offset: 0, reason: "not an encoded drawing") }
        guard bytes.count > magic.count else { throw DecodeError(offset: magic.count, reason: "the bytes end early") }
        let format = bytes[magic.count]
        guard (1...version).contains(format) else {
            throw DecodeError(offset: 3, reason: "version \(format), this build reads 1 to \(version)")
        }
        let sums = Int(format) - 1
        let end = bytes.count - sums * checksumSize
        guard end > magic.count else { throw DecodeError(offset: magic.count + 1, reason: "the bytes end early") }
        let written = (0..<sums).map { index in
            bytes[(end + index * checksumSize)..<(end + (index + 1) * checksumSize)].reversed().reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        }
        return (format, end, written)
    }

    /// `positions`: nil before version 3, where no stroke may take its positions from them;
    /// `taken`: the positions strokes took, as the second checksum covers them.
    private static func decodeBody(_ input: inout Reader, maxPoints: Int, positions: [Positions]?, taken: inout Writer) throws(DecodeError) -> Drawing {
        let strokeCount = try input.count(each: 5), textCount = try input.count(each: 5)
        var strokes: [Stroke] = []
        strokes.reserveCapacity(min(strokeCount, 4096))
        // Each column's last value, carried from stroke to stroke: the steps are deltas.
        var lastX: Int64 = 0, lastY: Int64 = 0, lastPressure: Int64 = 0
        var pointsLeft = maxPoints
        // Each stroke's steps, in arrays kept from stroke to stroke.
        var xs: [Int64] = [], ys: [Int64] = [], pressures: [Int64] = []
        for strokeIndex in 0..<strokeCount {
            let flags = try input.byte()
            guard flags & ~(positions == nil ? 7 : 7 | positionsGiven) == 0 else { throw input.failure("stroke flags \(flags)") }
            let color = try input.color()
            let width = try input.number()
            // A stroke's points take two bytes or more each, but for one whose positions are
            // its /InkList's: its count is then bounded by that (read within a bound already).
            let count = flags & positionsGiven == 0 ? try input.count(each: 2) : Int(clamping: try input.unsigned())
            guard count > 0 else { throw input.failure("a stroke without points") }
            var given: Positions?
            if flags & positionsGiven != 0 {
                guard let positions, strokeIndex < positions.count, positions[strokeIndex].count == count else {
                    let found = positions.map { strokeIndex < $0.count ? "\($0[strokeIndex].count) points" : "no entry" } ?? "nothing"
                    throw input.failure("stroke \(strokeIndex) of \(count) points takes its positions from its annotation's /InkList, which gives \(found) for it")
                }
                given = positions[strokeIndex]
            }
            guard count <= pointsLeft else { throw input.failure("more than the \(maxPoints) points allowed") }
            pointsLeft -= count
            // Which points have a pressure: all (bit 1), none, or as a bitmap says (bits 1 and 2).
            let allPressed = flags & 2 != 0
            let bitmap = flags & 6 == 6 ? try input.bytes((count + 7) / 8) : nil
            func pressed(_ index: Int) -> Bool {
                guard let bitmap else { return allPressed }
                return bitmap[index / 8] >> UInt8(index % 8) & 1 == 1
            }
            xs.removeAll(keepingCapacity: true)
            ys.removeAll(keepingCapacity: true)
            pressures.removeAll(keepingCapacity: true)
            if let given {
                for position in given {
                    taken.raw(position.x)
                    taken.raw(position.y)
                }
            } else {
                xs.reserveCapacity(count)
                ys.reserveCapacity(count)
                for _ in 0..<count {
                    lastX = lastX &+ (try input.signed())
                    xs.append(lastX)
                }
                for _ in 0..<count {
                    lastY = lastY &+ (try input.signed())
                    ys.append(lastY)
                }
            }
            for index in 0..<count where pressed(index) {
                lastPressure = lastPressure &+ (try input.signed())
                pressures.append(lastPressure)
            }
            // Values the steps do not give back, by their place (column × count + point): a flat
            // table, not a dictionary, since input off the grid has one for nearly every value.
            let exceptions = try input.count(each: 9)
            var exact: [Double] = [], isExact: [Bool] = []
            if exceptions > 0 {
                exact = [Double](repeating: 0, count: 3 * count)
                isExact = [Bool](repeating: false, count: 3 * count)
            }
            for _ in 0..<exceptions {
                let index = try input.unsigned()
                guard index < UInt64(3 * count), given == nil || index >= UInt64(2 * count) else {
                    throw input.failure("an exception for value \(index) of \(3 * count)")
                }
                exact[Int(index)] = try input.raw()
                isExact[Int(index)] = true
            }
            var points: [InkPoint] = []
            points.reserveCapacity(count)
            var pressureIndex = 0
            for index in 0..<count {
                var x: Double, y: Double
                if let given {
                    (x, y) = given[index]
                } else {
                    (x, y) = (Double(xs[index]) / 100, Double(ys[index]) / 100)
                }
                var pressure: Double?
                if pressed(index) {
                    pressure = Double(pressures[pressureIndex]) / 1000
                    pressureIndex += 1
                }
                if exceptions > 0 {
                    if isExact[index] { x = exact[index] }
                    if isExact[count + index] { y = exact[count + index] }
                    if pressure != nil, isExact[2 * count + index] { pressure = exact[2 * count + index] }
                }
                do {
                    points.append(try InkPoint(x: x, y: y, pressure: pressure))
                } catch {
                    throw input.failure("point \(index): \(error)")
                }
            }
            guard let tool = InkTool.allCases.first(where: { $0.storedCode == flags & InkTool.storedCodeMask }) else {
                throw input.failure("a stroke of tool code \(flags & InkTool.storedCodeMask), which no tool has")
            }
            do {
                strokes.append(try Stroke(tool: tool, color: color, width: width, points: points))
            } catch {
                throw input.failure("a stroke: \(error)")
            }
        }
        var texts: [TextAnnotation] = []
        for _ in 0..<textCount {
            let color = try input.color()
            let text = try input.string()
            let x = try input.number(), y = try input.number(), fontSize = try input.number()
            do {
                texts.append(try TextAnnotation(text: text, x: x, y: y, fontSize: fontSize, color: color))
            } catch {
                throw input.failure("a text: \(error)")
            }
        }
        guard input.offset == input.bytes.count else { throw input.failure("\(input.bytes.count - input.offset) bytes after the drawing") }
        return Drawing(strokes: strokes, texts: texts)
    }

    /// A value as a whole number of `1 / step`, and whether that number gives the value back.
    struct Quantized {
        let steps: Int64
        let exact: Bool

        init(_ value: Double, step: Double) {
            let scaled = (value * step).rounded()
            // Values are within the drawing limits (a million points), far inside Int64.
            steps = scaled.isFinite && abs(scaled) < 1e15 ? Int64(scaled) : 0
            exact = (Double(steps) / step).bitPattern == value.bitPattern
        }
    }

    struct Writer {
        var bytes: [UInt8] = []

        mutating func unsigned(_ value: UInt64) {
            var value = value
            while value >= 0x80 {
                bytes.append(UInt8(truncatingIfNeeded: value) | 0x80)
                value >>= 7
            }
            bytes.append(UInt8(value))
        }

        mutating func signed(_ value: Int64) { unsigned(UInt64(bitPattern: value << 1 ^ value >> 63)) }

        mutating func raw(_ value: Double) {
            var bits = value.bitPattern
            for _ in 0..<8 {
                bytes.append(UInt8(truncatingIfNeeded: bits))
                bits >>= 8
            }
        }

        mutating func string(_ text: String) {
            unsigned(UInt64(text.utf8.count))
            bytes += text.utf8
        }

        mutating func number(_ value: Double) {
            let count = Quantized(value, step: 100)
            unsigned(UInt64(bitPattern: count.steps << 1 ^ count.steps >> 63) << 1 | (count.exact ? 0 : 1))
            if !count.exact { raw(value) }
        }
    }

    /// Reads `bytes` (the drawing without its checksum, where it lies in the array), checking
    /// `offset < bytes.count` before each read.
    struct Reader {
        let bytes: UnsafeBufferPointer<UInt8>
        var offset = 0

        func failure(_ reason: String) -> DecodeError { DecodeError(offset: offset, reason: reason) }

        mutating func byte() throws(DecodeError) -> UInt8 {
            guard offset < bytes.count else { throw failure("the bytes end early") }
            defer { offset += 1 }
            return bytes[offset]
        }

        /// The next `count` bytes, where they lie.
        mutating func bytes(_ count: Int) throws(DecodeError) -> UnsafeBufferPointer<UInt8> {
            guard count <= bytes.count - offset else { throw failure("the bytes end early") }
            defer { offset += count }
            return UnsafeBufferPointer(rebasing: bytes[offset..<offset + count])
        }

        @inline(__always)
        mutating func unsigned() throws(DecodeError) -> UInt64 {
            // Most steps between a stroke's points fit one byte.
            if offset < bytes.count, bytes[offset] < 0x80 {
                defer { offset += 1 }
                return UInt64(bytes[offset])
            }
            return try longer()
        }

        private mutating func longer() throws(DecodeError) -> UInt64 {
            var value: UInt64 = 0
            for shift in stride(from: 0, to: 64, by: 7) {
                let next = try byte()
                value |= UInt64(next & 0x7F) << UInt64(shift)
                if next & 0x80 == 0 { return value }
            }
            throw failure("a number longer than 64 bits")
        }

        @inline(__always)
        mutating func signed() throws(DecodeError) -> Int64 {
            let value = try unsigned()
            return Int64(bitPattern: value >> 1) ^ -Int64(bitPattern: value & 1)
        }

        /// A count of items that each take at least `each` bytes: never more than the bytes left
        /// could hold, so a damaged count cannot ask for a huge allocation.
        mutating func count(each: Int) throws(DecodeError) -> Int {
            let value = try unsigned()
            guard value <= UInt64((bytes.count - offset) / each + 1) else { throw failure("a count of \(value) with \(bytes.count - offset) bytes left") }
            return Int(value)
        }

        mutating func raw() throws(DecodeError) -> Double {
            guard bytes.count - offset >= 8 else { throw failure("the bytes end early") }
            var bits: UInt64 = 0
            for index in 0..<8 { bits |= UInt64(bytes[offset + index]) << UInt64(8 * index) }
            offset += 8
            return Double(bitPattern: bits)
        }

        mutating func string() throws(DecodeError) -> String {
            let length = try unsigned()
            guard length <= UInt64(bytes.count - offset) else { throw failure("a string of \(length) bytes with \(bytes.count - offset) left") }
            let utf8 = try bytes(Int(length))
            guard let text = String(validating: utf8, as: UTF8.self) else { throw failure("a string that is not UTF-8") }
            return text
        }

        mutating func color() throws(DecodeError) -> InkColor {
            let text = try string()
            do {
                return try InkColor(text)
            } catch {
                throw failure("colour \(text.debugDescription): \(error)")
            }
        }

        mutating func number() throws(DecodeError) -> Double {
            let head = try unsigned()
            if head & 1 == 1 { return try raw() }
            let zigzag = head >> 1
            return Double(Int64(bitPattern: zigzag >> 1) ^ -Int64(bitPattern: zigzag & 1)) / 100
        }
    }
}

extension InkTool {
    /// A stroke's tool in the stored drawing: bit 0 of its flags (bits 1 and 2 say which points
    /// carry a pressure). A new tool needs a code here, and the format a bit more for it.
    var storedCode: UInt8 {
        switch self {
        case .pen: 0
        case .highlighter: 1
        }
    }
    static let storedCodeMask: UInt8 = 1
}
