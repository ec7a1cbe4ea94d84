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

/// The shape of a stroke: a Catmull-Rom curve through its points, sampled finely, with the
/// radius of the ink at each sample.
public enum StrokeGeometry {
    public struct Sample: Equatable, Sendable {
        public var x: Double
        public var y: Double
        public var radius: Double
    }

    /// Samples along the curve. Each span between two input points gets a sample at least every
    /// radius, so the outline follows the curve closely at any width.
    public static func smoothed(_ stroke: Stroke, ignoringPressure: Bool = false) -> [Sample] {
        let points = stroke.points
        func radius(_ point: InkPoint) -> Double {
            stroke.width * (ignoringPressure ? 1 : PenProfile.factor(pressure: point.pressure)) / 2
        }
        var samples = [Sample(x: points[0].x, y: points[0].y, radius: radius(points[0]))]
        guard points.count > 1 else { return samples }
        for index in 0..<(points.count - 1) {
            let p0 = points[max(index - 1, 0)], p1 = points[index], p2 = points[index + 1]
            let p3 = points[min(index + 2, points.count - 1)]
            let length = ((p2.x - p1.x) * (p2.x - p1.x) + (p2.y - p1.y) * (p2.y - p1.y)).squareRoot()
            let r1 = radius(p1), r2 = radius(p2)
            let steps = max(1, min(64, Int((length / max(0.5, min(r1, r2))).rounded(.up))))
            for step in 1...steps {
                let t = Double(step) / Double(steps)
                let t2 = t * t, t3 = t2 * t
                // Uniform Catmull-Rom: passes through p1 at t = 0 and p2 at t = 1.
                func blend(_ a: Double, _ b: Double, _ c: Double, _ d: Double) -> Double {
                    0.5 * (2 * b + (-a + c) * t + (2 * a - 5 * b + 4 * c - d) * t2 + (-a + 3 * b - 3 * c + d) * t3)
                }
                samples.append(Sample(x: blend(p0.x, p1.x, p2.x, p3.x), y: blend(p0.y, p1.y, p2.y, p3.y),
                                      radius: r1 + (r2 - r1) * t))
            }
        }
        return samples
    }
}
