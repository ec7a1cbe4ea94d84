/// Fits a few cubic Béziers to a dense polyline, within a distance tolerance.
///
/// The least-squares fit with Newton reparameterization of Philip Schneider's "An Algorithm for
/// Automatically Fitting Digitized Curves" (Graphics Gems, 1990): a stroke sampled every point
/// or so along a smooth curve needs one Bézier per several samples, not one per sample.
enum CurveFit {
    static let maximumRun = 256

    /// A fitted curve and the points it was fitted to (indices into `points` of `fitSpans`).
    struct Span {
        var curve: Cubic
        var points: ClosedRange<Int>
    }

    /// Curves from `points[0]` to `points.last`, every point within `tolerance` of them, with the
    /// points without repeats and each curve's span of them. At the indices in `corners`, and
    /// wherever the polyline turns by more than `corner` radians at a point, the curves meet at
    /// an angle instead of being forced smooth through it.
    static func fitSpans(_ points: [InkVector], tolerance: Double, corners: Set<Int> = [], corner: Double = 1.2)
        -> (points: [InkVector], curves: [Span]) {
        let (points, corners) = deduplicated(points, corners)
        guard points.count > 1 else { return (points, []) }
        var curves: [Span] = []
        var start = 0
        let cosCorner = cos(corner)
        for index in 1..<points.count {
            let isCorner: Bool
            if index == points.count - 1 || corners.contains(index) {
                isCorner = true
            } else if let a = (points[index] - points[index - 1]).unit, let b = (points[index + 1] - points[index]).unit {
                isCorner = a.dot(b) < cosCorner
            } else {
                isCorner = false
            }
            guard isCorner else { continue }
            let run = Array(points[start...index])
            let first = (run[1] - run[0]).unit!, last = (run[run.count - 2] - run[run.count - 1]).unit!
            var fitted: [Span] = []
            fitRun(run[...], first, last, tolerance * tolerance, into: &fitted)
            curves += fitted.map { Span(curve: $0.curve, points: ($0.points.lowerBound + start)...($0.points.upperBound + start)) }
            start = index
        }
        return (points, curves)
    }

    /// Curves through `points` (at least two, no repeats) leaving the first along `startTangent`
    /// and arriving at the last against `endTangent` (both pointing into the run).
    static func fit(_ points: ArraySlice<InkVector>, from startTangent: InkVector, to endTangent: InkVector, tolerance: Double) -> [Span] {
        var curves: [Span] = []
        fitRun(points, startTangent, endTangent, tolerance * tolerance, into: &curves)
        return curves
    }

    private static func deduplicated(_ points: [InkVector], _ corners: Set<Int>) -> ([InkVector], Set<Int>) {
        var out: [InkVector] = []
        var kept = Set<Int>()
        out.reserveCapacity(points.count)
        for (index, p) in points.enumerated() {
            if let last = out.last, (last - p).length <= 1e-6 {
                if corners.contains(index) { kept.insert(out.count - 1) }
                continue
            }
            if corners.contains(index) { kept.insert(out.count) }
            out.append(p)
        }
        return (out, kept)
    }

    /// Fits `points` (at least two) whose end tangents point into the run.
    private static func fitRun(_ points: ArraySlice<InkVector>, _ startTangent: InkVector, _ endTangent: InkVector,
                               _ squaredTolerance: Double, into curves: inout [Span]) {
        let first = points.startIndex, last = points.endIndex - 1
        if points.count == 2 {
            let third = (points[last] - points[first]).length / 3
            curves.append(Span(curve: Cubic(p0: points[first], c1: points[first] + startTangent * third,
                                            c2: points[last] + endTangent * third, p3: points[last]), points: first...last))
            return
        }
        // A long run is halved first: fitting it whole and splitting at the worst point could
        // take time quadratic in its length.
        if points.count > maximumRun {
            let middle = first + points.count / 2
            let centre = (points[middle - 1] - points[middle + 1]).unit ?? startTangent.left
            fitRun(points[first...middle], startTangent, centre, squaredTolerance, into: &curves)
            fitRun(points[middle...last], -centre, endTangent, squaredTolerance, into: &curves)
            return
        }
        var u = chordLengths(points)
        var curve = bezier(points, u, startTangent, endTangent)
        var (error, split) = maximumError(points, curve, u)
        if error <= squaredTolerance {
            curves.append(Span(curve: curve, points: first...last))
            return
        }
        // Close: a better parameterization often brings it within the tolerance.
        if error <= squaredTolerance * 16 {
            for _ in 0..<4 {
                u = reparameterized(points, curve, u)
                curve = bezier(points, u, startTangent, endTangent)
                (error, split) = maximumError(points, curve, u)
                if error <= squaredTolerance {
                    curves.append(Span(curve: curve, points: first...last))
                    return
                }
            }
        }
        // Split where the fit is worst, smooth across the split.
        let split0 = min(max(split, first + 1), last - 1)
        let centre = (points[split0 - 1] - points[split0 + 1]).unit ?? startTangent.left
        fitRun(points[first...split0], startTangent, centre, squaredTolerance, into: &curves)
        fitRun(points[split0...last], -centre, endTangent, squaredTolerance, into: &curves)
    }

    private static func chordLengths(_ points: ArraySlice<InkVector>) -> [Double] {
        var u = [0.0]
        u.reserveCapacity(points.count)
        var previous = points[points.startIndex]
        for p in points.dropFirst() {
            u.append(u.last! + (p - previous).length)
            previous = p
        }
        let total = u.last!
        return u.map { $0 / total }
    }

    /// The least-squares Bézier with the given end tangents through the parameterized points.
    private static func bezier(_ points: ArraySlice<InkVector>, _ u: [Double], _ t1: InkVector, _ t2: InkVector) -> Cubic {
        let p0 = points[points.startIndex], p3 = points[points.endIndex - 1]
        var c00 = 0.0, c01 = 0.0, c11 = 0.0, x0 = 0.0, x1 = 0.0
        for (i, p) in points.enumerated() {
            let t = u[i], s = 1 - t
            let b0 = s * s * s, b1 = 3 * s * s * t, b2 = 3 * s * t * t, b3 = t * t * t
            let a1 = t1 * b1, a2 = t2 * b2
            c00 += a1.dot(a1)
            c01 += a1.dot(a2)
            c11 += a2.dot(a2)
            let rest = p - (p0 * (b0 + b1) + p3 * (b2 + b3))
            x0 += a1.dot(rest)
            x1 += a2.dot(rest)
        }
        let determinant = c00 * c11 - c01 * c01
        var alpha1 = 0.0, alpha2 = 0.0
        if abs(determinant) > 1e-12 {
            alpha1 = (x0 * c11 - x1 * c01) / determinant
            alpha2 = (c00 * x1 - c01 * x0) / determinant
        }
        let chord = (p3 - p0).length
        // A degenerate or backwards solution, or handles longer than the chord (a curve that
        // swings far out between points it fits): fall back to a third of the chord.
        if alpha1 < chord * 1e-6 || alpha2 < chord * 1e-6 || alpha1 > chord || alpha2 > chord {
            alpha1 = chord / 3
            alpha2 = chord / 3
        }
        return Cubic(p0: p0, c1: p0 + t1 * alpha1, c2: p3 + t2 * alpha2, p3: p3)
    }

    /// The largest squared distance from a point to the curve at its parameter, and where.
    private static func maximumError(_ points: ArraySlice<InkVector>, _ curve: Cubic, _ u: [Double]) -> (Double, Int) {
        var worst = 0.0, at = points.startIndex + points.count / 2
        for (i, p) in points.enumerated() {
            let d = curve.point(at: u[i]) - p
            let squared = d.dot(d)
            if squared > worst {
                worst = squared
                at = points.startIndex + i
            }
        }
        return (worst, at)
    }

    /// One Newton step per point towards the parameter nearest to it.
    private static func reparameterized(_ points: ArraySlice<InkVector>, _ curve: Cubic, _ u: [Double]) -> [Double] {
        var out = u
        for (i, p) in points.enumerated() {
            let t = u[i]
            let d = curve.point(at: t) - p, d1 = curve.derivative(at: t), d2 = curve.secondDerivative(at: t)
            let denominator = d1.dot(d1) + d.dot(d2)
            if abs(denominator) > 1e-12 { out[i] = min(max(t - d.dot(d1) / denominator, 0), 1) }
        }
        return out
    }
}

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
