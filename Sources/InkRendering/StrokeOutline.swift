public import CanvasCore

/// The outline of a stroke as one path of Bézier curves: what is filled (pen) or stroked
/// (highlighter) to draw it.
///
/// A pen stroke is the area swept by a disc along the smoothed centre line, its radius
/// following the pressure: the two offset curves of the centre line, joined by round caps, in
/// the manner of perfect-freehand and of Xournal++'s on-screen contour. Where the centre line
/// turns around a loop tighter than the ink is wide, the inner offset curve folds back over
/// itself and, filled with the nonzero rule, would cut a hole into the ink: the fold is cut out
/// at its crossing. Where the line doubles back (a cusp), the outline is split into pieces that
/// each close with round caps, all wound the same way, so their union fills exactly.
public enum StrokeOutline {
    /// How far a fitted curve may stray from the exact offset, in points, at most: under a
    /// tenth of a pixel at 72 dpi. Thin strokes fit closer (`tolerance(for:)`), since the room
    /// between the ink and its envelope is a share of the width.
    public static let tolerance = 0.15
    /// A piece ends where the centre line turns by more than this at one sample (radians):
    /// where it doubles back rather than curves.
    static let cusp = 1.75

    static func tolerance(for samples: [StrokeGeometry.Sample]) -> Double {
        let typical = samples.map(\.radius).sorted()[samples.count / 2]
        return min(tolerance, max(0.01, 0.15 * typical))
    }

    /// The filled outline of a pen stroke (nonzero winding), inside the stroke's envelope
    /// (`InkEnvelope`): each curve of it is checked, control points included, and one that
    /// leaves the envelope is drawn as lines between the points it was fitted to instead. If
    /// even those leave it (a shape no piece of this construction fits), the stroke is drawn as
    /// the envelope's own capsules, each a polygon with its corners on its two circles.
    public static func pen(_ stroke: Stroke) -> InkPath {
        // Without a deadline nothing throws.
        try! pen(stroke, deadline: .none)
    }

    /// `pen(_:)`, stopped when `deadline` passes (checked along the stroke's envelope, centre
    /// line and outline: a stroke of `maxPointsPerStroke` points is seconds of work).
    public static func pen(_ stroke: Stroke, deadline: RenderDeadline) throws(RenderError) -> InkPath {
        let envelope = try StrokeGeometry.envelope(stroke, deadline: deadline)
        let samples = try withoutSwallowedDiscs(deduplicated(StrokeGeometry.centreLine(stroke, envelope: envelope, deadline: deadline)),
                                                deadline: deadline)
        let quantum = quantum(width: stroke.width)
        if var path = try outline(of: samples, within: envelope, quantum: quantum, deadline: deadline) {
            path.quantum = quantum
            return path
        }
        return capsules(stroke).snapped(quantum)
    }

    static func quantum(width: Double) -> Double {
        var quantum = 1.0 / 32
        while quantum > width / 128 { quantum /= 2 }
        return quantum
    }

    /// The centre line of a highlighter stroke, to be stroked at the stroke's width with round
    /// caps and joins: one painted shape, so where it crosses itself it does not darken twice.
    /// The line stays within 0.35 × width and 0.5 pt of the input points, so the ink stays
    /// inside the envelope a pen without pressure has (spec §4).
    public static func highlighter(_ stroke: Stroke) -> InkPath {
        // Without a deadline nothing throws.
        try! highlighter(stroke, deadline: .none)
    }

    /// `highlighter(_:)`, stopped when `deadline` passes.
    public static func highlighter(_ stroke: Stroke, deadline: RenderDeadline) throws(RenderError) -> InkPath {
        let points = StrokeGeometry.highlighterLine(stroke)
        var path = InkPath()
        path.move(to: points[0])
        if points.count == 1 {
            // A zero-length segment: with round caps, a dot.
            path.line(to: points[0])
            return path
        }
        let reach = min(0.35 * stroke.width, StrokeGeometry.allowance)
        let envelope = try InkEnvelope(stroke.points.map { InkVector($0.x, $0.y) }, radii: Array(repeating: reach, count: stroke.points.count),
                                       deadline: deadline)
        let fitted = CurveFit.fitSpans(points, tolerance: min(tolerance, 0.1 * reach))
        for (index, span) in fitted.curves.enumerated() {
            try deadline.check(step: index, "outline a highlighter stroke of \(stroke.points.count) points")
            if envelope.contains(span.curve) {
                path.curve(span.curve.c1, span.curve.c2, span.curve.p3)
            } else {
                for index in (span.points.lowerBound + 1)...span.points.upperBound { path.line(to: fitted.points[index]) }
            }
        }
        return path
    }

    static func deduplicated(_ samples: [StrokeGeometry.Sample]) -> [StrokeGeometry.Sample] {
        var out: [StrokeGeometry.Sample] = []
        out.reserveCapacity(samples.count)
        for s in samples {
            if let last = out.last, abs(last.x - s.x) < 1e-6, abs(last.y - s.y) < 1e-6 {
                out[out.count - 1].radius = max(last.radius, s.radius)
            } else {
                out.append(s)
            }
        }
        return out
    }

    /// Drops samples whose disc lies inside a neighbour's (pressure rising faster than the pen
    /// moves): they add no ink, and between the rest the outline has a tangent on both sides.
    static func withoutSwallowedDiscs(_ samples: [StrokeGeometry.Sample], deadline: RenderDeadline = .none) throws(RenderError)
        -> [StrokeGeometry.Sample] {
        var samples = samples
        func inside(_ a: StrokeGeometry.Sample, _ b: StrokeGeometry.Sample) -> Bool {
            ((a.x - b.x) * (a.x - b.x) + (a.y - b.y) * (a.y - b.y)).squareRoot() + a.radius <= b.radius + 1e-9
        }
        while samples.count > 1 {
            // Each pass may drop as little as one sample of a long run of swelling discs.
            try deadline.check("drop the swallowed discs of \(samples.count) samples")
            var kept: [StrokeGeometry.Sample] = []
            for (i, sample) in samples.enumerated() {
                let swallowed = (i > 0 && inside(sample, samples[i - 1])) || (i < samples.count - 1 && inside(sample, samples[i + 1]))
                if !swallowed || (kept.isEmpty && i == samples.count - 1) { kept.append(sample) }
            }
            if kept.count == samples.count { break }
            samples = kept
        }
        return samples
    }

    /// The outline of the samples' discs, or nil if some part of it would leave `envelope`.
    static func outline(of samples: [StrokeGeometry.Sample], within envelope: InkEnvelope, quantum: Double,
                        deadline: RenderDeadline = .none) throws(RenderError) -> InkPath? {
        var path = InkPath()
        guard samples.count > 1 else {
            for eighths in [false, true] {
                var dot = InkPath()
                circle(InkVector(samples[0].x, samples[0].y), samples[0].radius, eighths: eighths, into: &dot)
                dot = dot.snapped(quantum)
                if contained(dot, within: envelope) { return dot }
            }
            return nil
        }
        let tolerance = tolerance(for: samples)
        for piece in pieces(samples) {
            try deadline.check("outline a stroke of \(samples.count) samples")
            guard try addFitting(samples, piece, tolerance: tolerance, quantum: quantum, within: envelope, deadline: deadline, into: &path)
            else { return nil }
        }
        return path
    }

    /// A piece, or where it does not fit inside the envelope, its two halves, cut at its middle
    /// sample and each closed with round caps as a cusp's pieces are (their union fills the
    /// same ink), and so on down to pieces of one segment. Such a segment does not fit where
    /// the smoothed centre line cuts a corner of the line drawn: each sample's disc is inside
    /// the envelope, but between them the ink would reach past it. It gets samples between its
    /// ends, each as wide as the envelope has room for there (a waist over a point or so, no
    /// less than a quarter as wide: on a 0.3 pt pen, one of UNIPEN's words needs 0.47; the
    /// two ends keep their discs, which reach the points drawn). Before, one side's line that
    /// left the envelope sent the whole stroke to `capsules`: a 593-point stroke of Xournal++'s
    /// own documentation (0.85 pt, with pressure) became 592 polygons of 16 corners, 52.5 KB
    /// of PDF.
    private static func addFitting(_ samples: [StrokeGeometry.Sample], _ range: ClosedRange<Int>, tolerance: Double, quantum: Double,
                                   within envelope: InkEnvelope, deadline: RenderDeadline, into path: inout InkPath) throws(RenderError) -> Bool {
        let before = path.elements.count
        if try addPiece(samples, range, tolerance: tolerance, quantum: quantum, within: envelope, deadline: deadline, into: &path) { return true }
        path.elements.removeSubrange(before...)
        guard range.count > 2 else {
            let a = samples[range.lowerBound], b = samples[range.upperBound]
            // 1, 3 or 7 samples between the two, each as wide as the envelope leaves room for
            // there (with the share a sample's disc may take of it), never under a quarter of the
            // width the two ends would give it.
            for parts in [2, 4, 8] {
                var waisted = [a]
                for k in 1..<parts {
                    let t = Double(k) / Double(parts)
                    let centre = InkVector(a.x + (b.x - a.x) * t, a.y + (b.y - a.y) * t)
                    let full = a.radius + (b.radius - a.radius) * t
                    let radius = min(full, StrokeGeometry.inset * envelope.room(centre))
                    // Every place of these samples is one of the finer tries' too: no room
                    // here is no room there.
                    guard radius >= full / 4 else { return false }
                    waisted.append(StrokeGeometry.Sample(x: centre.x, y: centre.y, radius: radius))
                }
                waisted.append(b)
                if try addPiece(waisted, 0...parts, tolerance: tolerance, quantum: quantum, within: envelope, deadline: deadline, into: &path) {
                    return true
                }
                path.elements.removeSubrange(before...)
            }
            return false
        }
        let middle = (range.lowerBound + range.upperBound) / 2
        for half in [range.lowerBound...middle, middle...range.upperBound] {
            guard try addFitting(samples, half, tolerance: tolerance, quantum: quantum, within: envelope, deadline: deadline, into: &path)
            else { return false }
        }
        return true
    }

    /// Whether every segment of `path` lies inside `envelope`.
    static func contained(_ path: InkPath, within envelope: InkEnvelope) -> Bool {
        var current = InkVector(0, 0), start = current
        for element in path.elements {
            switch element {
            case .move(let p):
                current = p
                start = p
            case .line(let p):
                guard envelope.contains(Cubic.line(current, p)) else { return false }
                current = p
            case .curve(let c1, let c2, let p):
                guard envelope.contains(Cubic(p0: current, c1: c1, c2: c2, p3: p)) else { return false }
                current = p
            case .close:
                guard envelope.contains(Cubic.line(current, start)) else { return false }
                current = start
            }
        }
        return true
    }

    /// The last resort: each segment of the input polyline as the convex hull of its two discs
    /// (a little smaller than the envelope's), a polygon whose corners lie on the circles, so
    /// it is inside by construction. Each is wound as the outline pieces are.
    static func capsules(_ stroke: Stroke) -> InkPath {
        var path = InkPath()
        let discs = stroke.points.map { point in
            StrokeGeometry.Sample(x: point.x, y: point.y,
                                  radius: min(StrokeGeometry.radius(point, of: stroke), StrokeGeometry.inset * StrokeGeometry.reach(point, of: stroke)))
        }
        for k in discs.indices.dropLast(discs.count > 1 ? 1 : 0) {
            let a = discs[k], b = discs[min(k + 1, discs.count - 1)]
            let capsule = (a: InkVector(a.x, a.y), b: InkVector(b.x, b.y))
            let length = (capsule.b - capsule.a).length
            guard let t = tangents(a, b), length > abs(a.radius - b.radius) else {
                let big = a.radius >= b.radius ? a : b
                polygonArc(around: InkVector(big.x, big.y), radius: big.radius, from: InkVector(1, 0), via: InkVector(-1, 0),
                           to: InkVector(1, 0), moving: true, into: &path)
                path.close()
                continue
            }
            let direction = (capsule.b - capsule.a) * (1 / length)
            path.move(to: capsule.a + t.left * a.radius)
            polygonArc(around: capsule.b, radius: b.radius, from: t.left, via: direction, to: t.right, moving: false, into: &path)
            polygonArc(around: capsule.a, radius: a.radius, from: t.right, via: -direction, to: t.left, moving: false, into: &path)
            path.close()
        }
        return path
    }

    /// Lines from the circle's point `from` (a unit vector) round to `to` the way that passes
    /// `via`, corners on the circle at most 30° apart; the first corner starts the subpath if
    /// `moving`, else is drawn to.
    private static func polygonArc(around centre: InkVector, radius: Double, from: InkVector, via: InkVector, to: InkVector,
                                   moving: Bool, into path: inout InkPath) {
        let turn = from.cross(via) >= 0 ? 1.0 : -1.0
        var sweep = turn * (atan2(from.cross(to), from.dot(to)))
        if sweep <= 1e-9 { sweep += 2 * Double.pi }
        let parts = max(1, Int((sweep / (Double.pi / 6) - 1e-9).rounded(.up)))
        let first = centre + from * radius
        if moving { path.move(to: first) } else { path.line(to: first) }
        for k in 1...parts {
            let angle = turn * sweep * Double(k) / Double(parts)
            let d = InkVector(from.x * cos(angle) - from.y * sin(angle), from.x * sin(angle) + from.y * cos(angle))
            path.line(to: centre + d * radius)
        }
    }

    /// Index ranges of samples (each at least one segment) that make one piece each: the stroke
    /// is cut where it doubles back (a cusp), and the cut's round caps make the join. A turn
    /// is measured over the ink's radius on either side of a sample, so a reversal spread over
    /// a few samples (a pen's quick flick up and back) is a cusp too: there, one offset side
    /// would fold across the other and the outline would fill the gap between the two legs.
    static func pieces(_ samples: [StrokeGeometry.Sample]) -> [ClosedRange<Int>] {
        let centres = samples.map { InkVector($0.x, $0.y) }
        let count = samples.count
        var turns = [Double](repeating: 0, count: count)
        for i in 1..<(count - 1) {
            let reach = samples[i].radius
            var j = i - 1, travelled = (centres[i] - centres[j]).length
            while j > 0 && i - j < 8 && travelled < reach {
                travelled += (centres[j] - centres[j - 1]).length
                j -= 1
            }
            var l = i + 1
            travelled = (centres[l] - centres[i]).length
            while l < count - 1 && l - i < 8 && travelled < reach {
                travelled += (centres[l + 1] - centres[l]).length
                l += 1
            }
            guard let a = (centres[i] - centres[j]).unit, let b = (centres[l] - centres[i]).unit else { continue }
            turns[i] = acos(max(-1, min(1, a.dot(b))))
        }
        var breaks = Set<Int>()
        let cosCusp = cos(cusp)
        for i in 1..<max(count - 1, 1) {
            guard let a = (centres[i] - centres[i - 1]).unit, let b = (centres[i + 1] - centres[i]).unit else { continue }
            if a.dot(b) < cosCusp { breaks.insert(i) }
        }
        var last = -2
        for i in 1..<max(count - 1, 1) where turns[i] > cusp && turns[i] >= turns[i - 1] && turns[i] >= turns[i + 1] && i - last >= 2 && !breaks.contains(i - 1) && !breaks.contains(i + 1) {
            breaks.insert(i)
            last = i
        }
        return split(count, at: breaks)
    }

    /// The side with each fold cut out: where the offset runs backwards against the centre line
    /// (the swallowtail of an offset around a turn tighter than the ink is wide), the segments
    /// before and after the fold cross; the side goes straight to that crossing, which is where
    /// the edge of the ink really is, and makes a corner there (`corners`, indices into `side`).
    /// A backward step with no crossing near it (a zigzag, which fills correctly) is kept.
    static func clippedFolds(_ side: [InkVector], along centre: [InkVector]) -> (side: [InkVector], corners: Set<Int>) {
        let count = side.count
        func backwards(_ k: Int) -> Bool { (side[k + 1] - side[k]).dot(centre[k + 1] - centre[k]) <= 0 }
        var out: [InkVector] = [side[0]]
        var corners = Set<Int>()
        var k = 0  // `out` ends with side[k]; segment k is next
        var floor = 0  // `out` ends with side[floor...k], unchanged
        while k < count - 1 {
            guard backwards(k) else {
                out.append(side[k + 1])
                k += 1
                continue
            }
            var end = k
            while end < count - 1 && backwards(end) { end += 1 }
            // Segments k..<end run backwards. Look for the crossing of a segment that ends at
            // or before k with one that starts at or after end, the nearest pair first.
            // (Bounded, so that no input makes this quadratic.)
            let reach = min(2 * (end - k) + 16, 48)
            var found: (i: Int, j: Int, point: InkVector)?
            search: for span in 0...(2 * reach) {
                for back in 0...span {
                    let i = k - 1 - back, j = end + (span - back)
                    guard i >= floor, j < count - 1 else { continue }
                    // A swallowtail's crossing lies within the ink around the fold; one farther
                    // away is the side crossing another part of itself, which is no fold.
                    if let x = crossing(side[i], side[i + 1], side[j], side[j + 1]),
                       (x - centre[k]).length <= 2 * (side[k] - centre[k]).length {
                        found = (i, j, x)
                        break search
                    }
                }
            }
            guard let found else {
                for index in (k + 1)...end { out.append(side[index]) }
                k = end
                continue
            }
            // Drop what was appended after side[i], then go through the crossing.
            out.removeLast(k - found.i)
            corners.insert(out.count)
            out.append(found.point)
            out.append(side[found.j + 1])
            k = found.j + 1
            floor = k
        }
        return (out, corners)
    }

    /// Where segments a0-a1 and b0-b1 cross, if they do.
    private static func crossing(_ a0: InkVector, _ a1: InkVector, _ b0: InkVector, _ b1: InkVector) -> InkVector? {
        let r = a1 - a0, s = b1 - b0
        let denominator = r.cross(s)
        guard abs(denominator) > 1e-12 else { return nil }
        let t = (b0 - a0).cross(s) / denominator, u = (b0 - a0).cross(r) / denominator
        guard t >= 0, t <= 1, u >= 0, u <= 1 else { return nil }
        return a0 + r * t
    }

    private static func split(_ count: Int, at breaks: Set<Int>) -> [ClosedRange<Int>] {
        var ranges: [ClosedRange<Int>] = []
        var start = 0
        for index in breaks.sorted() {
            ranges.append(start...index)
            start = index
        }
        ranges.append(start...(count - 1))
        return ranges
    }

    /// The left and right offset points of a piece's samples, where the ink's edge touches
    /// each sample's disc: for two discs of different radii the common tangent leans back (or
    /// forward) from the normal by the angle whose sine is the change in radius over the
    /// distance. Inside a piece a sample's offsets bisect those of its two segments; at the
    /// ends they are the end segment's own.
    static func sides(_ samples: [StrokeGeometry.Sample], _ range: ClosedRange<Int>) -> (left: [InkVector], right: [InkVector]) {
        var left: [InkVector] = [], right: [InkVector] = []
        left.reserveCapacity(range.count)
        right.reserveCapacity(range.count)
        for i in range {
            let c = InkVector(samples[i].x, samples[i].y)
            let (l, r) = offsetDirections(samples, i, range)
            left.append(c + l * samples[i].radius)
            right.append(c + r * samples[i].radius)
        }
        return (left, right)
    }

    /// The unit vectors from a segment's discs' centres to its two tangent lines.
    static func tangents(_ a: StrokeGeometry.Sample, _ b: StrokeGeometry.Sample) -> (left: InkVector, right: InkVector)? {
        let d = InkVector(b.x - a.x, b.y - a.y)
        guard let t = d.unit else { return nil }
        let sine = max(-0.999, min(0.999, (b.radius - a.radius) / d.length))
        let cosine = (1 - sine * sine).squareRoot()
        return (t.left * cosine - t * sine, -t.left * cosine - t * sine)
    }

    static func offsetDirections(_ samples: [StrokeGeometry.Sample], _ i: Int, _ range: ClosedRange<Int>) -> (left: InkVector, right: InkVector) {
        let before = i > range.lowerBound ? tangents(samples[i - 1], samples[i]) : nil
        let after = i < range.upperBound ? tangents(samples[i], samples[i + 1]) : nil
        switch (before, after) {
        case let (b?, a?): return ((b.left + a.left).unit ?? a.left, (b.right + a.right).unit ?? a.right)
        case let (b?, nil): return b
        case let (nil, a?): return a
        case (nil, nil): return (InkVector(0, -1), InkVector(0, 1))
        }
    }

    private static func direction(_ samples: [StrokeGeometry.Sample], _ i: Int, _ range: ClosedRange<Int>) -> InkVector {
        func point(_ k: Int) -> InkVector { InkVector(samples[k].x, samples[k].y) }
        let before = i > range.lowerBound ? (point(i) - point(i - 1)).unit : nil
        let after = i < range.upperBound ? (point(i + 1) - point(i)).unit : nil
        switch (before, after) {
        case let (b?, a?): return (b + a).unit ?? a
        case let (b?, nil): return b
        case let (nil, a?): return a
        case (nil, nil): return InkVector(1, 0)
        }
    }

    /// One piece: the left side forward, a round cap, the right side back, a round cap. False
    /// if some part of it would leave `envelope`.
    private static func addPiece(_ samples: [StrokeGeometry.Sample], _ range: ClosedRange<Int>, tolerance: Double, quantum: Double,
                                 within envelope: InkEnvelope, deadline: RenderDeadline, into path: inout InkPath) throws(RenderError) -> Bool {
        let (rawLeft, rawRight) = sides(samples, range)
        let centre = range.map { InkVector(samples[$0].x, samples[$0].y) }
        let left = clippedFolds(rawLeft, along: centre), right = clippedFolds(Array(rawRight.reversed()), along: centre.reversed())
        let start = InkVector(samples[range.lowerBound].x, samples[range.lowerBound].y)
        let end = InkVector(samples[range.upperBound].x, samples[range.upperBound].y)
        let startDirection = direction(samples, range.lowerBound, range)
        let endDirection = direction(samples, range.upperBound, range)
        let startOffsets = offsetDirections(samples, range.lowerBound, range)
        let endOffsets = offsetDirections(samples, range.upperBound, range)
        path.move(to: left.side[0].snapped(quantum))
        let fit = Fit(tolerance: tolerance, quantum: quantum, envelope: envelope, deadline: deadline)
        guard try fit.side(left.side, corners: left.corners, into: &path) else { return false }
        // End cap: from the left offset, round the front, to the right offset.
        guard fit.cap(around: end, radius: samples[range.upperBound].radius, from: endOffsets.left, via: endDirection, to: endOffsets.right,
                      into: &path) else { return false }
        guard try fit.side(right.side, corners: right.corners, into: &path) else { return false }
        guard fit.cap(around: start, radius: samples[range.lowerBound].radius, from: startOffsets.right, via: -startDirection,
                      to: startOffsets.left, into: &path) else { return false }
        path.close()
        return true
    }

    /// How the parts of an outline are fitted: on the quantum's grid, inside the envelope.
    struct Fit {
        let tolerance: Double
        let quantum: Double
        let envelope: InkEnvelope
        var deadline = RenderDeadline.none

        /// One side of a piece, fitted with curves; a curve that would leave the envelope is
        /// fitted again as two halves, and two points that no curve joins inside it are joined
        /// by a line. False if even the line leaves it.
        func side(_ points: [InkVector], corners: Set<Int>, into path: inout InkPath) throws(RenderError) -> Bool {
            let fitted = CurveFit.fitSpans(points, tolerance: tolerance, corners: corners)
            for (index, span) in fitted.curves.enumerated() {
                try deadline.check(step: index, every: 16, "fit a side of \(points.count) points")
                guard refit(fitted.points, span, into: &path) else { return false }
            }
            return true
        }

        private func refit(_ points: [InkVector], _ span: CurveFit.Span, into path: inout InkPath) -> Bool {
            let curve = span.curve.snapped(quantum)
            if envelope.contains(curve) {
                path.curve(curve.c1, curve.c2, curve.p3)
                return true
            }
            let first = span.points.lowerBound, last = span.points.upperBound
            if last - first < 2 {
                guard envelope.contains(Cubic.line(curve.p0, curve.p3)) else { return false }
                path.line(to: curve.p3)
                return true
            }
            // Halves that meet smoothly: the tangent at the middle point is its neighbours' chord.
            let middle = (first + last) / 2
            let start = (span.curve.c1 - span.curve.p0).unit ?? (points[first + 1] - points[first]).unit!
            let end = (span.curve.c2 - span.curve.p3).unit ?? (points[last - 1] - points[last]).unit!
            let across = (points[middle - 1] - points[middle + 1]).unit ?? end
            for (range, from, to) in [(first...middle, start, across), (middle...last, -across, end)] {
                for piece in CurveFit.fit(points[range], from: from, to: to, tolerance: tolerance) {
                    guard refit(points, piece, into: &path) else { return false }
                }
            }
            return true
        }

        /// A round cap, of quarter turns where their control points stay inside the envelope,
        /// else of eighths.
        func cap(around centre: InkVector, radius: Double, from: InkVector, via: InkVector, to: InkVector, into path: inout InkPath) -> Bool {
            for eighths in [false, true] {
                var cap = InkPath()
                cap.move(to: centre + from * radius)
                arc(around: centre, radius: radius, from: from, via: via, to: to, eighths: eighths, into: &cap)
                cap = cap.snapped(quantum)
                if contained(cap, within: envelope) {
                    path.elements += cap.elements.dropFirst()
                    return true
                }
            }
            return false
        }
    }

    /// A circular arc from `centre + from * radius` to `centre + to * radius` (unit vectors),
    /// turning the way that passes `via`, as Béziers of at most a quarter turn each (whose
    /// control points stand 14% outside the circle), or an eighth (3.5%).
    private static func arc(around centre: InkVector, radius: Double, from: InkVector, via: InkVector, to: InkVector,
                            eighths: Bool, into path: inout InkPath) {
        let turn = from.cross(via) >= 0 ? 1.0 : -1.0
        var sweep = turn * (atan2(from.cross(to), from.dot(to)))
        if sweep <= 1e-9 { sweep += 2 * Double.pi }
        let parts = max(1, Int((sweep / (Double.pi / (eighths ? 4 : 2)) - 1e-9).rounded(.up)))
        let step = sweep / Double(parts)
        let handle = 4.0 / 3.0 * tan(step / 4) * radius
        var direction = from
        for _ in 0..<parts {
            let next = InkVector(direction.x * cos(step) - turn * direction.y * sin(step), turn * direction.x * sin(step) + direction.y * cos(step))
            // The tangent at each end is the radius turned a quarter the way of travel.
            let along0 = InkVector(-turn * direction.y, turn * direction.x), along1 = InkVector(-turn * next.y, turn * next.x)
            path.curve(centre + direction * radius + along0 * handle, centre + next * radius - along1 * handle, centre + next * radius)
            direction = next
        }
    }

    static func circle(_ centre: InkVector, _ radius: Double, eighths: Bool, into path: inout InkPath) {
        path.move(to: centre + InkVector(radius, 0))
        arc(around: centre, radius: radius, from: InkVector(1, 0), via: InkVector(-1, 0), to: InkVector(1, 0), eighths: eighths, into: &path)
        path.close()
    }
}

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

