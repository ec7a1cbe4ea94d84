import Foundation

/// Small PDFs written byte by byte, so a test knows exactly what is on each page.
public enum PDFFixtures {
    public struct Page {
        public var mediaBox: [Double]
        public var cropBox: [Double]?
        public var rotate: Int?
        public var userUnit: Double?
        /// Content stream operators (default user space).
        public var content: String

        public init(mediaBox: [Double] = [0, 0, 612, 792], cropBox: [Double]? = nil, rotate: Int? = nil,
                    userUnit: Double? = nil, content: String = "") {
            self.mediaBox = mediaBox
            self.cropBox = cropBox
            self.rotate = rotate
            self.userUnit = userUnit
            self.content = content
        }
    }

    /// A PDF with these pages; `Helvetica` is available to their content as /F1.
    public static func pdf(_ pages: [Page]) -> [UInt8] {
        var objects: [String] = []
        // 1: catalog, 2: pages, 3: font, then a page and its content per page.
        let kids = pages.indices.map { "\(4 + 2 * $0) 0 R" }.joined(separator: " ")
        objects.append("<< /Type /Catalog /Pages 2 0 R >>")
        objects.append("<< /Type /Pages /Kids [\(kids)] /Count \(pages.count) >>")
        objects.append("<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
        for (index, page) in pages.enumerated() {
            var dict = "<< /Type /Page /Parent 2 0 R /MediaBox \(array(page.mediaBox))"
            if let crop = page.cropBox { dict += " /CropBox \(array(crop))" }
            if let rotate = page.rotate { dict += " /Rotate \(rotate)" }
            if let unit = page.userUnit { dict += " /UserUnit \(unit)" }
            dict += " /Resources << /Font << /F1 3 0 R >> >> /Contents \(5 + 2 * index) 0 R >>"
            objects.append(dict)
            objects.append("<< /Length \(page.content.utf8.count) >>\nstream\n\(page.content)\nendstream")
        }
        return assemble(objects, header: "%PDF-1.7\n%\u{e2}\u{e3}\u{cf}\u{d3}\n")
    }

    /// A PDF of the given object bodies, numbered from 1 (object 1 the catalog), with a
    /// cross-reference table whose offsets are right.
    public static func assemble(_ objects: [String], header: String = "%PDF-1.7\n") -> [UInt8] {
        var out = Array(header.utf8)
        var offsets: [Int] = []
        for (index, body) in objects.enumerated() {
            offsets.append(out.count)
            out += Array("\(index + 1) 0 obj\n\(body)\nendobj\n".utf8)
        }
        let xref = out.count
        out += Array("xref\n0 \(objects.count + 1)\n0000000000 65535 f\r\n".utf8)
        for offset in offsets { out += Array(String(format: "%010d 00000 n\r\n", offset).utf8) }
        out += Array("trailer\n<< /Size \(objects.count + 1) /Root 1 0 R >>\nstartxref\n\(xref)\n%%EOF\n".utf8)
        return out
    }

    private static func array(_ values: [Double]) -> String {
        "[" + values.map { $0 == $0.rounded() ? String(Int($0)) : String($0) }.joined(separator: " ") + "]"
    }

    /// Black bars and text across the whole MediaBox, so that any movement of the original
    /// content shows in a render.
    public static func busyContent(_ box: [Double]) -> String {
        var ops = "0 g\n"
        var y = box[1] + 20
        while y < box[3] - 20 {
            ops += "\(box[0] + 30) \(y) \(box[2] - box[0] - 60) 3 re f\n"
            ops += "BT /F1 10 Tf \(box[0] + 40) \(y + 6) Td (The quick brown fox \(Int(y))) Tj ET\n"
            y += 37
        }
        return ops
    }
}
