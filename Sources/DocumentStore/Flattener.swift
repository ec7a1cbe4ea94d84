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

/// A page's canvas ink as the edits that put it there: the forms of flattened edits in the
/// order made, then the ink annotations in the page's order.
public struct PageInk: Sendable {
    public struct Edit: Sendable {
        /// Where an edit's ink is on the page.
        public enum Place: Sendable, Equatable {
            /// The one drawing an early version kept for all the page's ink: it stays on the
            /// page as it is (it cannot be taken off alone).
            case wholePage
            /// A flattened edit's form, by its position among the page's forms.
            case form(Int)
            /// An ink annotation, by its position in the page's /Annots.
            case annotation(Int)
            /// Another program's /Ink, by its position in the page's /Annots, and its /Popup's
            /// (which leaves the page with it).
            case otherInk(Int, popup: Int?)
        }

        /// The drawing the edit was made from, as it was submitted; for an annotation another
        /// program changed, what the annotation says now.
        public let drawing: Drawing
        /// SHA-256 (hex) of what the edit stores: names it for `Flattener.prepare`'s
        /// `replacing`, wherever the file's objects move to.
        public let digest: String
        public let place: Place
        /// An annotation another program changed since we wrote it (its pressure is lost).
        public var changedElsewhere = false
        /// For another program's /Ink: its author, subject, dates, name and note as PDF entries,
        /// which the annotation replacing it carries (`InkAnnotations.OtherInk.carried`).
        public var carried = ""
    }

    public let edits: [Edit]

    /// The edits that a reopened drawing can replace (all but an early version's whole-page ink).
    public var replaceable: [Edit] { edits.filter { $0.place != .wholePage } }

    /// How many of them are other programs' /Ink.
    public var otherInk: Int { edits.count { if case .otherInk = $0.place { true } else { false } } }

    /// A drawing's digest as a save would store it: equal for equal drawings.
    public static func digest(_ drawing: Drawing) -> String { Flattener.digest(InkSource.encode(drawing)) }

    /// Those edits' strokes and texts as one drawing.
    public var drawing: Drawing {
        let edits = replaceable
        return Drawing(strokes: edits.flatMap(\.drawing.strokes), texts: edits.flatMap(\.drawing.texts))
    }
}

/// How a save puts ink on a page.
public enum InkForm: String, Sendable, CaseIterable {
    /// Into the page's content, as paper keeps ink: every viewer shows it, none can edit it.
    case paper
    /// As standard `/Ink` and `/FreeText` annotations beside the page's content, which other
    /// PDF tools show (the same outlines) and can move, change or delete.
    case annotations
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
    public static func prepare(_ location: PDFLocation, page: Int, adding drawing: Drawing, form: InkForm = .paper,
                               replacing: [String]? = nil, maxPagePoints: Int = .max) throws(FlattenError) -> Prepared {
        do {
            let file = try location.open()
            let geometry = try file.page(page)
            var stored = file.inkPoints(page: page)
            var carrying: [(strokes: [Stroke], carried: String)] = []
            if let replacing {
                let dropped = try replaced(replacing, among: try edits(of: file, page: page, maxPagePoints: maxPagePoints, otherInk: true), page: page)
                // (Another program's ink was never counted in the page's points.)
                let points = dropped.reduce(0) { if case .otherInk = $1.place { $0 } else { $0 + $1.drawing.pointCount } }
                file.dropForms(dropped.compactMap { if case .form(let position) = $0.place { position } else { nil } }, points: points)
                file.dropAnnotations(dropped.flatMap { edit -> [Int] in
                    switch edit.place {
                    case .annotation(let position): [position]
                    case .otherInk(let position, let popup): [position] + (popup.map { [$0] } ?? [])
                    case .wholePage, .form: []
                    }
                })
                carrying = dropped.compactMap { if case .otherInk = $0.place { ($0.drawing.strokes, $0.carried) } else { nil } }
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
            var layers = InkRenderer.PDFLayers.none
            do {
                switch form {
                case .paper:
                    layers = try InkRenderer.pdfLayers(ink, width: geometry.width, height: geometry.height)
                case .annotations:
                    let placement = InkAnnotations.Placement(width: geometry.width, height: geometry.height, matrix: try file.placement(page: page))
                    // The annotations round for their entries and appearance themselves, and store
                    // the drawing as it was submitted.
                    for annotation in try InkAnnotations.make(drawing, on: placement, carrying: carrying) {
                        try file.addAnnotation(dictionary: annotation.dictionary, strokes: annotation.strokes, overlay: annotation.overlay,
                                               overlayPage: annotation.overlayPage, source: annotation.source, box: annotation.box)
                    }
                }
            } catch let error as RenderError {
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
        for edit in edits where edit.place != .wholePage {
            guard let left = wanted[edit.digest], left > 0 else { continue }
            wanted[edit.digest] = left - 1
            found.append(edit)
        }
        guard found.count == digests.count else { throw .inkChanged(page: page) }
        return found
    }

    /// The page's canvas ink, edit by edit, as reopening loads it.
    public static func pageInk(_ location: PDFLocation, page: Int, maxPagePoints: Int = .max, otherInk: Bool = false) throws(FlattenError) -> PageInk {
        do {
            let file = try location.open()
            return PageInk(edits: try edits(of: file, page: page, maxPagePoints: maxPagePoints, otherInk: otherInk))
        } catch let error as FlattenError {
            throw error
        } catch let error as PDFError {
            throw .pdf(error)
        } catch {
            throw .storedDrawing("\(error)")
        }
    }

    /// What reading a page's stored ink may take, from the most ink a page may hold: its stored
    /// drawings decoded (32 bytes a point is more than the encoding takes even for numbers off
    /// the ink grid, and than JSON from before 1.8 takes for most; 1 MiB more for texts), and
    /// the numbers its ink annotations list (two a point, and their few other entries). A page
    /// past them is refused (`tooLarge`) before its ink is decoded, copied or parsed in full.
    struct StoredInkBound: Equatable {
        let bytes: Int
        let numbers: Int

        init(maxPagePoints: Int) {
            // With no limit on the page's points (offline use), the bound of 2 million points.
            let points = min(max(maxPagePoints, 0), 2_000_000)
            bytes = points * 32 + (1 << 20)
            numbers = points * 2 + 4096
        }
    }

    /// The page's edits: its forms' stored drawings, then its ink annotations (with
    /// `otherInk`, other programs' /Ink among them, in the page's order), read within
    /// `StoredInkBound(maxPagePoints:)`.
    static func edits(of file: PDFFile, page: Int, maxPagePoints: Int, otherInk: Bool = false) throws -> [PageInk.Edit] {
        let bound = StoredInkBound(maxPagePoints: maxPagePoints)
        var edits: [PageInk.Edit] = []
        let sources = try file.storedSources(page: page, maxBytes: bound.bytes)
        for source in sources where !source.bytes.isEmpty {
            let place: PageInk.Edit.Place
            switch source.place {
            case .wholePage: place = .wholePage
            case .form(let position): place = .form(position)
            }
            edits.append(PageInk.Edit(drawing: try stored(source.bytes), digest: digest(source.bytes), place: place))
        }
        let read = sources.reduce(0) { $0 + $1.bytes.count }
        let annotations = try file.storedAnnotations(page: page, maxBytes: max(0, bound.bytes - read), maxNumbers: bound.numbers, otherInk: otherInk)
        guard !annotations.isEmpty else { return edits }
        let geometry = try file.page(page)
        let placement = InkAnnotations.Placement(width: geometry.width, height: geometry.height, matrix: try file.placement(page: page))
        for annotation in annotations {
            if annotation.isOtherInk {
                // Named by all it says and draws: a change to any of it, made elsewhere after the
                // reopen, is a change of the page's ink.
                guard let other = InkAnnotations.readOther(entries: annotation.entries, appearance: annotation.source, on: placement) else { continue }
                var edit = PageInk.Edit(drawing: other.drawing, digest: digest(annotation.entries + annotation.source),
                                        place: .otherInk(annotation.index, popup: other.popup))
                edit.carried = other.carried
                edits.append(edit)
                continue
            }
            // A stored drawing that does not read (its checksum, a byte changed, an /InkList it
            // takes its positions from changed) is no drawing: the annotation is read from what
            // it says, never from those bytes.
            // One another program made into something else (another subtype, entries we cannot
            // read) is its ink now, not ours: it stays on the page, neither loaded nor replaced.
            guard let (drawing, changed) = InkAnnotations.read(entries: annotation.entries, source: { positions in
                try? stored(annotation.source, positions: positions)
            }, model: { InkSource.firstStroke(annotation.source) }, on: placement) else { continue }
            // What another program may change counts in the digest: a change since the
            // reopen is a change of the page's ink.
            edits.append(PageInk.Edit(drawing: drawing, digest: digest(annotation.source + annotation.entries),
                                      place: .annotation(annotation.index), changedElsewhere: changed))
        }
        return edits
    }

    static func digest(_ bytes: [UInt8]) -> String {
        var hasher = SHA256Hasher()
        hasher.update(bytes)
        return hasher.finish()
    }

    /// A drawing as a save stored it: encoded, or JSON from before canvas/1.8.
    /// `positions`: an annotation's, as its `/InkList` gives them (InkSource, version 3).
    static func stored(_ bytes: [UInt8], positions: [InkSource.Positions] = []) throws(FlattenError) -> Drawing {
        if InkSource.isEncoded(bytes) {
            do {
                return try InkSource.decode(bytes, positions: positions)
            } catch {
                throw .storedDrawing(error.description)
            }
        }
        do {
            return try JSONDecoder().decode(Drawing.self, from: Data(bytes))
        } catch {
            throw .storedDrawing("\(error)")
        }
    }

    /// All ink that flattening put on the page, every edit's in order, as one drawing.
    public static func storedDrawing(_ location: PDFLocation, page: Int) throws(FlattenError) -> Drawing {
        let ink = try pageInk(location, page: page)
        return Drawing(strokes: ink.edits.flatMap(\.drawing.strokes), texts: ink.edits.flatMap(\.drawing.texts))
    }

    /// The incremental update for a file that takes one (tests and offline use).
    public static func increment(_ location: PDFLocation, page: Int, adding drawing: Drawing) throws(FlattenError) -> [UInt8] {
        try prepare(location, page: page, adding: drawing).increment()
    }
}
