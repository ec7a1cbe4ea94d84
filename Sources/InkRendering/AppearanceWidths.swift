import Foundation

/// The width of ink along its centre lines, read back from the outline an annotation's
/// appearance fills: how a pressure-sensitive tool draws a stroke whose width follows the pen
/// (one filled shape around the line), as opposed to a line stroked at one width. Used for
/// another program's `/Ink` (`InkAnnotations.readOther`): its `/InkList` says where the line
/// goes, its appearance how wide it is at each point.
enum AppearanceWidths {
    /// How the appearance's form space lands in user space (PDF 32000-1 12.5.5): the form's
    /// `/BBox` through its `/Matrix`, then scaled and moved onto the annotation's `/Rect`.
    struct Placement {
        let bbox: [Double]
        let matrix: [Double]
        let rect: [Double]

        /// The whole transform, form space to user space; nil when the entries cannot place it.
        var transform: [Double]? {
            guard bbox.count == 4, matrix.count == 6, rect.count == 4 else { return nil }
            let corners = [(bbox[0], bbox[1]), (bbox[2], bbox[1]), (bbox[0], bbox[3]), (bbox[2], bbox[3])].map { Self.apply(matrix, $0) }
            let lowX = corners.map(\.0).min()!, highX = corners.map(\.0).max()!
            let lowY = corners.map(\.1).min()!, highY = corners.map(\.1).max()!
            guard highX > lowX, highY > lowY else { return nil }
            let sx = (max(rect[0], rect[2]) - min(rect[0], rect[2])) / (highX - lowX)
            let sy = (max(rect[1], rect[3]) - min(rect[1], rect[3])) / (highY - lowY)
            let fit = [sx, 0, 0, sy, min(rect[0], rect[2]) - lowX * sx, min(rect[1], rect[3]) - lowY * sy]
            return Self.concat(matrix, fit)
        }

        static func apply(_ m: [Double], _ p: (Double, Double)) -> (Double, Double) {
            (m[0] * p.0 + m[2] * p.1 + m[4], m[1] * p.0 + m[3] * p.1 + m[5])
        }

        /// `first` then `then`.
        static func concat(_ first: [Double], _ then: [Double]) -> [Double] {
            [first[0] * then[0] + first[1] * then[2], first[0] * then[1] + first[1] * then[3],
             first[2] * then[0] + first[3] * then[2], first[2] * then[1] + first[3] * then[3],
             first[4] * then[0] + first[5] * then[2] + then[4], first[4] * then[1] + first[5] * then[3] + then[5]]
        }
    }

    /// How far the width may vary along a line (as a share of its median, between the 10th and
    /// 90th percentiles) and still be one width: curve fitting and the samples' spacing move a
    /// uniform outline by a few percent.
    static let uniformShare = 0.15
    /// The most path points read from one appearance: past it the appearance is not read.
    static let maxPoints = 500_000
    /// The most work one appearance may cost: segments filed by grid cell (a long segment is
    /// filed in every cell its box covers), and distances from a point to a segment. Past
    /// either, an outline drawn to be slow (long diagonals, thousands of edges in one cell)
    /// gives no pressure rather than gigabytes or minutes.
    static let maxFiled = 2_000_000
    static let maxDistances = 20_000_000

    /// For each line of `inkList` (user space), its width and each point's pressure as the
    /// appearance's filled outline gives them (`width` × `PenProfile.factor(pressure)` is the
    /// width there, `width` the line's median), or nil where the appearance fills no outline
    /// around it or the width is one width all along.
    static func pressures(_ content: [UInt8], placed: Placement, inkList: [[Double]], width: Double) -> [(width: Double, pressures: [Double])?] {
        let none = [(width: Double, pressures: [Double])?](repeating: nil, count: inkList.count)
        guard let transform = placed.transform, let segments = filledOutlines(content, transform) , !segments.isEmpty else { return none }
        // Segments by grid cell, so each point looks only at the outline near it.
        let reach = max(width, 0.5) * PenProfile.maximumFactor * 2 + 2
        var cells: [Cell: [Int]] = [:]
        var filed = 0
        for (index, segment) in segments.enumerated() {
            let low = Cell(min(segment.0, segment.2) / reach, min(segment.1, segment.3) / reach)
            let high = Cell(max(segment.0, segment.2) / reach, max(segment.1, segment.3) / reach)
            guard high.x - low.x <= 64, high.y - low.y <= 64 else { continue }
            filed += (high.x - low.x + 1) * (high.y - low.y + 1)
            if filed > maxFiled { return none }
            for x in low.x...high.x { for y in low.y...high.y { cells[Cell(x: x, y: y), default: []].append(index) } }
        }
        var measured = 0
        var found: [(width: Double, pressures: [Double])?] = []
        for line in inkList {
            found.append(widthsAlong(line))
            if measured > maxDistances { return none }
        }
        return found

        func widthsAlong(_ line: [Double]) -> (width: Double, pressures: [Double])? {
            var widths: [Double] = []
            for index in stride(from: 0, to: line.count - 1, by: 2) {
                let (x, y) = (line[index], line[index + 1])
                let cell = Cell(x / reach, y / reach)
                var nearest = Double.infinity
                for dx in -1...1 {
                    for dy in -1...1 {
                        let near = cells[Cell(x: cell.x + dx, y: cell.y + dy)] ?? []
                        measured += near.count
                        if measured > maxDistances { return nil }
                        for segment in near { nearest = min(nearest, distance(x, y, segments[segment])) }
                    }
                }
                guard nearest.isFinite, nearest < reach else { return nil }
                widths.append(2 * nearest)
            }
            let sorted = widths.sorted()
            guard !sorted.isEmpty else { return nil }
            let median = sorted[sorted.count / 2]
            let low = sorted[sorted.count / 10], high = sorted[sorted.count * 9 / 10]
            guard median > 0, high - low > max(uniformShare * median, 0.1) else { return nil }
            let span = PenProfile.maximumFactor - PenProfile.minimumFactor
            let pressures = widths.map { min(max(($0 / median - PenProfile.minimumFactor) / span, 0), 1) }
            return (median, pressures)
        }
    }

    struct Cell: Hashable {
        let x: Int
        let y: Int
        init(x: Int, y: Int) {
            self.x = x
            self.y = y
        }
        init(_ x: Double, _ y: Double) {
            self.x = Int(max(min(x.rounded(.down), 1e9), -1e9))
            self.y = Int(max(min(y.rounded(.down), 1e9), -1e9))
        }
    }

    /// The distance from a point to a segment (x0 y0 x1 y1).
    static func distance(_ x: Double, _ y: Double, _ s: (Double, Double, Double, Double)) -> Double {
        let dx = s.2 - s.0, dy = s.3 - s.1, length = dx * dx + dy * dy
        let t = length > 0 ? min(max(((x - s.0) * dx + (y - s.1) * dy) / length, 0), 1) : 0
        let px = s.0 + t * dx - x, py = s.1 + t * dy - y
        return (px * px + py * py).squareRoot()
    }

    /// The edges of every path the content fills (curves as 8 chords each), in user space; nil
    /// when it fills none, or holds more than `maxPoints` path points. Stroked paths are not
    /// outlines, and are left out.
    static func filledOutlines(_ content: [UInt8], _ transform: [Double]) -> [(Double, Double, Double, Double)]? {
        var operands: [Double] = []
        var ctm = transform
        var saved: [[Double]] = []
        var path: [[(Double, Double)]] = []
        var edges: [(Double, Double, Double, Double)] = []
        var points = 0
        func add(_ p: (Double, Double)) {
            let user = Placement.apply(ctm, p)
            if path.isEmpty { path.append([]) }
            path[path.count - 1].append(user)
            points += 1
        }
        var index = 0
        let bytes = content
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "%") {
                while index < bytes.count, bytes[index] != 10, bytes[index] != 13 { index += 1 }
                continue
            }
            if byte == 32 || byte == 10 || byte == 13 || byte == 9 || byte == 12 || byte == 0 {
                index += 1
                continue
            }
            var end = index
            while end < bytes.count, !(bytes[end] == 32 || bytes[end] == 10 || bytes[end] == 13 || bytes[end] == 9 || bytes[end] == 12
                || bytes[end] == 0 || bytes[end] == UInt8(ascii: "/") && end > index || bytes[end] == UInt8(ascii: "[")
                || bytes[end] == UInt8(ascii: "(") || bytes[end] == UInt8(ascii: "<")) {
                end += 1
            }
            if end == index {
                // A delimiter that starts something we do not read (a string, array, dictionary):
                // skip it alone; its contents read as tokens do no harm to a path.
                operands.removeAll()
                index += 1
                continue
            }
            let token = String(decoding: bytes[index..<end], as: UTF8.self)
            index = end
            if let value = Double(token) {
                // No operator takes more than six: numbers with no operator after them (a
                // content stream of nothing else) are not kept past those.
                if operands.count == 6 { operands.removeFirst() }
                operands.append(value)
                continue
            }
            let o = operands
            operands.removeAll()
            switch token {
            case "q": saved.append(ctm)
            case "Q": if let last = saved.popLast() { ctm = last }
            case "cm" where o.count == 6: ctm = Placement.concat(Array(o), ctm)
            case "m" where o.count == 2:
                path.append([])
                add((o[0], o[1]))
            case "l" where o.count == 2: add((o[0], o[1]))
            case "c" where o.count == 6, "v" where o.count == 4, "y" where o.count == 4:
                guard let start = path.last?.last.map({ invert(ctm, $0) }) ?? nil else { continue }
                let (c1, c2, end): ((Double, Double), (Double, Double), (Double, Double))
                switch token {
                case "c": (c1, c2, end) = ((o[0], o[1]), (o[2], o[3]), (o[4], o[5]))
                case "v": (c1, c2, end) = (start, (o[0], o[1]), (o[2], o[3]))
                default: (c1, c2, end) = ((o[0], o[1]), (o[2], o[3]), (o[2], o[3]))
                }
                for step in 1...8 {
                    let t = Double(step) / 8, u = 1 - t
                    let a = u * u * u, b = 3 * u * u * t, c = 3 * u * t * t, d = t * t * t
                    add((a * start.0 + b * c1.0 + c * c2.0 + d * end.0, a * start.1 + b * c1.1 + c * c2.1 + d * end.1))
                }
            case "re" where o.count == 4:
                path.append([])
                add((o[0], o[1])); add((o[0] + o[2], o[1])); add((o[0] + o[2], o[1] + o[3])); add((o[0], o[1] + o[3])); add((o[0], o[1]))
            case "h": if let first = path.last?.first { path[path.count - 1].append(first) }
            case "f", "F", "f*", "B", "B*", "b", "b*":
                for sub in path {
                    for (a, b) in zip(sub, sub.dropFirst()) { edges.append((a.0, a.1, b.0, b.1)) }
                    // A fill closes every subpath.
                    if let first = sub.first, let last = sub.last { edges.append((last.0, last.1, first.0, first.1)) }
                }
                path.removeAll()
            case "S", "s", "n": path.removeAll()
            default: break
            }
            if points > maxPoints { return nil }
        }
        return edges.isEmpty ? nil : edges
    }

    /// A user-space point back in the content's current space (for a curve's start).
    static func invert(_ m: [Double], _ p: (Double, Double)) -> (Double, Double)? {
        let determinant = m[0] * m[3] - m[1] * m[2]
        guard determinant != 0, determinant.isFinite else { return nil }
        let dx = p.0 - m[4], dy = p.1 - m[5]
        return ((m[3] * dx - m[2] * dy) / determinant, (m[0] * dy - m[1] * dx) / determinant)
    }
}
