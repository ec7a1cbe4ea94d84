#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
public import CanvasCore

/// How pencil pressure scales a pen's width: half pressure draws the set width.
public enum PenProfile {
    public static let minimumFactor = 0.3
    public static let maximumFactor = 1.7

    public static func factor(pressure: Double?) -> Double {
        guard let pressure else { return 1 }
        return minimumFactor + (maximumFactor - minimumFactor) * pressure
    }
}

/// The shape of a stroke: its envelope (where ink may go), and a centre line that smooths the
/// jitter of a pen's samples away, with the radius of the ink at each of its samples chosen so
/// that the disc there lies inside the envelope.
///
/// No curve is put through the input points (a Catmull-Rom spline overshoots a sharp turn by a
/// quarter of the segments beside it: 25 pt past a hairpin between two 200 pt strokes). The
/// samples are the input points smoothed as a polyline (Taubin's λ|μ smoothing, which damps a
/// digitizer's sample-to-sample noise without shrinking loops); the outline's curve fit does
/// the rest.
public enum StrokeGeometry {
    public struct Sample: Equatable, Sendable {
        public var x: Double
        public var y: Double
        public var radius: Double
    }

    /// How much of the room between a sample and the envelope's edge its disc may take: the
    /// rest is for a fitted curve, and for a round cap made of Béziers (whose control points
    /// stand off the circle by 3.5% at an eighth of a turn).
    static let inset = 0.94
    /// How far past a point's own radius the envelope reaches (spec §4): what smoothing a
    /// stylus's noise may move the line by, in points. Never past 0.85 × width.
    public static let allowance = 0.5

    /// The radius a point's pressure gives: `width × factor / 2`, so 0.85 × width at full
    /// pressure, half the width without pressure.
    static func radius(_ point: InkPoint, of stroke: Stroke) -> Double {
        stroke.width * PenProfile.factor(pressure: point.pressure) / 2
    }

    /// The envelope's radius at a point: its own radius and the allowance, at most
    /// 0.85 × width (spec §4).
    static func reach(_ point: InkPoint, of stroke: Stroke) -> Double {
        min(stroke.width * PenProfile.maximumFactor / 2, radius(point, of: stroke) + allowance)
    }

    /// The envelope of a pen stroke.
    static func envelope(_ stroke: Stroke, deadline: RenderDeadline = .none) throws(RenderError) -> InkEnvelope {
        try InkEnvelope(stroke.points.map { InkVector($0.x, $0.y) }, radii: stroke.points.map { reach($0, of: stroke) }, deadline: deadline)
    }

    /// The samples of a pen's centre line, each with the radius of the ink there.
    public static func smoothed(_ stroke: Stroke) -> [Sample] {
        // Without a deadline nothing throws.
        try! centreLine(stroke, envelope: envelope(stroke))
    }

    static func centreLine(_ stroke: Stroke, envelope: InkEnvelope, deadline: RenderDeadline = .none) throws(RenderError) -> [Sample] {
        let points = merged(stroke.points.map { Sample(x: $0.x, y: $0.y, radius: radius($0, of: stroke)) })
        let centres = smoothedCentres(points)
        let radii = smoothedRadii(points.map(\.radius))
        func sample(_ k: Int) -> Sample {
            let room = envelope.room(centres[k])
            // Where smoothing took the line too near the envelope's edge (a sharp corner of
            // sparse points), the point stays where it was drawn.
            if room >= 0.5 * points[k].radius { return Sample(x: centres[k].x, y: centres[k].y, radius: min(radii[k], inset * room)) }
            let point = points[k]
            return Sample(x: point.x, y: point.y, radius: min(point.radius, inset * envelope.room(InkVector(point.x, point.y))))
        }
        var samples: [Sample] = []
        samples.reserveCapacity(points.count)
        for k in points.indices {
            // Each asks the envelope: where many capsules cross (points far apart), this is
            // the slow part of a stroke.
            try deadline.check(step: k, "smooth the centre line of \(points.count) points")
            samples.append(sample(k))
        }
        return samples
    }

    /// A highlighter's centre line (its ink is the line stroked at the stroke's width).
    static func highlighterLine(_ stroke: Stroke) -> [InkVector] {
        smoothedCentres(merged(stroke.points.map { Sample(x: $0.x, y: $0.y, radius: stroke.width / 2) }))
    }

    /// Points closer than 0.05 pt to the one before are one point: its disc keeps whatever
    /// part of theirs it can without leaving their envelope.
    static func merged(_ samples: [Sample]) -> [Sample] {
        var out: [Sample] = []
        out.reserveCapacity(samples.count)
        for s in samples {
            if let last = out.last {
                let distance = ((last.x - s.x) * (last.x - s.x) + (last.y - s.y) * (last.y - s.y)).squareRoot()
                if distance < 0.05 {
                    out[out.count - 1].radius = max(last.radius, s.radius - distance)
                    continue
                }
            }
            out.append(s)
        }
        return out
    }

    /// Passes of Taubin's smoothing: a step towards the neighbours' mean (λ), then one away
    /// from it (μ), which together damp what changes from sample to sample and keep what
    /// changes over a dozen samples. The ends, points where the line turns by a right angle or
    /// more (a hairpin's tip, a cusp), and points far from their neighbours stay where they are.
    static let passes = 12

    static func smoothedCentres(_ samples: [Sample]) -> [InkVector] {
        var centres = samples.map { InkVector($0.x, $0.y) }
        let count = centres.count
        guard count > 2 else { return centres }
        var pinned = [Bool](repeating: false, count: count)
        pinned[0] = true
        pinned[count - 1] = true
        for k in 1..<(count - 1) {
            // A turn back between segments shorter than the ink is wide is the noise of a pen
            // slowing down, not a corner the writer made.
            // A point far from both neighbours is where the writer put it.
            let before = centres[k] - centres[k - 1], after = centres[k + 1] - centres[k]
            let shorter = min(before.length, after.length)
            if shorter >= 4 * samples[k].radius { pinned[k] = true }
            guard shorter >= samples[k].radius else { continue }
            if let a = before.unit, let b = after.unit, a.dot(b) < 0.05 { pinned[k] = true }
        }
        var next = centres
        for _ in 0..<passes {
            for factor in [0.5, -0.53] {
                for k in 1..<(count - 1) where !pinned[k] {
                    let mean = (centres[k - 1] + centres[k + 1]) * 0.5
                    next[k] = centres[k] + (mean - centres[k]) * factor
                }
                swap(&centres, &next)
            }
        }
        // Smoothing is for noise: no point moves farther than the allowance, nor than its own
        // radius (between points far apart, the mean of the neighbours is no estimate of where
        // the line went: a hairpin between two long strokes would lose its tip).
        for k in 0..<count {
            let shift = centres[k] - InkVector(samples[k].x, samples[k].y), limit = min(allowance, samples[k].radius)
            if shift.length > limit { centres[k] = InkVector(samples[k].x, samples[k].y) + shift * (limit / shift.length) }
        }
        return centres
    }

    /// The radii with the pressure sensor's sample-to-sample noise damped the same way.
    static func smoothedRadii(_ radii: [Double]) -> [Double] {
        var radii = radii
        let count = radii.count
        guard count > 2 else { return radii }
        var next = radii
        for _ in 0..<passes {
            for factor in [0.5, -0.53] {
                for k in 1..<(count - 1) { next[k] = max(0, radii[k] + ((radii[k - 1] + radii[k + 1]) * 0.5 - radii[k]) * factor) }
                swap(&radii, &next)
            }
        }
        return radii
    }
}
