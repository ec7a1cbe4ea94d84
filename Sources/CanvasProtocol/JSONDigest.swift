/// A 128-bit digest of a JSON value that two equal values share however they were written: what
/// tells a retry of a request from another request under the same id (spec §2.4: key order and
/// how a number is written do not matter, every param counts).
///
/// It walks the value, never writing it out: writing a stroke's params as canonical JSON (each
/// number formatted, each object's keys sorted) cost as much as parsing the request, every
/// time a change was remembered. An object's members are each digested and summed, so their
/// order does not matter and nothing is sorted; a number is digested as the integer or the
/// double that its canonical JSON would show, so `3` and `3.0` agree.
///
/// It is stable across processes and builds (it is kept in shared sessions and their records),
/// and not a defence against anyone: who chooses two requests that collide only confuses their
/// own session's retries.
public struct JSONDigest: Hashable, Sendable {
    public private(set) var low: UInt64
    public private(set) var high: UInt64

    /// The 16 bytes, little-endian `low` then `high`.
    public var bytes: [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(16)
        withUnsafeBytes(of: low.littleEndian) { out.append(contentsOf: $0) }
        withUnsafeBytes(of: high.littleEndian) { out.append(contentsOf: $0) }
        return out
    }

    /// The digest of a request as its retry must repeat it: its method and its params.
    /// `points`: the params' `points` when the parser read them as numbers (`ParsedPoints`),
    /// kept apart from `params`; the digest is the same as with them among `params`.
    public static func request(method: String, params: [String: JSONValue], points: ParsedPoints? = nil) -> JSONDigest {
        var state = State(tag: 0x52)
        state.add(string: method)
        var members = object(params)
        if let points {
            var member = State.member("points")
            members.add(member: &member, points.digest, count: 1)
        }
        state.add(members.low)
        state.add(members.high)
        return state.finish()
    }

    /// The digest of a value.
    public static func value(_ value: JSONValue) -> JSONDigest {
        switch value {
        case .null:
            var state = State(tag: 0x6E)
            return state.finish()
        case .bool(let flag):
            var state = State(tag: flag ? 0x74 : 0x66)
            return state.finish()
        case .integer(let integer):
            return Self.integer(integer)
        case .number(let number):
            // As JSONCodec writes it: a whole number below 1e15 as an integer, any other finite
            // number as its shortest exact form (so its bits), a non-finite one as null.
            if number.rounded() == number && abs(number) < 1e15 { return integer(Int64(number)) }
            guard number.isFinite else { return Self.value(.null) }
            var state = State(tag: 0x64)
            state.add(number.bitPattern)
            return state.finish()
        case .string(let text):
            var state = State(tag: 0x73)
            state.add(string: text)
            return state.finish()
        case .array(let elements):
            var state = State(tag: 0x61)
            state.add(UInt64(elements.count))
            for element in elements {
                let digest = Self.value(element)
                state.add(digest.low)
                state.add(digest.high)
            }
            return state.finish()
        case .object(let members):
            let sum = object(members)
            var state = State(tag: 0x6F)
            state.add(sum.low)
            state.add(sum.high)
            return state.finish()
        }
    }

    private static func integer(_ integer: Int64) -> JSONDigest {
        var state = State(tag: 0x69)
        state.add(UInt64(bitPattern: integer))
        return state.finish()
    }

    /// The members' digests (each of its key and value), summed: the same in any order. The
    /// count goes in too.
    private static func object(_ members: [String: JSONValue]) -> JSONDigest {
        var sum = JSONDigest(low: UInt64(members.count), high: 0)
        for (key, member) in members {
            var state = State.member(key)
            sum.add(member: &state, value(member), count: 0)
        }
        return sum
    }

    /// Adds to an object's sum one member: `state` is `State.member` of its key, `digest` its
    /// value's; `count`, what the member adds to the count the sum started from.
    private mutating func add(member state: inout State, _ digest: JSONDigest, count: UInt64) {
        state.add(digest.low)
        state.add(digest.high)
        let made = state.finish()
        low = low &+ made.low &+ count
        high = high &+ made.high
    }

    /// The digest of `ParsedPoints.json`, read from the numbers: the array's and each point
    /// object's as `value` makes them. The states of the three keys are made once, not per point.
    static func points(_ parsed: ParsedPoints) -> JSONDigest {
        let x = State.member("x"), y = State.member("y"), pressure = State.member("pressure")
        var state = State(tag: 0x61)
        state.add(UInt64(parsed.count))
        for point in parsed.points {
            var sum = JSONDigest(low: 0, high: 0)
            var member = x
            sum.add(member: &member, value(.number(point.x)), count: 1)
            member = y
            sum.add(member: &member, value(.number(point.y)), count: 1)
            switch point.pressure {
            case .absent: break
            case .null:
                member = pressure
                sum.add(member: &member, value(.null), count: 1)
            case .value(let number):
                member = pressure
                sum.add(member: &member, value(.number(number)), count: 1)
            }
            var object = State(tag: 0x6F)
            object.add(sum.low)
            object.add(sum.high)
            let digest = object.finish()
            state.add(digest.low)
            state.add(digest.high)
        }
        return state.finish()
    }

    /// Two lanes of MurmurHash3's x64 128-bit mixing over 64-bit words, finished with its fmix64.
    private struct State {
        var first: UInt64 = 0x9368_E53C_2F6A_F274
        var second: UInt64 = 0x586D_CD20_8F7C_D3FD
        var words: UInt64 = 0

        init(tag: UInt64) { add(tag) }

        /// The state an object's member starts from: its tag and its key.
        static func member(_ key: String) -> State {
            var state = State(tag: 0x6D)
            state.add(string: key)
            return state
        }

        mutating func add(_ word: UInt64) {
            var k1 = word &* 0x87C3_7B91_1142_53D5
            k1 = (k1 << 31 | k1 >> 33) &* 0x4CF5_AD43_2745_937F
            first ^= k1
            first = (first << 27 | first >> 37) &+ second
            first = first &* 5 &+ 0x52DC_E729
            var k2 = (word ^ 0xA5A5_A5A5_A5A5_A5A5) &* 0x4CF5_AD43_2745_937F
            k2 = (k2 << 33 | k2 >> 31) &* 0x87C3_7B91_1142_53D5
            second ^= k2
            second = (second << 31 | second >> 33) &+ first
            second = second &* 5 &+ 0x3849_5AB5
            words &+= 1
        }

        mutating func add(string text: String) {
            var text = text
            text.withUTF8 { add(bytes: UnsafeRawBufferPointer($0)) }
        }

        private mutating func add(bytes: UnsafeRawBufferPointer) {
            add(UInt64(bytes.count))
            var offset = 0
            while offset + 8 <= bytes.count {
                add(UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: offset, as: UInt64.self)))
                offset += 8
            }
            if offset < bytes.count {
                var last: UInt64 = 0
                for index in offset..<bytes.count { last |= UInt64(bytes[index]) << UInt64(8 * (index - offset)) }
                add(last)
            }
        }

        mutating func finish() -> JSONDigest {
            first ^= words
            second ^= words
            first = first &+ second
            second = second &+ first
            first = Self.fmix(first)
            second = Self.fmix(second)
            first = first &+ second
            second = second &+ first
            return JSONDigest(low: first, high: second)
        }

        private static func fmix(_ value: UInt64) -> UInt64 {
            var k = value
            k ^= k >> 33
            k = k &* 0xFF51_AFD7_ED55_8CCD
            k ^= k >> 33
            k = k &* 0xC4CE_B9FE_1A85_EC53
            k ^= k >> 33
            return k
        }
    }
}
