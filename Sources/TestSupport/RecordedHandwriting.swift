public import CanvasCore
public import Foundation

/// A page written by people rather than generated: the 24 recorded UNIPEN words of
/// Tests/Fixtures/strokes/unipen-atu.json (110 to 589 samples each, with a tablet's pressure)
/// set along ruled lines of a US Letter page as a writer would set them, over the highlighters
/// and texts of `Handwriting.page()`.
public enum RecordedHandwriting {
    /// The fixture, found from this file's place in the source tree (it is not bundled: the
    /// benchmark and the tests run from a checkout).
    public static let fixture = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Tests/Fixtures/strokes/unipen-atu.json")

    /// Why the page could not be made: the file and what went wrong with it.
    public struct LoadError: Error, CustomStringConvertible {
        public let path: String
        public let reason: String
        public var description: String { "read the recorded strokes \(path): \(reason)" }
    }

    /// The recorded strokes as (x, y, pressure) in display points, each starting near the origin.
    public static func strokes(from url: URL = fixture) throws -> [[(x: Double, y: Double, pressure: Double)]] {
        struct Set: Decodable {
            struct Recorded: Decodable { let points: [[Double]] }
            let strokes: [Recorded]
        }
        do {
            let set = try JSONDecoder().decode(Set.self, from: Data(contentsOf: url))
            return try set.strokes.map { stroke in
                try stroke.points.map { point in
                    guard point.count == 3 else { throw LoadError(path: url.path, reason: "a point has \(point.count) numbers, not 3") }
                    return (point[0], point[1], point[2])
                }
            }
        } catch let error as LoadError {
            throw error
        } catch {
            throw LoadError(path: url.path, reason: "\(error)")
        }
    }

    /// The page: every recorded word `copies` times, left to right on lines 34 pt apart from
    /// y = 180, 14 pt between words, pen widths 1.8 to 2.6 pt, black and blue lines in turn.
    public static func page(copies: Int = 1, from url: URL = fixture) throws -> Drawing {
        let recorded = try strokes(from: url)
        let colors = [try! InkColor("black"), try! InkColor("#1F3A93")]
        var strokes: [Stroke] = []
        var x = 48.0, line = 0
        for copy in 0..<copies {
            for (index, word) in recorded.enumerated() {
                let low = word.map(\.x).min() ?? 0, high = word.map(\.x).max() ?? 0
                let bottom = word.map(\.y).max() ?? 0
                if x + (high - low) > 564 {
                    x = 48
                    line += 1
                }
                // Each word's lowest point sits on the line (descenders are rare in this set).
                let baseline = 180 + Double(line) * 34
                let dx = x - low, dy = baseline - bottom
                let width = 1.8 + 0.8 * Double((index * 7 + copy * 3) % 9) / 8
                let points = word.map { try! InkPoint(x: $0.x + dx, y: $0.y + dy, pressure: $0.pressure) }
                strokes.append(try! Stroke(tool: .pen, color: colors[line % 2], width: width, points: points))
                x += high - low + 14
            }
        }
        let generated = Handwriting.page()
        return Drawing(strokes: generated.strokes.filter { $0.tool == .highlighter } + strokes, texts: generated.texts)
    }
}
