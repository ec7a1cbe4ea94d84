/// How the bytes a flatten appends divide between the ink and its stored source.
public enum InkBytes {
    /// The stored drawing sources in `increment` (the bytes a flatten appended): the encoded
    /// length of every stream marked `/Type /CanvasBridgeDrawing`.
    public static func storedSource(in increment: [UInt8]) -> Int {
        let text = String(decoding: increment, as: UTF8.self)
        var total = 0
        // qpdf writes a dictionary's keys sorted, so /Length comes before /Type in each one.
        for piece in text.components(separatedBy: "<< /Filter /FlateDecode /Length ").dropFirst() {
            let digits = piece.prefix { $0.isNumber }
            guard let length = Int(digits), piece.dropFirst(digits.count).hasPrefix(" /Type /CanvasBridgeDrawing >>") else { continue }
            total += length
        }
        return total
    }
}
