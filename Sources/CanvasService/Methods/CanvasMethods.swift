import CanvasCore
import CanvasProtocol
import DocumentStore
import InkRendering

/// A method's result: an object, or JSON text already written (a drawing, which is large
/// enough that building it as values first would cost more than the request); or no result yet:
/// for a submit into a document, the canvas is saving this drawing, and the method runs again
/// with the save's outcome; for a result whose image takes long to render, the canvas has run,
/// and what it did is reported once a job has rendered the image (`CanvasMethods.report`).
enum MethodResult {
    case object([String: JSONValue])
    case raw([UInt8])
    case saving(Drawing)
    case rendering(UnreportedResult)

    func reply(id: RequestID) -> [UInt8] {
        switch self {
        case .object(let result): return ReplyEncoder.success(id: id, result: result)
        case .raw(let text): return ReplyEncoder.success(id: id, rawResult: text)
        case .saving: preconditionFailure("a submit that is saving has no reply until its save is done")
        case .rendering: preconditionFailure("a result whose image is rendering has no reply until the image is in")
        }
    }
}

/// A canvas command that ran and emitted a result whose image is to be rendered off the loop
/// first (`ActionExecutor.imageToRender`). The canvas has moved already; its actions (events,
/// timers) are carried out and its reply written once the image is in, while the session is
/// held, so nothing sees the canvas before its events go.
struct UnreportedResult {
    enum Command {
        /// `canvas.minimize`, `.submit` or `.cancel`. `imageData`: whether the reply carries
        /// the image; `saved`: a submit's save.
        case ended(Method, imageData: Bool, saved: SubmitSave?)
        case doubleTap(DoubleTapOutcome)
    }

    let command: Command
    let actions: [CanvasAction]
    /// The result's drawing, whose image is rendered.
    let drawing: Drawing
}

/// A submit's save into its document: the summary its reply reports, and whether the save
/// made a revision (and so is announced).
struct SubmitSave {
    let summary: [String: JSONValue]
    /// When its revision was committed (`DocumentSummary.savedAt`).
    let savedAt: Int64?
    let madeRevision: Bool
}

/// The methods that act on one session: `session.close`, `canvas.*`, `pencil.*`, `drawing.*`.
/// Each runs the canvas machine and hands its actions to the executor.
struct CanvasMethods {
    let params: SessionParams
    let executor: ActionExecutor
    /// nil when the document folder is not usable.
    let documents: DocumentMethods?

    /// Runs `method` on `session`. `found` is what a job off the loop found for it first: a
    /// submit's save, or the page a `canvas.open` names.
    func run(_ method: Method, _ params: Params, _ session: inout ServiceSession, found: JobOutcome?,
             _ call: inout Call) throws(ProtocolError) -> MethodResult {
        // Another method that acts drops a stroke's waiting parts; a refused request changes
        // nothing, so it leaves them waiting, except a refused stroke or part: that ends the
        // stroke, so nothing of it waits to be glued to the client's next stroke.
        let waiting = session.strokeParts
        if method != .drawingAddStroke && !method.changesNothing { session.strokeParts = nil }
        do throws(ProtocolError) {
            return try dispatch(method, params, &session, found: found, &call)
        } catch {
            session.strokeParts = method == .drawingAddStroke ? nil : waiting
            throw error
        }
    }

    private func dispatch(_ method: Method, _ params: Params, _ session: inout ServiceSession, found: JobOutcome?,
                          _ call: inout Call) throws(ProtocolError) -> MethodResult {
        switch method {
        case .drawingAddStroke:
            guard let whole = try self.params.assembleStroke(params, &session) else {
                return .object(["changed": false, "pendingPoints": .integer(Int64(session.strokeParts?.points.count ?? 0)),
                                "strokes": .integer(Int64(session.canvas.drawing.strokes.count)),
                                "texts": .integer(Int64(session.canvas.drawing.texts.count))])
            }
            return .object(try edit(try self.params.addStroke(whole.stroke, joined: whole.joined, on: session.canvas.drawing),
                                    by: .drawingAddStroke, &session, &call))
        case .sessionClose:
            return .object(["closed": true])
        case .canvasInitialize:
            session.initializePencil()
        case .canvasState:
            return .raw(session.stateText())
        case .canvasOpen:
            if let reopened = try open(params, &session, found: found, &call) {
                return .object(["state": .string(session.canvas.phase.rawValue), "reopened": .object(reopened)])
            }
        case .canvasSubmit where session.target != nil && !session.canvas.canvas.isSaving:
            // Into a document: the canvas decides whether a save is due, and waits for it.
            _ = try params.bool("imageData", default: false)
            let actions: [CanvasAction]
            do {
                actions = try session.run(.submit(savingFirst: true))
            } catch {
                throw Self.invalidState(error, session)
            }
            guard case .save(let drawing)? = actions.first else { preconditionFailure("a submit into a document saves first") }
            return .saving(drawing)
        case .canvasMinimize, .canvasSubmit, .canvasCancel:
            return try end(method, params, &session, found: found, &call)
        case .canvasFinishTransition:
            try perform(.finishTransition(nil), &session, &call)
        case .pencilDoubleTap:
            return doubleTap(&session, &call)
        case .pencilConfigure:
            let pencil = session.canvas.pencil
            let change = try self.params.pencilChange(params, current: pencil.configuration, initialized: pencil.initialized)
            session.configurePencil(change.configuration)
            if change.initialize { session.initializePencil() }
            return .object(["pencil": WireShapes.pencil(session), "state": .string(session.canvas.phase.rawValue)])
        case .drawingGet:
            try Self.requireOpen(session)
            let editable = session.canvas.canvas.editableDrawing
            return .raw(WireShapes.drawing(session.canvas.drawing, canUndo: editable?.canUndo ?? false,
                                           canRedo: editable?.canRedo ?? false))
        case .drawingAddText, .drawingMoveText, .drawingEditText, .drawingErase, .drawingUndo, .drawingRedo, .drawingClear:
            return .object(try edit(try self.params.edit(method, params, on: session.canvas.drawing), by: method, &session, &call))
        case .hello, .sessionOpen, .documentList, .documentInfo, .documentFlatten, .documentRevisions, .documentRestore,
             .documentGet, .documentUploadBegin, .documentUploadPart, .documentUploadStatus, .documentUploadAbort, .documentUploadCommit:
            preconditionFailure("\(method.rawValue) does not act on a session")
        }
        return .object(["state": .string(session.canvas.phase.rawValue)])
    }

    /// `canvas.open`: from closed a new drawing, for a document page when one is named, with
    /// that page's ink as the drawing when `reopen` says so. Returns `reopened`, what a reopen
    /// loaded, for the result.
    private func open(_ params: Params, _ session: inout ServiceSession, found: JobOutcome?,
                      _ call: inout Call) throws(ProtocolError) -> [String: JSONValue]? {
        let size = try self.params.size(params)
        let scope = try ReopenScope(params), reopen = scope.reopens
        if reopen && !params.has("document") {
            throw ProtocolError(.invalidParams, "reopen: needs a document, whose page's ink to reopen", data: ["field": "reopen"])
        }
        let form = try DocumentMethods.inkForm(params)
        if params.has("inkForm") && !params.has("document") {
            throw ProtocolError(.invalidParams, "inkForm: needs a document, whose page the ink goes to", data: ["field": "inkForm"])
        }
        // Only an open that opens (from closed or minimized) takes a target and a size; on an
        // open canvas it changes nothing, and a refused one changes nothing either.
        let opens = session.canvas.phase == .closed || session.canvas.phase == .minimized
        var target: (target: DocumentTarget, size: (width: Int, height: Int))?
        var ink: PageInk?
        if params.has("document") || params.has("page") {
            // The target is checked now, so nobody draws for a page that is not there.
            let documents = try DocumentMethods.available(documents)
            let (name, page) = try documents.targetParams(params)
            let outcome: Result<PageSummary, DocumentError>
            switch found {
            case .page(let read)?: outcome = read
            case .pageInk(let read)?:
                outcome = read.map(\.page)
                ink = try? read.get().ink
            default: preconditionFailure("canvas.open on a document runs after its page is read")
            }
            let geometry: PageSummary
            do throws(ProtocolError) {
                geometry = try documents.run { () throws(DocumentError) in try outcome.get() }
            } catch {
                // The store calls it a name; in this request it is the `document` param.
                var error = error
                if error.data["field"] == "name" { error.data["field"] = "document" }
                throw error
            }
            let current = session.target.map { "page \($0.page) of \($0.name)" } ?? "no document"
            var data: [String: JSONValue] = [:]
            if let current = session.target { data = ["document": .string(current.name), "page": .integer(Int64(current.page))] }
            if reopen, session.canvas.phase == .open || session.canvas.phase == .minimized,
               !(session.target?.isPage(page, of: name) ?? false) || session.target?.reopened == nil {
                // The canvas holds a drawing of its own; loading the page's ink would either
                // drop it or mix two drawings that save differently. (While it animates, the
                // open is refused as any open is.)
                data["reason"] = "notReopened"
                let holds = session.target == nil ? "a drawing for no document" : "a drawing of its own for \(current)"
                throw ProtocolError(.conflict, "the canvas holds \(holds), not page \(page) of \(name)'s ink reopened; submit or cancel it first",
                                    data: data)
            }
            if opens {
                target = (DocumentTarget(name: name, page: page, form: form), (Int(geometry.width.rounded(.up)), Int(geometry.height.rounded(.up))))
            } else if session.canvas.phase == .open, !(session.target?.isPage(page, of: name) ?? false) {
                // The open drawing was made for its own page; keeping it while saying "open"
                // would let the client believe its ink goes to the page it just named.
                throw ProtocolError(.conflict, "the canvas is already open on \(current); submit or cancel it first", data: data)
            }
        }
        var loaded: Drawing = .empty
        if let ink, session.canvas.phase == .closed {
            loaded = ink.drawing
            let limits = self.params.limits
            let strokeTooLong = loaded.strokes.contains { $0.points.count > limits.maxPointsPerStroke }
            if loaded.strokes.count > limits.maxStrokesPerDrawing || loaded.texts.count > limits.maxTextsPerDrawing
                || loaded.pointCount > limits.maxPointsPerDrawing || strokeTooLong {
                throw ProtocolError(.payloadTooLarge, "the page's ink (\(loaded.strokes.count) strokes, \(loaded.texts.count) texts, \(loaded.pointCount) points) is more than a drawing may hold",
                                    data: ["field": "reopen", "strokes": .integer(Int64(loaded.strokes.count)), "texts": .integer(Int64(loaded.texts.count)),
                                           "size": .integer(Int64(loaded.pointCount)), "limit": .integer(Int64(limits.maxPointsPerDrawing))])
            }
        }
        if loaded == .empty {
            try perform(.open, &session, &call)
        } else {
            // A page's ink, loaded: the session is written whole after this.
            executor.run(try actions(&session) { session throws(CanvasRejection) in try session.canvas.open(drawing: loaded) },
                         &session, imageData: false, &call)
        }
        guard opens else { return nil }
        if var target {
            if let ink, reopen {
                target.target.reopened = ReopenedInk(edits: ink.replaceable.map(\.digest), drawing: PageInk.digest(loaded),
                                                     otherInk: ink.otherInk > 0 ? true : nil)
            }
            session.target = target.target
            session.size = target.size
        }
        if let size { session.size = size }
        guard let ink, reopen else { return nil }
        var reopened: [String: JSONValue] = ["edits": .integer(Int64(ink.replaceable.count)), "strokes": .integer(Int64(loaded.strokes.count)),
                                             "texts": .integer(Int64(loaded.texts.count))]
        // Asked for, other programs' ink is counted even when there is none: the answer says so.
        if scope == .allInk { reopened["otherInk"] = .integer(Int64(ink.otherInk)) }
        return reopened
    }

    /// `canvas.minimize`, `.submit`, `.cancel`. A submit that was saving (`MethodResult.saving`)
    /// runs again with its save's outcome in `found`: only a save that worked ends the drawing,
    /// so a failed one leaves the canvas as it was for another try.
    private func end(_ method: Method, _ params: Params, _ session: inout ServiceSession, found: JobOutcome?,
                     _ call: inout Call) throws(ProtocolError) -> MethodResult {
        let wantsImage = try params.bool("imageData", default: false)
        var saved: SubmitSave?
        if method == .canvasSubmit, session.canvas.canvas.isSaving {
            guard case .saved(let outcome, _)? = found else { preconditionFailure("a saving canvas runs again with its save's outcome") }
            let documents = try DocumentMethods.available(documents)
            do throws(ProtocolError) {
                let summary = try documents.run { () throws(DocumentError) in try outcome.get() }
                saved = SubmitSave(summary: DocumentMethods.json(summary), savedAt: summary.savedAt,
                                   madeRevision: session.target?.makesRevision(session.canvas.drawing) ?? false)
            } catch {
                _ = try? session.run(.saved(false))
                throw error
            }
        }
        let step: CanvasStep
        switch method {
        case .canvasMinimize: step = .minimize
        case .canvasSubmit where session.canvas.canvas.isSaving: step = .saved(true)
        case .canvasSubmit: step = .submit(savingFirst: false)
        default: step = .cancel
        }
        let actions = try actions(step, &session)
        // A save's outcome brings the image its result needs (`Dispatcher.startSave`).
        let rendered = found?.image
        if rendered == nil, let drawing = executor.imageToRender(actions, session, imageData: wantsImage) {
            return .rendering(UnreportedResult(command: .ended(method, imageData: wantsImage, saved: saved), actions: actions, drawing: drawing))
        }
        return .object(ended(method, actions, imageData: wantsImage, saved: saved, rendered: rendered, &session, &call))
    }

    /// Reports a result whose image a job rendered off the loop, or could not (`image`): what
    /// its command asked for is carried out, and the reply written.
    func report(_ unreported: UnreportedResult, image: ResultImage, _ session: inout ServiceSession, _ call: inout Call) -> MethodResult {
        switch unreported.command {
        case .ended(let method, let imageData, let saved):
            return .object(ended(method, unreported.actions, imageData: imageData, saved: saved, rendered: image, &session, &call))
        case .doubleTap(let outcome):
            return .object(tapped(outcome, unreported.actions, rendered: image, &session, &call))
        }
    }

    /// What an end's command asked for, carried out, and its reply. `rendered`: its result's
    /// image, when made before (nil: rendered here, a small one).
    private func ended(_ method: Method, _ actions: [CanvasAction], imageData: Bool, saved: SubmitSave?,
                       rendered: ResultImage?, _ session: inout ServiceSession, _ call: inout Call) -> [String: JSONValue] {
        var reply = executor.run(actions, &session, imageData: imageData, rendered: rendered, &call) ?? [:]
        reply["state"] = .string(session.canvas.phase.rawValue)
        if method != .canvasMinimize { session.leaveTarget() }
        if let saved {
            reply["document"] = .object(saved.summary)
            // An empty drawing saves nothing (nor does a reopened one saved as it was loaded):
            // the reply names the current revision, and no event announces a save that did not
            // happen.
            if saved.madeRevision {
                executor.publish(&session, "document.saved", WireShapes.saved(saved.summary, cause: method.rawValue), &call)
                // The shared topic names the session only when nobody owns sessions: one owned
                // by a key or a web token is nobody else's business, not even its id.
                call.saves.append((saved.summary, saved.savedAt, method.rawValue, session.owner == nil ? session.id : nil))
            }
        }
        return reply
    }

    private func doubleTap(_ session: inout ServiceSession, _ call: inout Call) -> MethodResult {
        let report = session.doubleTap()
        if let drawing = executor.imageToRender(report.actions, session, imageData: false) {
            return .rendering(UnreportedResult(command: .doubleTap(report.outcome), actions: report.actions, drawing: drawing))
        }
        return .object(tapped(report.outcome, report.actions, rendered: nil, &session, &call))
    }

    /// What a double-tap asked for, carried out, and its reply.
    private func tapped(_ outcome: DoubleTapOutcome, _ actions: [CanvasAction], rendered: ResultImage?, _ session: inout ServiceSession,
                        _ call: inout Call) -> [String: JSONValue] {
        let canvasResult = executor.run(actions, &session, imageData: false, rendered: rendered, &call)
        var result: [String: JSONValue] = [
            "outcome": .string(outcome.name),
            "state": .string(session.canvas.phase.rawValue),
        ]
        var eventData: [String: JSONValue] = ["outcome": .string(outcome.name)]
        switch outcome {
        case .ignored(let reason):
            result["reason"] = .string(reason.rawValue)
            eventData["reason"] = .string(reason.rawValue)
        case .minimized:
            result["canvasResult"] = canvasResult.map { .object($0) }
        case .preference(_, let tools):
            result["tool"] = WireShapes.tools(tools)
        case .opened:
            break
        }
        executor.publish(&session, "pencil.doubleTap", eventData, &call)
        return result
    }

    /// Runs an edit `method` asked for.
    private func edit(_ edit: DrawingEdit, by method: Method, _ session: inout ServiceSession, _ call: inout Call) throws(ProtocolError) -> [String: JSONValue] {
        let report: EditReport
        do {
            report = try session.edit(edit, within: self.params.limits.drawingBounds)
        } catch {
            switch error {
            case .rejected(let rejection): throw Self.invalidState(rejection, session)
            case .invalid(.noSuchText(let index, let count)):
                throw ProtocolError(.notFound, "there is no text \(index); the drawing has \(count)",
                                    data: ["index": .integer(Int64(index)), "count": .integer(Int64(count))])
            case .invalid(.overLimit(let field, let size, let limit)):
                // The same refusal as a stroke or text too many, though the request itself was
                // small: what it would have made is what is too large.
                throw ProtocolError(.payloadTooLarge, "\(method.rawValue) would leave the drawing with \(size) \(field), over the limit of \(limit); nothing was changed",
                                    data: ["field": .string(field), "size": .integer(Int64(size)), "limit": .integer(Int64(limit))])
            case .invalid(.cannotJoin(let refusal)):
                throw SessionParams.cannotJoin(refusal)
            case .invalid(.invalid(let validation)):
                throw ProtocolError(.invalidParams, "\(validation.field): \(validation.description)",
                                    data: ["field": .string(validation.field)])
            }
        }
        executor.run(report.actions, &session, imageData: false, &call)
        return Self.editResult(changed: report.changed, session.canvas)
    }

    /// An edit's result: whether it changed the drawing, and the canvas after it (its history and
    /// drawing). What a shared session's log makes again on replay instead of keeping the reply
    /// (`SessionOperation.KeptReply.edit`).
    static func editResult(changed: Bool, _ canvas: CanvasSession) -> [String: JSONValue] {
        let history = canvas.canvas.editableDrawing, drawing = canvas.drawing
        return [
            "changed": .bool(changed), "canUndo": .bool(history?.canUndo ?? false), "canRedo": .bool(history?.canRedo ?? false),
            "strokes": .integer(Int64(drawing.strokes.count)), "texts": .integer(Int64(drawing.texts.count)),
        ]
    }

    /// Runs a canvas command that emits no result (an open, a transition's end), and its actions.
    private func perform(_ step: CanvasStep, _ session: inout ServiceSession, _ call: inout Call) throws(ProtocolError) {
        executor.run(try actions(step, &session), &session, imageData: false, &call)
    }

    /// Runs a canvas command: the actions it asks for, or its refusal as the wire says it.
    private func actions(_ step: CanvasStep, _ session: inout ServiceSession) throws(ProtocolError) -> [CanvasAction] {
        try actions(&session) { session throws(CanvasRejection) in try session.run(step) }
    }

    /// Runs a canvas command on the session: the actions it asks for, or its refusal as the wire says it.
    private func actions(_ session: inout ServiceSession,
                         _ command: (inout ServiceSession) throws(CanvasRejection) -> [CanvasAction]) throws(ProtocolError) -> [CanvasAction] {
        do {
            return try command(&session)
        } catch {
            throw Self.invalidState(error, session)
        }
    }

    static func requireOpen(_ session: ServiceSession) throws(ProtocolError) {
        let phase = session.canvas.phase
        guard phase == .open else { throw invalidState(phase.isTransition ? .transition : .notOpen, session) }
    }

    static func invalidState(_ rejection: CanvasRejection, _ session: ServiceSession) -> ProtocolError {
        ProtocolError(.invalidState, rejection.description,
                      data: ["reason": .string(rejection.rawValue), "state": .string(session.canvas.phase.rawValue)])
    }
}
