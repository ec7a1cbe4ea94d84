/// What is on the canvas: strokes and texts, in the order they were made.
public struct Drawing: Hashable, Sendable, Codable {
    public var strokes: [Stroke]
    public var texts: [TextAnnotation]

    public init(strokes: [Stroke] = [], texts: [TextAnnotation] = []) {
        self.strokes = strokes
        self.texts = texts
    }

    public static let empty = Drawing()

    /// True exactly when there is something to show: a stroke or a text.
    public var hasContent: Bool { !strokes.isEmpty || !texts.isEmpty }
    /// Points in all strokes: the measure of how much work the drawing is to keep, render and send.
    public var pointCount: Int { strokes.reduce(0) { $0 + $1.points.count } }

    private enum CodingKeys: String, CodingKey { case strokes, texts }

    // Either list may be left out by a client; an absent list is an empty one.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        strokes = try container.decodeIfPresent([Stroke].self, forKey: .strokes) ?? []
        texts = try container.decodeIfPresent([TextAnnotation].self, forKey: .texts) ?? []
    }
}
