public import CanvasCore
import Foundation
import InkRendering
public import PDFSurgery
public import SystemPackage

/// What flattening needs from a document file: where its PDF starts.
public struct PDFLocation: Sendable {
    /// The file's path, or with `file` only its name for messages.
    public let path: String
    /// Bytes before the PDF (a .yianazip container's metadata and separator); 0 for a .pdf.
    public let offset: Int64
    /// The open file to read, when the caller has one (the document store never opens a
    /// document by path twice).
    public let file: FileDescriptor?
    /// How long the whole flatten may take, reading and writing (nil: no limit).
    public let budget: Duration?

    public init(path: String, offset: Int64 = 0) {
        self.path = path
        self.offset = offset
        file = nil
        budget = nil
    }

    public init(file: FileDescriptor, name: String, offset: Int64 = 0, budget: Duration? = nil) {
        path = name
        self.offset = offset
        self.file = file
        self.budget = budget
    }

    func open() throws(PDFError) -> PDFFile {
        if let file { return try PDFFile(file: file, name: path, offset: offset, budget: budget) }
        return try PDFFile(path: path, offset: offset)
    }
}

/// Why a flatten failed.
public enum FlattenError: Error, Sendable, CustomStringConvertible {
    case pdf(PDFError)
    case render(String)
    case storedDrawing(String)
    /// The page would hold more ink than the limit, counting what earlier saves put there.
    case tooMuchInk(onPage: Int, adding: Int, limit: Int)

    public var description: String {
        switch self {
        case .pdf(let error): return error.description
        case .render(let message): return "render the ink: \(message)"
        case .storedDrawing(let message): return "read the ink already on the page: \(message)"
        case .tooMuchInk(let stored, let adding, let limit):
            return "the page has \(stored) points of ink; \(adding) more would pass the limit of \(limit) a page"
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

        /// Gives what is left, writing the result, `budget` from now (the file was read within
        /// the budget it was opened with).
        public func allow(_ budget: Duration) { file.setBudget(budget) }

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
        public func rewrite(to descriptor: FileDescriptor) throws(FlattenError) {
            do {
                try file.flattenRewrite(page: page, strokes: layers.strokes, texts: layers.texts, drawing: json, to: descriptor)
            } catch {
                throw .pdf(error)
            }
        }
    }

    /// `maxPagePoints` bounds the ink on the page, what earlier saves put there included: a
    /// drawing that would pass it is refused before anything is drawn.
    public static func prepare(_ location: PDFLocation, page: Int, adding drawing: Drawing,
                               maxPagePoints: Int = .max) throws(FlattenError) -> Prepared {
        do {
            let file = try location.open()
            let geometry = try file.page(page)
            let stored = file.inkPoints(page: page), adding = drawing.pointCount
            guard adding <= maxPagePoints - min(stored, maxPagePoints) else {
                throw FlattenError.tooMuchInk(onPage: stored, adding: adding, limit: maxPagePoints)
            }
            file.addingInkPoints(adding)
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
            stored = try location.open().storedDrawing(page: page)
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
