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
    private let cell: Double
    /// The capsules each grid cell meets, as index ranges into `members`: cell (gx, gy) of the
    /// box from `low` is `starts[row * columns + column]..<starts[… + 1]`. One array lookup per
    /// point instead of a hashed one, which with the arrays it returned cost a tenth of drawing
    /// a page of handwriting. Strokes whose box would need too many cells (points far apart)
    /// keep a dictionary of the cells they use.
    private var low: (Int64, Int64) = (0, 0)
    private var columns: Int64 = 0, rows: Int64 = 0
    private var starts: [Int32] = []
    private var members: [Int32] = []
    private var sparse: [Int64: [Int32]] = [:]
    /// The capsule that last held a point or a curve, tried first: the questions follow the
    /// stroke, so it mostly answers at once. It changes the order of a search whose answer is
    /// whether any capsule of the cell holds the shape, never the answer.
    private final class Hint { var capsule = -1 }
    private let hint = Hint()

    /// Throws only when `deadline` passes: a stroke of many points far apart is the most
    /// work of any, and the grid below the part of it that grows with their distance.
    init(_ centres: [InkVector], radii: [Double], deadline: RenderDeadline = .none) throws(RenderError) {
        precondition(centres.count == radii.count && !centres.isEmpty)
        var largest = 0.0, length = 0.0
        if centres.count == 1 {
            capsules = [Capsule(a: centres[0], b: centres[0], ra: radii[0], rb: radii[0])]
            largest = radii[0]
        } else {
            capsules.reserveCapacity(centres.count - 1)
            for k in 0..<(centres.count - 1) {
                capsules.append(Capsule(a: centres[k], b: centres[k + 1], ra: radii[k], rb: radii[k + 1]))
                largest = max(largest, radii[k], radii[k + 1])
                length += (centres[k + 1] - centres[k]).length
            }
        }
        // A cell a few radii wide, so a question asks the few capsules around it; but where the
        // points are far apart (a line across the page between two samples), wide enough that
        // a capsule's cells number a few dozen, not its length over two points.
        cell = max(4 * largest, 2, length / Double(capsules.count) / 32)
        let boxes = capsules.map(bounds)
        var low = boxes[0].0, high = boxes[0].1
        var used = 0
        for (index, capsule) in capsules.enumerated() {
            try deadline.check(step: index, "lay out the envelope of \(capsules.count) segments")
            low = (min(low.0, boxes[index].0.0), min(low.1, boxes[index].0.1))
            high = (max(high.0, boxes[index].1.0), max(high.1, boxes[index].1.1))
            forEachCell(of: capsule, box: boxes[index]) { _, _ in used += 1 }
        }
        let (columns, rows) = (high.0 - low.0 + 1, high.1 - low.1 + 1)
        guard columns <= 1 << 16, rows <= 1 << 16, columns * rows <= Int64(4 * used + 4096) else {
            var sparse: [Int64: [Int32]] = [:]
            for (index, capsule) in capsules.enumerated() {
                try deadline.check(step: index, "file the envelope of \(capsules.count) segments")
                forEachCell(of: capsule, box: boxes[index]) { gx, gy in sparse[key(gx, gy), default: []].append(Int32(index)) }
            }
            self.sparse = sparse
            return
        }
        self.low = low
        self.columns = columns
        self.rows = rows
        // Counted, then filled in capsule order: each cell lists its capsules as the
        // dictionary does.
        var starts = [Int32](repeating: 0, count: Int(columns * rows) + 1)
        for (index, capsule) in capsules.enumerated() {
            try deadline.check(step: index, "count the envelope's cells of \(capsules.count) segments")
            forEachCell(of: capsule, box: boxes[index]) { gx, gy in starts[Int((gy - low.1) * columns + (gx - low.0)) + 1] += 1 }
        }
        for index in 1..<starts.count { starts[index] += starts[index - 1] }
        var next = starts
        var members = [Int32](repeating: 0, count: Int(starts[starts.count - 1]))
        for (index, capsule) in capsules.enumerated() {
            try deadline.check(step: index, "fill the envelope's cells of \(capsules.count) segments")
            forEachCell(of: capsule, box: boxes[index]) { gx, gy in
                let at = Int((gy - low.1) * columns + (gx - low.0))
                members[Int(next[at])] = Int32(index)
                next[at] += 1
            }
        }
        self.starts = starts
        self.members = members
    }

    /// Calls `body` with each cell the capsule may meet: column by column of its box, the rows
    /// that the segment, clipped to the column widened by the larger radius, covers, widened
    /// by that radius again. A point of the capsule lies within the radius of a point of the
    /// segment, so no cell it meets is left out; and a long slanted capsule is filed under the
    /// cells along it, not under every cell of its box (a segment across the page is
    /// thousands of cells long, and its box millions).
    private func forEachCell(of c: Capsule, box: ((Int64, Int64), (Int64, Int64)), _ body: (Int64, Int64) -> Void) {
        // A hair more than the radius: a point on the edge, within a containment test's slack,
        // still finds the capsule in its cell.
        let r = max(c.ra, c.rb) + 1e-6
        let d = c.b - c.a
        for gx in box.0.0...box.1.0 {
            var t0 = 0.0, t1 = 1.0
            if abs(d.x) > 1e-12 {
                let left = Double(gx) * cell - r, right = Double(gx + 1) * cell + r
                let ta = (left - c.a.x) / d.x, tb = (right - c.a.x) / d.x
                t0 = max(0, min(ta, tb))
                t1 = min(1, max(ta, tb))
                if t0 > t1 { continue }
            }
            let y0 = c.a.y + d.y * t0, y1 = c.a.y + d.y * t1
            let top = max(box.0.1, Int64(((min(y0, y1) - r) / cell).rounded(.down)))
            let bottom = min(box.1.1, Int64(((max(y0, y1) + r) / cell).rounded(.down)))
            guard top <= bottom else { continue }
            for gy in top...bottom { body(gx, gy) }
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

    /// Calls `body` with the index of each capsule that meets `p`'s cell, until it returns true;
    /// says whether one did.
    @inline(__always)
    private func anyCandidate(_ p: InkVector, _ body: (Int) -> Bool) -> Bool {
        let (gx, gy) = cellOf(p)
        if starts.isEmpty {
            for index in sparse[key(gx, gy)] ?? [] where body(Int(index)) { return true }
            return false
        }
        let column = gx - low.0, row = gy - low.1
        guard column >= 0, column < columns, row >= 0, row < rows else { return false }
        let at = Int(row * columns + column)
        return members.withUnsafeBufferPointer { members in
            for position in Int(starts[at])..<Int(starts[at + 1]) where body(Int(members[position])) { return true }
            return false
        }
    }

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
        capsules.withUnsafeBufferPointer { capsules in
            _ = anyCandidate(p) { index in
                best = max(best, Self.room(p, in: capsules[index]))
                return false
            }
        }
        return best
    }

    /// Whether `p` lies inside: the first capsule that has room for it answers.
    func contains(_ p: InkVector, slack: Double = 1e-9) -> Bool {
        capsules.withUnsafeBufferPointer { capsules in
            if let hinted = hinted(for: p), Self.room(p, in: capsules[hinted]) >= -slack { return true }
            return anyCandidate(p) { index in
                guard Self.room(p, in: capsules[index]) >= -slack else { return false }
                hint.capsule = index
                return true
            }
        }
    }

    /// The hinted capsule, if it is one of the candidates for `p` (its cells hold `p`'s cell).
    @inline(__always)
    private func hinted(for p: InkVector) -> Int? {
        let index = hint.capsule
        guard index >= 0 else { return nil }
        let (low, high) = bounds(capsules[index]), cell = cellOf(p)
        return cell.0 >= low.0 && cell.0 <= high.0 && cell.1 >= low.1 && cell.1 <= high.1 ? index : nil
    }

    /// Whether a curve lies inside: its control points do, and it is covered by halves (of
    /// halves…) whose control points each lie in a single capsule.
    func contains(_ curve: Cubic) -> Bool {
        guard contains(curve.p0), contains(curve.c1), contains(curve.c2), contains(curve.p3) else { return false }
        return covered(curve, depth: 7)
    }

    private func covered(_ curve: Cubic, depth: Int) -> Bool {
        let inOne = capsules.withUnsafeBufferPointer { capsules in
            func holds(_ c: Capsule) -> Bool {
                Self.room(curve.p0, in: c) >= -1e-9 && Self.room(curve.c1, in: c) >= -1e-9
                    && Self.room(curve.c2, in: c) >= -1e-9 && Self.room(curve.p3, in: c) >= -1e-9
            }
            if let hinted = hinted(for: curve.p0), holds(capsules[hinted]) { return true }
            return anyCandidate(curve.p0) { index in
                guard holds(capsules[index]) else { return false }
                hint.capsule = index
                return true
            }
        }
        if inOne { return true }
        guard depth > 0 else { return false }
        let (first, second) = curve.halves
        return covered(first, depth: depth - 1) && covered(second, depth: depth - 1)
    }
}
