import CanvasCore
import CanvasProtocol
import DocumentStore
import InkRendering

/// What a session's request starts beside the loop, its session waiting in its slot meanwhile
/// (`FollowUp.startJob`, `.save`, `.render`), and the running of the method itself.
extension Dispatcher {
    /// Sends the request off the loop first when it needs file or heavy work, the session
    /// waiting for it in its slot: a document method, the page a `canvas.open` names, a large
    /// drawing's encoding. Returns whether it did. (A submit's save, and a result's image, are
    /// asked for by the canvas as it runs: `startSave`, `render`.)
    func startJob(_ method: Method, _ request: inout InFlightRequest, _ session: ServiceSession, _ call: Call) throws(ProtocolError) -> Bool {
        let params = Params(request.request)
        let job = PendingJob(owner: .session(session.id), client: request.client)
        switch method {
        case _ where method.scope == .documentRead || method.scope == .documentWrite:
            let writes = method.scope == .documentWrite
            try startDocumentJob(method, params, &request, now: call.now, session: session.id,
                                 madeBy: writes ? persistence.madeBy(session, &request) : nil,
                                 fence: writes ? persistence.saveFence(session, &request) : nil)
        case .canvasOpen:
            guard let documents, let target = try? documents.targetParams(params) else { return false }
            // Only a canvas opened from closed takes the page's ink; otherwise the page alone
            // is checked, as for any open.
            if let scope = try? ReopenScope(params), scope.reopens, session.canvas.phase == .closed {
                try jobs.read(for: job) {
                    .pageInk(Result { () throws(DocumentError) in try documents.store.pageInk(target.name, target.page, otherInk: scope == .allInk) })
                }
            } else {
                try jobs.read(for: job) { .page(Result { () throws(DocumentError) in try documents.store.page(target.name, target.page) }) }
            }
        case .drawingGet where session.canvas.phase == .open && session.canvas.drawing.pointCount > Self.inlineDrawingPoints:
            // Encoding a large drawing takes long enough to hold up everyone: off the loop, from
            // a copy (the drawing is a value).
            var encoding = job
            encoding.reservedBytes = try memory.admitLargeReply("drawing.get of a large drawing", bytes: session.canvas.drawing.pointCount * 64,
                                                                now: call.now)
            let id = request.id, drawing = session.canvas.drawing, editable = session.canvas.canvas.editableDrawing
            let undo = editable?.canUndo ?? false, redo = editable?.canRedo ?? false
            do throws(ProtocolError) {
                try jobs.read(for: encoding) {
                    .reply(ReplyEncoder.success(id: id, rawResult: WireShapes.drawing(drawing, canUndo: undo, canRedo: redo)))
                }
            } catch {
                memory.release(encoding.reservedBytes)
                throw error
            }
        case .drawingGet:
            return false   // small, or no canvas open: encoded in place
        default:
            // Said to need a job, with none here: the server's fault, not run without it.
            if method.traits.mayNeedJob { throw Dispatcher.noHandler(method) }
            return false
        }
        return true
    }

    /// Starts the save a saving canvas asked for, with its result image when that is to be
    /// rendered beside the loop too. Returns the refusal when none could start: the canvas is
    /// then as it was, and the refusal is the reply.
    func startSave(_ drawing: Drawing, _ request: inout InFlightRequest, _ session: inout ServiceSession, _ call: Call) -> ProtocolError? {
        do throws(ProtocolError) {
            guard let target = session.target else { throw ProtocolError(.internal, "a saving canvas has no document to save into") }
            let save = try DocumentMethods.available(documents)
                .targetSave(target, drawing, madeBy: persistence.madeBy(session, &request), fence: persistence.saveFence(session, &request))
            let asked = (try? Params(request.request).bool("imageData", default: false)) ?? false
            let size = session.size, maxImageSide = limits.maxImageSide, budget = limits.imageTimeBudget
            var render: (@Sendable () -> Result<String, RenderError>)?
            if asked || session.resultImages, ActionExecutor.rendersOffLoop(drawing, session, maxImageSide: maxImageSide) {
                // The budget is the image's: it starts once the save is done.
                render = { ActionExecutor.png(drawing, size: size, maxImageSide: maxImageSide, deadline: RenderDeadline(.now + budget)) }
            }
            jobs.save(target.name, save, for: PendingJob(owner: .session(session.id), client: request.client), render: render)
            return nil
        } catch {
            _ = try? session.run(.saved(false))
            return error
        }
    }

    /// A result whose image takes long to render (tens of milliseconds for a large drawing or
    /// canvas, an 8192-pixel square over a second): rendered off the loop, holding only this
    /// session, and reported when it is in. Never on the loop: with the runner full, or this
    /// owner's renders at their bound, it is reported now without the image (the event back).
    /// The image's time budget counts from now, waiting for a free runner included: the
    /// session is held for the budget at most, and past it the render stops and the result
    /// is reported without the image (`timeout`).
    func render(_ unreported: UnreportedResult, _ request: inout InFlightRequest, _ session: borrowing ServiceSession,
                _ call: Call) -> RequestEvent? {
        do throws(ProtocolError) {
            let drawing = unreported.drawing, size = session.size, maxImageSide = limits.maxImageSide
            let deadline = RenderDeadline(call.now + limits.imageTimeBudget)
            try jobs.read(for: PendingJob(owner: .session(session.id), client: request.client), kind: .render) {
                .image(ActionExecutor.png(drawing, size: size, maxImageSide: maxImageSide, deadline: deadline))
            }
            return nil
        } catch {
            return .imageOmitted(error.data["reason"]?.stringValue ?? "busy")
        }
    }

    /// Runs a session's request.
    func execute(_ method: Method, _ request: Request, _ session: inout ServiceSession, found: JobOutcome?, _ call: inout Call) -> Ran {
        do throws(ProtocolError) {
            let result = try canvas.run(method, Params(request), &session, found: found, &call)
            switch result {
            case .saving(let drawing): return .saving(drawing)
            case .rendering(let unreported): return .rendering(unreported)
            case .object, .raw: return .reply(result.reply(id: request.id))
            }
        } catch {
            return .reply(ReplyEncoder.failure(id: request.id, error: error))
        }
    }
}
