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
/// samples are the input points, each moved to a weighted mean of its neighbours within a
/// short distance along the line; the outline's curve fit does the rest of the smoothing.
public enum StrokeGeometry {
    public struct Sample: Equatable, Sendable {
        public var x: Double
        public var y: Double
        public var radius: Double
    }

    /// How much thinner than its envelope the drawn ink is: the room a fitted curve and a round
    /// cap made of Béziers (whose control points stand off the circle by 3.5% at an eighth of a
    /// turn) need to stay inside it.
    static let inset = 0.94

    /// The radius a point's pressure gives: `width × factor / 2`, so 0.85 × width at full
    /// pressure.
    static func radius(_ point: InkPoint, of stroke: Stroke, ignoringPressure: Bool) -> Double {
        stroke.width * (ignoringPressure ? 1 : PenProfile.factor(pressure: point.pressure)) / 2
    }

    /// The envelope of a pen stroke: discs of the pressure's radius along its input polyline.
    static func envelope(_ stroke: Stroke) -> InkEnvelope {
        InkEnvelope(stroke.points.map { InkVector($0.x, $0.y) }, radii: stroke.points.map { radius($0, of: stroke, ignoringPressure: false) })
    }

    /// The samples of a pen's centre line, each with the radius of the ink there.
    public static func smoothed(_ stroke: Stroke) -> [Sample] { centreLine(stroke, envelope: envelope(stroke)) }

    static func centreLine(_ stroke: Stroke, envelope: InkEnvelope) -> [Sample] {
        let points = merged(stroke.points.map { Sample(x: $0.x, y: $0.y, radius: radius($0, of: stroke, ignoringPressure: false)) })
        let typical = points.map(\.radius).sorted()[points.count / 2]
        let moved = smoothedCentres(points, sigma: min(max(0.5 * typical, 0.1), 1.2))
        return zip(points, moved).map { point, centre in
            let nominal = point.radius
            let room = envelope.room(centre)
            // Where smoothing took the line too near the envelope's edge (a sharp corner of
            // sparse points), the point stays where it was drawn.
            if room >= 0.8 * nominal { return Sample(x: centre.x, y: centre.y, radius: inset * min(nominal, room)) }
            return Sample(x: point.x, y: point.y, radius: inset * min(nominal, envelope.room(InkVector(point.x, point.y))))
        }
    }

    /// A highlighter's centre line (its ink is the line stroked at the stroke's width).
    static func highlighterLine(_ stroke: Stroke) -> [InkVector] {
        let points = merged(stroke.points.map { Sample(x: $0.x, y: $0.y, radius: stroke.width / 2) })
        return smoothedCentres(points, sigma: min(max(0.15 * stroke.width, 0.1), 1.2))
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

    /// Each point moved to the Gaussian-weighted mean (by distance along the line, `sigma`) of
    /// the points near it. The ends, and points where the line turns back by more than a right
    /// angle, stay put, and no mean reaches across them, so a hairpin keeps its tip.
    static func smoothedCentres(_ samples: [Sample], sigma: Double) -> [InkVector] {
        let centres = samples.map { InkVector($0.x, $0.y) }
        let count = centres.count
        guard count > 2 else { return centres }
        var along = [0.0]
        along.reserveCapacity(count)
        for k in 1..<count { along.append(along[k - 1] + (centres[k] - centres[k - 1]).length) }
        var pinned = [Bool](repeating: false, count: count)
        pinned[0] = true
        pinned[count - 1] = true
        for k in 1..<(count - 1) {
            if let a = (centres[k] - centres[k - 1]).unit, let b = (centres[k + 1] - centres[k]).unit, a.dot(b) < 0 { pinned[k] = true }
        }
        let reach = 3 * sigma
        var out = centres
        for k in 0..<count where !pinned[k] {
            var sum = InkVector(0, 0), weight = 0.0
            var j = k
            while j > 0 && !pinned[j] && along[k] - along[j - 1] <= reach { j -= 1 }
            while j < count && along[j] - along[k] <= reach {
                let d = (along[j] - along[k]) / sigma
                let w = exp(-0.5 * d * d)
                sum = sum + centres[j] * w
                weight += w
                if pinned[j] && j > k { break }
                j += 1
            }
            out[k] = sum * (1 / weight)
        }
        return out
    }
}
