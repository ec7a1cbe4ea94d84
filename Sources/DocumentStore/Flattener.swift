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

/// A page's canvas ink as the edits that put it there, in the order made.
public struct PageInk: Sendable {
    public struct Edit: Sendable {
        /// The drawing the edit was made from, as it was submitted.
        public let drawing: Drawing
        /// SHA-256 (hex) of the drawing's stored bytes: names the edit for `Flattener.prepare`'s
        /// `replacing`, wherever the file's objects move to.
        public let digest: String
        /// The edit's form among the page's; nil for the drawing an early version kept for the
        /// whole page, which stays on the page as it is (it cannot be taken off alone).
        let form: Int?
    }

    public let edits: [Edit]

    /// The edits that a reopened drawing can replace (all but an early version's whole-page ink).
    public var replaceable: [Edit] { edits.filter { $0.form != nil } }

    /// A drawing's digest as a save would store it: equal for equal drawings.
    public static func digest(_ drawing: Drawing) -> String {
        var hasher = SHA256Hasher()
        hasher.update(InkSource.encode(drawing))
        return hasher.finish()
    }

    /// Those edits' strokes and texts as one drawing.
    public var drawing: Drawing {
        let edits = replaceable
        return Drawing(strokes: edits.flatMap(\.drawing.strokes), texts: edits.flatMap(\.drawing.texts))
    }
}

/// Why a flatten failed.
public enum FlattenError: Error, Sendable, CustomStringConvertible {
    case pdf(PDFError)
    case render(String)
    case storedDrawing(String)
    /// The page would hold more ink than the limit, counting what earlier saves put there.
    case tooMuchInk(onPage: Int, adding: Int, limit: Int)
    /// Ink a reopened drawing was to replace is no longer on the page (another save replaced
    /// it, or the document was restored or replaced since the drawing was reopened).
    case inkChanged(page: Int)

    public var description: String {
        switch self {
        case .pdf(let error): return error.description
        case .render(let message): return "render the ink: \(message)"
        case .storedDrawing(let message): return "read the ink already on the page: \(message)"
        case .tooMuchInk(let stored, let adding, let limit):
            return "the page has \(stored) points of ink; \(adding) more would pass the limit of \(limit) a page"
        case .inkChanged(let page):
            return "the ink reopened from page \(page) is no longer on it: the page changed since it was reopened"
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
        private let source: [UInt8]
        public let pageCount: Int

        init(file: PDFFile, page: Int, layers: InkRenderer.PDFLayers, source: [UInt8]) {
            self.file = file
            self.page = page
            self.layers = layers
            self.source = source
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
                return try file.flattenIncrement(page: page, strokes: layers.strokes, texts: layers.texts, drawing: source)
            } catch {
                throw .pdf(error)
            }
        }

        /// Writes the whole new PDF to `descriptor`.
        public func rewrite(to descriptor: FileDescriptor) throws(FlattenError) {
            do {
                try file.flattenRewrite(page: page, strokes: layers.strokes, texts: layers.texts, drawing: source, to: descriptor)
            } catch {
                throw .pdf(error)
            }
        }
    }

    /// `maxPagePoints` bounds the ink on the page, what earlier saves put there included: a
    /// drawing that would pass it is refused before anything is drawn. `replacing`: the digests
    /// (`PageInk.Edit.digest`) of the edits a reopened drawing was reopened from, which it
    /// replaces: the page no longer draws them. Each must still be on the page.
    public static func prepare(_ location: PDFLocation, page: Int, adding drawing: Drawing,
                               replacing: [String]? = nil, maxPagePoints: Int = .max) throws(FlattenError) -> Prepared {
        do {
            let file = try location.open()
            let geometry = try file.page(page)
            var stored = file.inkPoints(page: page)
            if let replacing {
                let edits = try edits(file.storedSources(page: page), page: page, location.path)
                let dropped = try replaced(replacing, among: edits, page: page)
                let points = dropped.reduce(0) { $0 + $1.drawing.pointCount }
                file.dropForms(dropped.compactMap(\.form), points: points)
                stored = max(0, stored - points)
            }
            let adding = drawing.pointCount
            guard adding <= maxPagePoints - min(stored, maxPagePoints) else {
                throw FlattenError.tooMuchInk(onPage: stored, adding: adding, limit: maxPagePoints)
            }
            file.addingInkPoints(adding)
            // The page draws the ink at the precision it is kept on paper; the source keeps the
            // drawing as it was submitted, for a reopen to give back bit for bit.
            let ink = InkPrecision.rounded(drawing)
            let layers: InkRenderer.PDFLayers
            do {
                layers = try InkRenderer.pdfLayers(ink, width: geometry.width, height: geometry.height)
            } catch {
                throw FlattenError.render(error.description)
            }
            return Prepared(file: file, page: page, layers: layers, source: InkSource.encode(drawing))
        } catch let error as FlattenError {
            throw error
        } catch let error as PDFError {
            throw .pdf(error)
        } catch {
            throw .render("\(error)")
        }
    }

    /// The edits `digests` names, one for each digest (a digest twice names two edits with the
    /// same drawing): all of them on the page, or the page's ink changed since the reopen.
    static func replaced(_ digests: [String], among edits: [PageInk.Edit], page: Int) throws(FlattenError) -> [PageInk.Edit] {
        var wanted: [String: Int] = [:]
        for digest in digests { wanted[digest, default: 0] += 1 }
        var found: [PageInk.Edit] = []
        for edit in edits where edit.form != nil {
            guard let left = wanted[edit.digest], left > 0 else { continue }
            wanted[edit.digest] = left - 1
            found.append(edit)
        }
        guard found.count == digests.count else { throw .inkChanged(page: page) }
        return found
    }

    /// The page's canvas ink, edit by edit, as reopening loads it.
    public static func pageInk(_ location: PDFLocation, page: Int) throws(FlattenError) -> PageInk {
        do {
            let file = try location.open()
            _ = try file.page(page)
            return PageInk(edits: try edits(file.storedSources(page: page), page: page, location.path))
        } catch let error as FlattenError {
            throw error
        } catch let error as PDFError {
            throw .pdf(error)
        } catch {
            throw .storedDrawing("\(error)")
        }
    }

    static func edits(_ sources: [PDFFile.StoredSource], page: Int, _ name: String) throws(FlattenError) -> [PageInk.Edit] {
        var edits: [PageInk.Edit] = []
        for source in sources where !source.bytes.isEmpty {
            let drawing: Drawing
            if InkSource.isEncoded(source.bytes) {
                do {
                    drawing = try InkSource.decode(source.bytes)
                } catch {
                    throw .storedDrawing(error.description)
                }
            } else {
                // Saves before canvas/1.8 stored the drawing as JSON, as drawing.get gives it.
                do {
                    drawing = try JSONDecoder().decode(Drawing.self, from: Data(source.bytes))
                } catch {
                    throw .storedDrawing("\(error)")
                }
            }
            var hasher = SHA256Hasher()
            hasher.update(source.bytes)
            let form: Int?
            if case .form(let position) = source.place { form = position } else { form = nil }
            edits.append(PageInk.Edit(drawing: drawing, digest: hasher.finish(), form: form))
        }
        return edits
    }

    /// All ink that flattening put on the page, every edit's in order, as one drawing.
    public static func storedDrawing(_ location: PDFLocation, page: Int) throws(FlattenError) -> Drawing {
        let edits: [PageInk.Edit]
        do {
            edits = try Self.edits(location.open().storedSources(page: page), page: page, location.path)
        } catch let error as FlattenError {
            throw error
        } catch {
            throw .pdf(error as! PDFError)
        }
        return Drawing(strokes: edits.flatMap(\.drawing.strokes), texts: edits.flatMap(\.drawing.texts))
    }

    /// The incremental update for a file that takes one (tests and offline use).
    public static func increment(_ location: PDFLocation, page: Int, adding drawing: Drawing) throws(FlattenError) -> [UInt8] {
        try prepare(location, page: page, adding: drawing).increment()
    }
}
