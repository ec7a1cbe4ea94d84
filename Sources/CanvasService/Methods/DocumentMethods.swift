import CanvasCore
import CanvasProtocol
import DocumentStore
import Foundation

/// A save, checked and ready to run wherever saves run; what it returns is the new revision.
typealias PreparedSave = @Sendable () throws(DocumentError) -> DocumentSummary

/// The `document.*` methods: params in, results out, and `DocumentError` as protocol errors.
struct DocumentMethods {
    let store: DocumentStore
    let limits: Limits
    /// Uploads under way (`document.upload.*`), shared by every copy of these methods.
    var uploads = Uploads()

    /// The document methods, or UNAVAILABLE when the folder could not be used (nil).
    static func available(_ documents: DocumentMethods?) throws(ProtocolError) -> DocumentMethods {
        guard let documents else {
            throw ProtocolError(.unavailable, "the document folder is not usable; see the server's log", data: ["feature": "documents"])
        }
        return documents
    }

    /// The methods that only read; the saving ones go through `prepareSave`.
    /// `owner`: whom an upload counts against (`Uploads.owner`: a key, a token's owner or a
    /// connection; nil where none is known).
    func read(_ method: Method, _ params: Params, attachments: [[UInt8]] = [], owner: String? = nil) throws(ProtocolError) -> [String: JSONValue] {
        switch method {
        case .documentGet, .documentUploadBegin, .documentUploadPart, .documentUploadStatus, .documentUploadAbort:
            return try transfer(method, params, attachments: attachments, owner: owner)
        case .documentList:
            let entries = try run { () throws(DocumentError) in
                let entries = try store.list()
                // A document unreadable for want of descriptors is not a problem of that
                // document: the whole listing is unavailable for the moment.
                for entry in entries {
                    if case .failure(let error) = entry.summary, error.isOutOfDescriptors { throw error }
                }
                return entries
            }
            return ["documents": .array(entries.map { entry in
                switch entry.summary {
                case .success(let summary): return .object(Self.json(summary))
                case .failure(let error):
                    // Listed all the same, so a client sees the file and why it is not served.
                    let problem = Self.protocolError(error)
                    var reason = problem.data["reason"] ?? .string(problem.code.rawValue)
                    if case .io = error { reason = "io" }
                    return ["name": .string(entry.name), "problem": ["reason": reason, "message": .string(problem.message)]]
                }
            })]
        case .documentInfo:
            let name = try params.string("name")
            let info = try run { () throws(DocumentError) in try store.info(name) }
            var result = Self.json(info.summary)
            result["pages"] = .array(info.pages.map { page in
                ["width": .number(page.width), "height": .number(page.height), "rotation": .integer(Int64(page.rotation))]
            })
            if let metadata = info.metadata { result["metadata"] = .object(metadata) }
            return result
        case .documentRevisions:
            let name = try params.string("name")
            let formatter = ISO8601DateFormatter()
            let revisions = try run { () throws(DocumentError) in try store.revisions(name) }
            return ["name": .string(name), "revisions": .array(revisions.map { revision in
                ["revision": .integer(Int64(revision.revision)), "bytes": .integer(revision.bytes),
                 "modified": .string(formatter.string(from: revision.modified)), "current": .bool(revision.current),
                 "sha256": .string(revision.sha256)]
            })]
        default:
            throw Dispatcher.noHandler(method)
        }
    }

    /// Checks a saving method's params now, and returns the document it writes, the save itself
    /// to run later, and whether it makes a revision: a flatten of an empty drawing does not (it
    /// answers the current summary, after the same checks of page and `expectedRevision`).
    struct Write {
        let document: String
        let save: PreparedSave
        /// Whether it can make a revision (a flatten of an empty drawing cannot).
        let saves: Bool
        /// A restore of this revision makes none when it is already the current one.
        var unchangedAt: Int? = nil
    }

    /// `madeBy`: the key a save leaves so that its request, run again, finds it made (see
    /// `DocumentStore.flatten`).
    /// `fence`: what the save checks under the document's lock before it writes (see
    /// `DocumentStore.WriteFence`).
    func prepareSave(_ method: Method, _ params: Params, madeBy: String? = nil, fence: DocumentStore.WriteFence? = nil) throws(ProtocolError) -> Write {
        if method == .documentUploadCommit { return try prepareCommit(params) }
        if method == .documentRestore {
            guard let revision = try revisionParam(params, "revision") else {
                throw ProtocolError(.invalidParams, "revision: required", data: ["field": "revision"])
            }
            let name = try params.string("name")
            let expected = try revisionParam(params, "expectedRevision")
            return Write(document: name, save: { [store] () throws(DocumentError) in
                try store.restore(name, revision: revision, expectedRevision: expected, madeBy: madeBy, fence: fence)
            }, saves: true, unchangedAt: revision)
        }
        guard method == .documentFlatten else { throw Dispatcher.noHandler(method) }
        let drawing = try drawingParam(params)
        let name = try params.string("name"), page = try pageParam(params)
        let expected = try revisionParam(params, "expectedRevision")
        guard drawing.hasContent else {
            return Write(document: name, save: { [store] () throws(DocumentError) in
                let summary = try store.summary(name)
                _ = try store.page(name, page)
                if let expected, expected != summary.revision {
                    throw .conflict(name: name, expected: expected, current: summary.revision)
                }
                return summary
            }, saves: false)
        }
        let form = try Self.inkForm(params)
        return Write(document: name, save: { [store] () throws(DocumentError) in
            try store.flatten(name, page: page, drawing: drawing, form: form, expectedRevision: expected, madeBy: madeBy, fence: fence)
        }, saves: true)
    }

    /// A submit's save into its target: the drawing on the page, or, when that makes no
    /// revision (`DocumentTarget.makesRevision`: nothing drawn, or a reopened drawing as it was
    /// loaded), the document's current summary. A drawing reopened from the page's ink
    /// replaces that ink, even with nothing left (which takes it off); unchanged, it still
    /// finds that ink on the page, or the user is told it is gone.
    func targetSave(_ target: DocumentTarget, _ drawing: Drawing, madeBy: String? = nil,
                    fence: DocumentStore.WriteFence? = nil) -> PreparedSave {
        { [store] () throws(DocumentError) in
            guard target.makesRevision(drawing) else {
                if let reopened = target.reopened { try store.checkInk(target.name, target.page, still: reopened.edits) }
                return try store.summary(target.name)
            }
            return try store.flatten(target.name, page: target.page, drawing: drawing, form: target.form, replacing: target.reopened?.edits,
                                     expectedRevision: nil, madeBy: madeBy, fence: fence)
        }
    }

    /// Runs a store call, its failure as a protocol error.
    func run<T>(_ body: () throws(DocumentError) -> T) throws(ProtocolError) -> T {
        do {
            return try body()
        } catch {
            throw Self.protocolError(error)
        }
    }

    /// The `inkForm` param: how a save puts its ink on the page (`paper` when not given).
    static func inkForm(_ params: Params) throws(ProtocolError) -> InkForm {
        guard params.has("inkForm") else { return .paper }
        let text = try params.string("inkForm")
        guard let form = InkForm(rawValue: text) else {
            throw ProtocolError(.invalidParams, "inkForm: \(text.debugDescription) is neither \"paper\" nor \"annotations\"", data: ["field": "inkForm"])
        }
        return form
    }

    /// `canvas.open`'s target: its `document` and `page` (0 when not given).
    func targetParams(_ params: Params) throws(ProtocolError) -> (name: String, page: Int) {
        (try params.string("document"), params.has("page") ? try pageParam(params) : 0)
    }

    func pageParam(_ params: Params) throws(ProtocolError) -> Int {
        Int(try params.integer("page", in: 0...Int64(Int32.max)))
    }

    private func revisionParam(_ params: Params, _ field: String) throws(ProtocolError) -> Int? {
        try params.optionalInteger(field, in: 1...Int64(Int32.max)).map { Int($0) }
    }

    private func drawingParam(_ params: Params) throws(ProtocolError) -> Drawing {
        let drawing = try params.decode(Drawing.self, field: "drawing")
        if drawing.strokes.count > limits.maxStrokesPerDrawing {
            throw ProtocolError(.payloadTooLarge, "drawing.strokes: \(drawing.strokes.count) is over the limit of \(limits.maxStrokesPerDrawing)",
                                data: ["field": "drawing.strokes", "size": .integer(Int64(drawing.strokes.count)),
                                       "limit": .integer(Int64(limits.maxStrokesPerDrawing))])
        }
        if drawing.texts.count > limits.maxTextsPerDrawing {
            throw ProtocolError(.payloadTooLarge, "drawing.texts: \(drawing.texts.count) is over the limit of \(limits.maxTextsPerDrawing)",
                                data: ["field": "drawing.texts", "size": .integer(Int64(drawing.texts.count)),
                                       "limit": .integer(Int64(limits.maxTextsPerDrawing))])
        }
        if drawing.pointCount > limits.maxPointsPerDrawing {
            throw ProtocolError(.payloadTooLarge, "the drawing has \(drawing.pointCount) points; the limit is \(limits.maxPointsPerDrawing)",
                                data: ["field": "drawing.strokes", "size": .integer(Int64(drawing.pointCount)),
                                       "limit": .integer(Int64(limits.maxPointsPerDrawing))])
        }
        if let index = drawing.strokes.firstIndex(where: { $0.points.count > limits.maxPointsPerStroke }) {
            let field = "drawing.strokes[\(index)].points"
            throw ProtocolError(.payloadTooLarge, "\(field): \(drawing.strokes[index].points.count) points; the limit is \(limits.maxPointsPerStroke)",
                                data: ["field": .string(field), "size": .integer(Int64(drawing.strokes[index].points.count)),
                                       "limit": .integer(Int64(limits.maxPointsPerStroke))])
        }
        // Counted in code points, as drawing.addText and JSON Schema's maxLength count.
        if let index = drawing.texts.firstIndex(where: { $0.text.unicodeScalars.count > limits.maxTextLength }) {
            let field = "drawing.texts[\(index)].text"
            throw ProtocolError(.payloadTooLarge, "\(field): \(drawing.texts[index].text.unicodeScalars.count) is over the limit of \(limits.maxTextLength)",
                                data: ["field": .string(field), "size": .integer(Int64(drawing.texts[index].text.unicodeScalars.count)),
                                       "limit": .integer(Int64(limits.maxTextLength))])
        }
        return drawing
    }

    static func json(_ summary: DocumentSummary) -> [String: JSONValue] {
        ["name": .string(summary.name), "revision": .integer(Int64(summary.revision)), "pageCount": .integer(Int64(summary.pageCount)),
         "sha256": .string(summary.sha256)]
    }

    static func protocolError(_ error: DocumentError) -> ProtocolError {
        let message = error.description
        switch error {
        case .invalidName(let name, let reason):
            return ProtocolError(.invalidParams, message, data: ["field": "name", "name": .string(name), "reason": .string(reason)])
        case .notFound(let name):
            return ProtocolError(.notFound, message, data: ["name": .string(name)])
        case .pageOutOfRange(let name, let page, let count):
            return ProtocolError(.notFound, message, data: ["name": .string(name), "page": .integer(Int64(page)),
                                                            "pageCount": .integer(Int64(count))])
        case .revisionNotFound(let name, let revision):
            return ProtocolError(.notFound, message, data: ["name": .string(name), "revision": .integer(Int64(revision))])
        case .conflict(let name, let expected, let current):
            return ProtocolError(.conflict, message, data: ["name": .string(name), "expectedRevision": .integer(Int64(expected)),
                                                            "revision": .integer(Int64(current))])
        case .inkLimit(let name, let page, let stored, let adding, let limit):
            // `size` is what the page would hold, as every over-limit refusal says what it would make.
            return ProtocolError(.payloadTooLarge, message, data: ["field": "drawing", "name": .string(name), "page": .integer(Int64(page)),
                                                                   "pageInk": .integer(Int64(stored)), "size": .integer(Int64(stored + adding)),
                                                                   "limit": .integer(Int64(limit))])
        case .inkChanged(let name, let page):
            return ProtocolError(.conflict, message, data: ["reason": "inkChanged", "document": .string(name), "page": .integer(Int64(page))])
        case .refused(let name, let reason, _):
            return ProtocolError(.invalidParams, message, data: ["field": "upload", "name": .string(name), "reason": .string(reason)])
        case .fenced(let name, let reason, _):
            // Settled as the fence before the save would have been (`RequestFlow`); this is what a
            // client sees only if it is not.
            return ProtocolError(.unavailable, message, data: ["name": .string(name), "reason": .string(reason)])
        case .alreadyExists(let name):
            return ProtocolError(.conflict, message, data: ["name": .string(name), "reason": "exists"])
        case .unreadable(let name, let reason, _):
            return ProtocolError(.unavailable, message, data: ["name": .string(name), "reason": .string(reason)])
        case .io(let operation, _, _) where error.isOutOfSpace:
            return ProtocolError(.unavailable, message, data: ["operation": .string(operation), "reason": "noSpace"])
        case .io(let operation, _, _) where error.isOutOfDescriptors:
            return ProtocolError(.unavailable, message, data: ["operation": .string(operation), "reason": "tooManyOpenFiles"])
        case .io(let operation, _, _):
            return ProtocolError(.internal, message, data: ["operation": .string(operation)])
        }
    }
}
