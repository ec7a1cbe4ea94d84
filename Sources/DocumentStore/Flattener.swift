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
/// The ink already on the page (from earlier flattens) is read back, the new drawing is added
/// to it, and the whole is drawn again as one overlay that replaces the old one: repeated edits
/// keep one form and one copy of the font, and nothing drifts, because every stroke is drawn
/// from the coordinates it was made with.
public enum Flattener {
    /// A flatten ready to be written: the new page content is decided, the bytes not yet made.
    /// Not Sendable: it holds the open PDF.
    public final class Prepared {
        private let file: PDFFile
        private let page: Int
        private let overlay: [UInt8]
        private let json: [UInt8]
        public let pageCount: Int
        /// Everything now on the page: the earlier ink and this drawing.
        public let drawing: Drawing

        init(file: PDFFile, page: Int, overlay: [UInt8], json: [UInt8], drawing: Drawing) {
            self.file = file
            self.page = page
            self.overlay = overlay
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
                return try file.flattenIncrement(page: page, overlay: overlay, drawing: json)
            } catch {
                throw .pdf(error)
            }
        }

        /// Writes the whole new PDF to `descriptor`.
        public func rewrite(to descriptor: FileDescriptor) throws(FlattenError) {
            do {
                try file.flattenRewrite(page: page, overlay: overlay, drawing: json, to: descriptor)
            } catch {
                throw .pdf(error)
            }
        }
    }

    public static func prepare(_ location: PDFLocation, page: Int, adding drawing: Drawing) throws(FlattenError) -> Prepared {
        do {
            let file = try location.open()
            let geometry = try file.page(page)
            var combined = drawing
            if let stored = try file.storedDrawing(page: page) {
                do {
                    let earlier = try JSONDecoder().decode(Drawing.self, from: Data(stored))
                    combined = Drawing(strokes: earlier.strokes + drawing.strokes, texts: earlier.texts + drawing.texts)
                } catch {
                    throw FlattenError.storedDrawing("\(error)")
                }
            }
            let overlay: [UInt8]
            do {
                overlay = try InkRenderer.pdf(combined, width: geometry.width, height: geometry.height)
            } catch {
                throw FlattenError.render(error.description)
            }
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys]
            let json = Array((try? encoder.encode(combined)) ?? Data())
            return Prepared(file: file, page: page, overlay: overlay, json: json, drawing: combined)
        } catch let error as FlattenError {
            throw error
        } catch let error as PDFError {
            throw .pdf(error)
        } catch {
            throw .render("\(error)")
        }
    }

    /// The incremental update for a file that takes one (tests and offline use).
    public static func increment(_ location: PDFLocation, page: Int, adding drawing: Drawing) throws(FlattenError) -> [UInt8] {
        try prepare(location, page: page, adding: drawing).increment()
    }
}
