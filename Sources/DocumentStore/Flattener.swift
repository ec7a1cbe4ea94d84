public import CanvasCore
import Foundation
import InkRendering
public import PDFSurgery

/// What flattening needs from a document file: where its PDF starts.
public struct PDFLocation: Sendable {
    public let path: String
    /// Bytes before the PDF (a .yianazip container's metadata and separator); 0 for a .pdf.
    public let offset: Int64

    public init(path: String, offset: Int64 = 0) {
        self.path = path
        self.offset = offset
    }
}

/// Why a flatten failed.
public enum FlattenError: Error, Sendable, CustomStringConvertible {
    case pdf(PDFError)
    case render(String)
    case storedDrawing(String)

    public var description: String {
        switch self {
        case .pdf(let error): return error.description
        case .render(let message): return "render the ink: \(message)"
        case .storedDrawing(let message): return "read the ink already on the page: \(message)"
        }
    }
}

/// Turns a drawing into the bytes that put it on a page.
///
/// Each edit adds its own ink and nothing else: a form with the new strokes and texts, the
/// drawing it was made from (so the page's ink stays machine-readable), and one small content
/// stream that draws the form. The ink of earlier edits is neither read nor written again, so a
/// save costs what was drawn, however often the page was edited before.
public enum Flattener {
    /// A flatten ready to be written: the new page content is decided, the bytes not yet made.
    /// Not Sendable: it holds the open PDF.
    public final class Prepared {
        private let file: PDFFile
        private let page: Int
        private let layers: InkRenderer.PDFLayers
        private let json: [UInt8]
        public let pageCount: Int
        /// The ink this edit adds, as it is stored: rounded to `InkPrecision`.
        public let drawing: Drawing

        init(file: PDFFile, page: Int, layers: InkRenderer.PDFLayers, json: [UInt8], drawing: Drawing) {
            self.file = file
            self.page = page
            self.layers = layers
            self.json = json
            self.drawing = drawing
            pageCount = file.pageCount
        }

        /// True when the result must be written whole (`rewrite`) rather than appended (`increment`).
        public var needsRewrite: Bool { file.needsRewrite }

        /// The bytes to append to the PDF's bytes.
        public func increment() throws(FlattenError) -> [UInt8] {
            do {
                return try file.flattenIncrement(page: page, strokes: layers.strokes, texts: layers.texts, drawing: json)
            } catch {
                throw .pdf(error)
            }
        }

        /// Writes the whole new PDF to `descriptor`.
        public func rewrite(to descriptor: Int32) throws(FlattenError) {
            do {
                try file.flattenRewrite(page: page, strokes: layers.strokes, texts: layers.texts, drawing: json, to: descriptor)
            } catch {
                throw .pdf(error)
            }
        }
    }

    public static func prepare(_ location: PDFLocation, page: Int, adding drawing: Drawing) throws(FlattenError) -> Prepared {
        do {
            let file = try PDFFile(path: location.path, offset: location.offset)
            let geometry = try file.page(page)
            let ink = InkPrecision.rounded(drawing)
            let layers: InkRenderer.PDFLayers
            do {
                layers = try InkRenderer.pdfLayers(ink, width: geometry.width, height: geometry.height)
            } catch {
                throw FlattenError.render(error.description)
            }
            return Prepared(file: file, page: page, layers: layers, json: StoredDrawing.json(ink), drawing: ink)
        } catch let error as FlattenError {
            throw error
        } catch let error as PDFError {
            throw .pdf(error)
        } catch {
            throw .render("\(error)")
        }
    }

    /// All ink that flattening put on the page, every edit's in order, as one drawing.
    public static func storedDrawing(_ location: PDFLocation, page: Int) throws(FlattenError) -> Drawing {
        let stored: [UInt8]?
        do {
            stored = try PDFFile(path: location.path, offset: location.offset).storedDrawing(page: page)
        } catch {
            throw .pdf(error)
        }
        guard let stored else { return .empty }
        do {
            let edits = try JSONDecoder().decode([Drawing].self, from: Data(stored))
            return Drawing(strokes: edits.flatMap(\.strokes), texts: edits.flatMap(\.texts))
        } catch {
            throw .storedDrawing("\(error)")
        }
    }

    /// The incremental update for a file that takes one (tests and offline use).
    public static func increment(_ location: PDFLocation, page: Int, adding drawing: Drawing) throws(FlattenError) -> [UInt8] {
        try prepare(location, page: page, adding: drawing).increment()
    }
}
