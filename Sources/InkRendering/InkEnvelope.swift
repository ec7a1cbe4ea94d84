#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Where a stroke may put ink: the union of the discs around its input points, each of the
/// radius its pressure gives, and of the tapered capsule (the convex hull of two discs) around
/// each segment between two points. The spec (§4) promises no ink outside it.
///
/// Every capsule is convex, so a shape whose corners all lie in one capsule lies in it whole;
/// a cubic Bézier lies in the hull of its four control points. That is what `contains(_:)`
/// checks, cutting a curve in halves until each half is in one capsule.
struct InkEnvelope {
    struct Capsule {
        var a, b: InkVector
        var ra, rb: Double
    }

    private(set) var capsules: [Capsule] = []
    private var grid: [Int64: [Int32]] = [:]
    private let cell: Double

    init(_ centres: [InkVector], radii: [Double]) {
        precondition(centres.count == radii.count && !centres.isEmpty)
        var largest = 0.0
        if centres.count == 1 {
            capsules = [Capsule(a: centres[0], b: centres[0], ra: radii[0], rb: radii[0])]
            largest = radii[0]
        } else {
            capsules.reserveCapacity(centres.count - 1)
            for k in 0..<(centres.count - 1) {
                capsules.append(Capsule(a: centres[k], b: centres[k + 1], ra: radii[k], rb: radii[k + 1]))
                largest = max(largest, radii[k], radii[k + 1])
            }
        }
        cell = max(4 * largest, 2)
        for (index, capsule) in capsules.enumerated() {
            let (low, high) = bounds(capsule)
            for gx in low.0...high.0 {
                for gy in low.1...high.1 { grid[key(gx, gy), default: []].append(Int32(index)) }
            }
        }
    }

    private func cellOf(_ p: InkVector) -> (Int64, Int64) {
        (Int64((p.x / cell).rounded(.down)), Int64((p.y / cell).rounded(.down)))
    }

    private func key(_ gx: Int64, _ gy: Int64) -> Int64 { gx &* 0x1_0000_0001 &+ gy }

    private func bounds(_ c: Capsule) -> ((Int64, Int64), (Int64, Int64)) {
        let r = max(c.ra, c.rb)
        let low = cellOf(InkVector(min(c.a.x, c.b.x) - r, min(c.a.y, c.b.y) - r))
        let high = cellOf(InkVector(max(c.a.x, c.b.x) + r, max(c.a.y, c.b.y) + r))
        return (low, high)
    }

    private func candidates(_ p: InkVector) -> [Int32] { grid[key(cellOf(p).0, cellOf(p).1)] ?? [] }

    /// How much room a disc at `p` has inside the capsule: the largest r(t) − |p − q(t)| over
    /// the points q(t) of its segment, r(t) the radius there. A disc of that radius around `p`
    /// lies inside the capsule; a negative value means `p` is outside it.
    static func room(_ p: InkVector, in c: Capsule) -> Double {
        let d = c.b - c.a
        let length = d.length
        guard length > 1e-12 else { return max(c.ra, c.rb) - (p - c.a).length }
        let u = d * (1 / length)
        let along = (p - c.a).dot(u), across = abs((p - c.a).cross(u))
        // r(t) − distance is concave in t: its top is where the distance grows as fast as the
        // radius does, or at an end.
        let slope = (c.rb - c.ra) / length
        var t: Double
        if slope >= 1 {
            t = 1
        } else if slope <= -1 {
            t = 0
        } else {
            t = (along + across * slope / (1 - slope * slope).squareRoot()) / length
        }
        t = min(max(t, 0), 1)
        let q = c.a + d * t
        return c.ra + (c.rb - c.ra) * t - (p - q).length
    }

    /// The room a disc at `p` has inside the envelope (the most any one capsule gives it).
    func room(_ p: InkVector) -> Double {
        var best = -Double.infinity
        for index in candidates(p) { best = max(best, Self.room(p, in: capsules[Int(index)])) }
        return best
    }

    func contains(_ p: InkVector, slack: Double = 1e-9) -> Bool { room(p) >= -slack }

    /// Whether a curve lies inside: its control points do, and it is covered by halves (of
    /// halves…) whose control points each lie in a single capsule.
    func contains(_ curve: Cubic) -> Bool {
        guard contains(curve.p0), contains(curve.c1), contains(curve.c2), contains(curve.p3) else { return false }
        return covered(curve, depth: 7)
    }

    private func covered(_ curve: Cubic, depth: Int) -> Bool {
        for index in candidates(curve.p0) {
            let c = capsules[Int(index)]
            if Self.room(curve.p0, in: c) >= -1e-9, Self.room(curve.c1, in: c) >= -1e-9,
               Self.room(curve.c2, in: c) >= -1e-9, Self.room(curve.p3, in: c) >= -1e-9 {
                return true
            }
        }
        guard depth > 0 else { return false }
        let (first, second) = curve.halves
        return covered(first, depth: depth - 1) && covered(second, depth: depth - 1)
    }
}
