internal import CPDFSurgery
public import SystemPackage

/// Why a PDF could not be read or changed: the kind, what was being done, and qpdf's message.
public struct PDFError: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Kind: String, Sendable {
        /// `io`: a system call failed; `errno` says why. `timeout`: the work ran past the
        /// budget given when the file was opened.
        /// `tooLarge`: what was read would pass the bound the caller gave (stored ink that
        /// decodes to more than the page's ink may take).
        case damaged, encrypted, pageOutOfRange, badOverlay, io, timeout, tooLarge, `internal`
    }
    public let kind: Kind
    public let operation: String
    public let message: String
    /// The native cause of an `io` failure (a full disk is `.noSpace`); nil for the others.
    public private(set) var errno: Errno?

    public var description: String { "\(operation): \(message)" }

    init(io errno: Errno, _ operation: String, _ message: String) {
        kind = .io
        self.operation = operation
        self.message = message
        self.errno = errno
    }

    /// A failed call's status and the error record the call filled.
    init(_ status: ps_status, _ operation: String, _ error: ps_error) {
        switch status {
        case PS_DAMAGED: kind = .damaged
        case PS_ENCRYPTED: kind = .encrypted
        case PS_PAGE_RANGE: kind = .pageOutOfRange
        case PS_BAD_OVERLAY: kind = .badOverlay
        case PS_IO: kind = .io
        case PS_TIMEOUT: kind = .timeout
        case PS_TOO_LARGE: kind = .tooLarge
        default: kind = .internal
        }
        errno = status == PS_IO && error.code != 0 ? Errno(rawValue: error.code) : nil
        self.operation = operation
        message = withUnsafeBytes(of: error.message) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
    }
}

/// A page as a viewer shows it. `width` and `height` are display points (after `/Rotate`, with
/// UserUnit applied): the space drawings are made in.
public struct PageGeometry: Sendable, Equatable {
    /// The visible box (CropBox within MediaBox) in the page's default user space.
    public let box: (llx: Double, lly: Double, urx: Double, ury: Double)
    /// Clockwise degrees: 0, 90, 180 or 270.
    public let rotation: Int
    public let userUnit: Double
    public let width: Double
    public let height: Double

    public static func == (a: PageGeometry, b: PageGeometry) -> Bool {
        a.box == b.box && a.rotation == b.rotation && a.userUnit == b.userUnit && a.width == b.width && a.height == b.height
    }
}

/// One PDF, open for reading through qpdf. Not Sendable: qpdf objects are not thread-safe.
public final class PDFFile {
    private let handle: OpaquePointer
    /// What messages call it: the path, or the document's name.
    public let path: String

    /// Reads the PDF starting `offset` bytes into the open file `file` (0 for a .pdf file).
    /// It keeps a duplicate of the descriptor: the caller's may be closed at once. Everything
    /// done with it, this open included, fails with `.timeout` once `budget` has passed.
    public init(file: FileDescriptor, name: String, offset: Int64 = 0, budget: Duration? = nil) throws(PDFError) {
        var error = ps_error()
        var document: OpaquePointer?
        let status = ps_open(file.rawValue, name, offset, budget.map(Self.milliseconds) ?? 0, &document, &error)
        guard status == PS_OK, let document else { throw PDFError(status, "open \(name)", error) }
        handle = document
        path = name
    }

    /// Opens the file at `path` (offline tools and tests; the document store reaches its files
    /// through its folder's descriptor instead).
    public convenience init(path: String, offset: Int64 = 0) throws(PDFError) {
        let file: FileDescriptor
        do {
            file = try FileDescriptor.open(FilePath(path), .readOnly, options: [.closeOnExec])
        } catch {
            throw PDFError(io: (error as? Errno) ?? .ioError, "open \(path)", "\(error)")
        }
        defer { try? file.close() }
        try self.init(file: file, name: path, offset: offset)
    }

    deinit { ps_close(handle) }

    private static func milliseconds(_ duration: Duration) -> Int64 {
        max(1, duration.components.seconds * 1000 + duration.components.attoseconds / 1_000_000_000_000_000)
    }

    /// The points of ink flattening put on the page in all, as the page counts them (0 for a page
    /// without our ink, or with ink from before the count was kept).
    public func inkPoints(page index: Int) -> Int {
        Int(clamping: ps_page_ink_points(handle, Int32(clamping: index)))
    }

    /// The points of ink the next flatten adds, for the page's count.
    public func addingInkPoints(_ points: Int) {
        ps_add_ink_points(handle, Int64(points))
    }

    /// From now on, what is left to do with this file must end within `budget`.
    public func setBudget(_ budget: Duration) {
        ps_set_budget(handle, Self.milliseconds(budget))
    }

    public var pageCount: Int { Int(ps_page_count(handle)) }

    /// True when the file cannot take an appended update (qpdf read it only after repair, or it
    /// is encrypted): flatten it with `flattenRewrite`.
    public var needsRewrite: Bool { ps_needs_rewrite(handle) != 0 }

    public func page(_ index: Int) throws(PDFError) -> PageGeometry {
        var error = ps_error()
        var info = ps_page_info()
        let status = ps_page_info_at(handle, Int32(clamping: index), &info, &error)
        guard status == PS_OK else { throw PDFError(status, "read page \(index)", error) }
        return PageGeometry(box: (info.llx, info.lly, info.urx, info.ury), rotation: Int(info.rotation),
                            userUnit: info.user_unit, width: info.display_width, height: info.display_height)
    }

    /// What an earlier flatten stored with the page's ink: the bytes of the drawing an edit was
    /// made from, with where they were kept.
    public struct StoredSource: Sendable {
        public enum Place: Sendable, Equatable {
            /// The one drawing an early version of canvas bridge kept for all the page's ink.
            case wholePage
            /// The edit's form, by its position among the page's forms (`dropForms` takes it).
            case form(Int)
        }
        public let place: Place
        /// Empty when the form carries no drawing.
        public let bytes: [UInt8]
    }

    /// The drawings earlier flattens stored with the page's ink, one per edit in the order made;
    /// empty when the page has none.
    /// `maxBytes` bounds them all together, decoded: past it, `tooLarge`, and decoding stops
    /// there (a stream deflated twice over zeros can claim gigabytes from a few kilobytes).
    public func storedSources(page index: Int, maxBytes: Int) throws(PDFError) -> [StoredSource] {
        try fetched("read the ink of page \(index)") { ps_page_drawing(handle, Int32(clamping: index), maxBytes, &$0, &$1, &$2) } reading: { records in
            var sources: [StoredSource] = []
            var forms = 0
            while let kind = records.byte(), let bytes = records.block() {
                if kind == UInt8(ascii: "L") {
                    sources.append(StoredSource(place: .wholePage, bytes: bytes))
                } else {
                    sources.append(StoredSource(place: .form(forms), bytes: bytes))
                    forms += 1
                }
            }
            return sources
        }
    }

    /// Makes the next flatten replace the edits whose forms are at `forms` (positions as
    /// `storedSources` gives them): the page no longer draws them, and `points`, the ink they
    /// held, comes off the page's count.
    public func dropForms(_ forms: [Int], points: Int) {
        let positions = forms.map { Int32(clamping: $0) }
        ps_drop_forms(handle, positions, positions.count, Int64(points))
    }

    /// The matrix (a b c d e f) from the page's ink space (display points, y up, origin at the
    /// displayed page's bottom-left corner) to its default user space.
    public func placement(page index: Int) throws(PDFError) -> [Double] {
        var error = ps_error()
        var matrix = [Double](repeating: 0, count: 6)
        let status = matrix.withUnsafeMutableBufferPointer { ps_page_placement(handle, Int32(clamping: index), $0.baseAddress, &error) }
        guard status == PS_OK else { throw PDFError(status, "place ink on page \(index)", error) }
        return matrix
    }

    /// An ink annotation as the page has it now: its position in /Annots, and for one of ours
    /// what other programs may have changed in it (JSON: /Subtype, /Rect, /C, /InkList, /BS,
    /// /IT, /Contents, /CA and the digest written with it) and the drawing stored with it; for
    /// another program's /Ink, what it says and what its appearance draws (`ps_page_annotations`).
    public struct StoredAnnotation: Sendable {
        public let index: Int
        /// Its entries as JSON (qpdf's version 2).
        public let entries: [UInt8]
        /// Ours: the drawing stored with it. Another program's: what its appearance draws.
        public let source: [UInt8]
        /// Another program's /Ink, not ours.
        public let isOtherInk: Bool
    }

    /// Bounded as `storedSources`, all records together by `maxBytes`, and the entries by
    /// `maxNumbers` numbers in all (an /InkList of millions is refused before it is copied).
    /// With `otherInk`, other programs' /Ink annotations too.
    public func storedAnnotations(page index: Int, maxBytes: Int, maxNumbers: Int, otherInk: Bool = false) throws(PDFError) -> [StoredAnnotation] {
        try fetched("read the ink annotations of page \(index)") {
            ps_page_annotations(handle, Int32(clamping: index), maxBytes, maxNumbers, otherInk ? 1 : 0, &$0, &$1, &$2)
        } reading: { records in
            var annotations: [StoredAnnotation] = []
            while let kind = records.byte(), kind == UInt8(ascii: "A") || kind == UInt8(ascii: "O"),
                  let position = records.number(), let entries = records.block(), let source = records.block() {
                annotations.append(StoredAnnotation(index: position, entries: entries, source: source, isOtherInk: kind == UInt8(ascii: "O")))
            }
            return annotations
        }
    }

    /// Reads the records a C call hands over (allocated there, freed here) where they are: each
    /// block is copied out once, never the whole of them (stored ink can be megabytes).
    private func fetched<Value>(_ operation: String,
                                _ call: (inout UnsafeMutablePointer<UInt8>?, inout Int, inout ps_error) -> ps_status,
                                reading: (inout Records) -> Value) throws(PDFError) -> Value {
        var error = ps_error()
        var bytes: UnsafeMutablePointer<UInt8>?
        var length = 0
        let status = call(&bytes, &length, &error)
        defer { ps_free(bytes) }
        guard status == PS_OK else { throw PDFError(status, operation, error) }
        var records = Records(UnsafeBufferPointer(start: bytes, count: bytes == nil ? 0 : length))
        return reading(&records)
    }

    /// Records as the C side writes them: kind bytes, 4-byte big-endian numbers, and blocks
    /// (a number, then that many bytes). A record cut short ends the reading. Valid only while
    /// the C side's bytes are (inside `fetched`).
    private struct Records {
        let bytes: UnsafeBufferPointer<UInt8>
        var offset = 0

        init(_ bytes: UnsafeBufferPointer<UInt8>) { self.bytes = bytes }

        mutating func byte() -> UInt8? {
            guard offset < bytes.count else { return nil }
            defer { offset += 1 }
            return bytes[offset]
        }

        mutating func number() -> Int? {
            guard offset + 4 <= bytes.count else { return nil }
            defer { offset += 4 }
            return bytes[offset..<(offset + 4)].reduce(0) { $0 << 8 | Int($1) }
        }

        mutating func block() -> [UInt8]? {
            guard let size = number(), size <= bytes.count - offset else { return nil }
            defer { offset += size }
            return Array(UnsafeBufferPointer(rebasing: bytes[offset..<(offset + size)]))
        }
    }

    /// Makes the next flatten add an ink annotation: `dictionary` (PDF syntax) its own entries,
    /// an appearance drawing `strokes` then page `overlayPage` of `overlay` as a form would,
    /// covering `box` (llx, lly, urx, ury in ink space), and `source`, the drawing, stored with
    /// it. Annotations given the same overlay share what its pages use.
    public func addAnnotation(dictionary: String, strokes: [UInt8], overlay: [UInt8], overlayPage: Int = 0, source: [UInt8],
                              box: [Double]) throws(PDFError) {
        precondition(box.count == 4, "a box is four numbers")
        var error = ps_error()
        let text = Array(dictionary.utf8)
        let status = text.withUnsafeBufferPointer { text in
            text.withMemoryRebound(to: CChar.self) { chars in
                ps_add_annotation(handle, chars.baseAddress, chars.count, strokes, strokes.count, overlay, overlay.count,
                                  Int32(clamping: overlayPage), source, source.count, box, &error)
            }
        }
        guard status == PS_OK else { throw PDFError(status, "add an ink annotation", error) }
    }

    /// Makes the next flatten take the ink annotations at `positions` in /Annots off the page.
    public func dropAnnotations(_ positions: [Int]) {
        let positions = positions.map { Int32(clamping: $0) }
        ps_drop_annotations(handle, positions, positions.count)
    }

    /// The incremental update that adds ink to the page, over its content and any earlier ink,
    /// with `drawing` (its source, encoded) stored beside it: `strokes`, content-stream operators in display
    /// points (origin top-left, y down), then `texts`, a one-page PDF in display points (or
    /// empty). Append it to this PDF's bytes. A file can make one increment; open it again for
    /// another.
    public func flattenIncrement(page index: Int, strokes: [UInt8], texts: [UInt8], drawing: [UInt8]) throws(PDFError) -> [UInt8] {
        var error = ps_error()
        var bytes: UnsafeMutablePointer<UInt8>?
        var length = 0
        let status = ps_flatten_increment(handle, Int32(clamping: index), texts, texts.count,
                                          strokes, strokes.count,
                                          drawing, drawing.count,
                                          &bytes, &length, &error)
        defer { ps_free(bytes) }
        guard status == PS_OK, let bytes else { throw PDFError(status, "place the ink on page \(index)", error) }
        return Array(UnsafeBufferPointer(start: bytes, count: length))
    }

    /// Adds the ink to the page as `flattenIncrement` does, and writes the whole new PDF to
    /// the open file `descriptor`, from its current position.
    public func flattenRewrite(page index: Int, strokes: [UInt8], texts: [UInt8], drawing: [UInt8], to descriptor: FileDescriptor) throws(PDFError) {
        var error = ps_error()
        let status = ps_flatten_rewrite(handle, Int32(clamping: index), texts, texts.count,
                                        strokes, strokes.count,
                                        drawing, drawing.count,
                                        descriptor.rawValue, &error)
        guard status == PS_OK else { throw PDFError(status, "rewrite the document with ink on page \(index)", error) }
    }
}
