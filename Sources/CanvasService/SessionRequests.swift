import CanvasCore
import CanvasProtocol
import DocumentStore
import InkRendering

/// A session's request, from the moment its slot hands the session over to its reply: looked up
/// among the answered ones, fenced (with a session store, before a save), sent off the loop
/// when it needs file or heavy work, run, remembered for retries, and then either given back
/// or (with a session store) written before its reply goes (`SessionStoreSteps`).
///
/// The reply cache is written in one place, `remember`; every path that gives a session back
/// goes through `resume`, which replays what queued behind it.
extension Dispatcher {
    /// Runs a request on a session its slot handed over. Before this returns, the session is
    /// back in the table, held by a job or store step, or closed.
    func serve(_ method: Method, _ request: Request, _ params: Params, _ session: consuming ServiceSession,
               frames: [[UInt8]], envelope: [[UInt8]], _ call: inout Call) -> [UInt8]? {
        session.lastActive = call.now
        // Written only when needed: to store the reply (for a read, after it went out), or to
        // tell a retry from a reused id.
        lazy var fingerprint = ReplyCache.fingerprint(request, method: method)
        do throws(ProtocolError) {
            // A retry of a request already answered gets the same reply, and nothing runs twice.
            switch session.replies.lookup(request.id, request: fingerprint) {
            case .retry(let cached):
                // A reply already given stays true wherever the session is now.
                resume(session, &call)
                return cached
            case .notKept where method.changesNothing, .miss:
                break   // a read answered again is the same answer
            case let answered:
                return try recorded(answered, request)   // throws: answered, and not kept or reused
            }
        } catch {
            resume(session, &call)
            return ReplyEncoder.failure(id: request.id, error: error)
        }
        if shared != nil, method.scope == .documentWrite, session.storedAt != call.now {
            // Fenced: the save starts once the store has confirmed this copy (`StoreStep.fence`).
            fence(.request(method), request, session, fingerprint: fingerprint, frames: frames, envelope: envelope, &call)
            return nil
        }
        return proceed(method, request, params, consume session, fingerprint: nil, frames: frames, envelope: envelope, &call)
    }

    /// Goes on with a request past its lookup (and fence): off the loop first if it needs to be,
    /// else run now. `fingerprint`: the request's, if already written.
    func proceed(_ method: Method, _ request: Request, _ params: Params, _ session: consuming ServiceSession,
                 fingerprint known: [UInt8]?, frames: [[UInt8]], envelope: [[UInt8]], _ call: inout Call) -> [UInt8]? {
        var session = session
        lazy var fingerprint = known ?? ReplyCache.fingerprint(request, method: method)
        do throws(ProtocolError) {
            if Self.mayStartJob(method), try startJob(method, request, params, &session, fingerprint, frames: frames, envelope: envelope, call) {
                return nil
            }
        } catch {
            resume(session, &call)
            return ReplyEncoder.failure(id: request.id, error: error)
        }
        if shared == nil, method.changesNothing {
            // A read: its reply is final here, so it goes first when it may, and is remembered
            // and the session put back while the client already has it.
            guard case .reply(let reply) = execute(method, request, params, &session, found: nil, &call) else {
                preconditionFailure("a read saves nothing")
            }
            let sent = call.sendAtOnce(reply, to: envelope)
            remember(reply, request, fingerprint, in: &session)
            resume(session, &call)
            return sent ? nil : reply
        }
        let mark = call.output.events.count
        switch execute(method, request, params, &session, found: nil, &call) {
        case .saving(let drawing):
            save(drawing, request, params, session, fingerprint: fingerprint, frames: frames, envelope: envelope, &call)
        case .rendering(let unreported):
            render(unreported, method, request, session, fingerprint: fingerprint, frames: frames, envelope: envelope, eventsFrom: mark, &call)
        case .reply(let reply):
            finish(reply, method, request, session, fingerprint: fingerprint, frames: frames, envelope: envelope, eventsFrom: mark, &call)
        }
        return nil
    }

    /// A request's reply is in: remembered, then sent and the session given back (or, with a
    /// session store, the change written first, `conclude`).
    func finish(_ reply: [UInt8], _ method: Method, _ request: Request, _ session: consuming ServiceSession, fingerprint: [UInt8],
                frames: [[UInt8]], envelope: [[UInt8]], eventsFrom mark: Int, _ call: inout Call) {
        var session = session
        remember(reply, request, fingerprint, in: &session)
        announceSaves(&call)
        if shared != nil {
            conclude(method, request, reply, session, fingerprint: fingerprint, frames: frames, envelope: envelope, eventsFrom: mark, &call)
            return
        }
        // The reply before what queued behind the session: a session's replies keep their order.
        call.reply(reply, to: envelope)
        if method == .sessionClose { close(session, event: "session.closed", &call) } else { resume(session, &call) }
    }

    /// A submit's canvas is saving `drawing` into its document: the save starts (fenced first,
    /// with a session store), holding the session, and the submit runs again with its outcome.
    func save(_ drawing: Drawing, _ request: Request, _ params: Params, _ session: ServiceSession, fingerprint: [UInt8],
              frames: [[UInt8]], envelope: [[UInt8]], _ call: inout Call) {
        if shared != nil, session.storedAt != call.now {
            fence(.save(drawing), request, session, fingerprint: fingerprint, frames: frames, envelope: envelope, &call)
            return
        }
        startSave(drawing, request, params, session, fingerprint: fingerprint, frames: frames, envelope: envelope, &call)
    }

    /// Starts the save a saving canvas asked for, with its result image when that is to be
    /// rendered beside the loop too.
    func startSave(_ drawing: Drawing, _ request: Request, _ params: Params, _ session: ServiceSession, fingerprint: [UInt8],
                   frames: [[UInt8]], envelope: [[UInt8]], _ call: inout Call) {
        var session = session
        do throws(ProtocolError) {
            let target = session.target!
            let save = try DocumentMethods.available(documents)
                .targetSave(target, drawing, madeBy: madeBy(session, request, fingerprint), fence: saveFence(session, request, fingerprint))
            let asked = (try? params.bool("imageData", default: false)) ?? false
            let size = session.size, maxImageSide = limits.maxImageSide, budget = limits.imageTimeBudget
            var render: (@Sendable () -> Result<String, RenderError>)?
            if asked || session.resultImages, ActionExecutor.rendersOffLoop(drawing, session, maxImageSide: maxImageSide) {
                // The budget is the image's: it starts once the save is done.
                render = { ActionExecutor.png(drawing, size: size, maxImageSide: maxImageSide, deadline: RenderDeadline(.now + budget)) }
            }
            var job = PendingJob(kind: .canvas(.canvasSubmit), request: request, envelope: envelope, client: call.client,
                                 holding: (session, fingerprint))
            job.frames = frames
            job.retaking = call.retaking
            jobs.save(target.name, save, for: job, render: render)
        } catch {
            // Nothing was saved: the canvas is as it was, and the refusal is the reply.
            _ = try? session.canvas.saved(false)
            finish(ReplyEncoder.failure(id: request.id, error: error), .canvasSubmit, request, session, fingerprint: fingerprint,
                   frames: frames, envelope: envelope, eventsFrom: call.output.events.count, &call)
        }
    }

    /// A result whose image takes long to render (tens of milliseconds for a large drawing or
    /// canvas, an 8192-pixel square over a second): rendered off the loop, holding only this
    /// session, and reported when it is in (`finishJobs`). Never on the loop: with the runner
    /// full, or this owner's renders at their bound, it is reported now without the image.
    /// The image's time budget counts from now, waiting for a free runner included: the
    /// session is held for the budget at most, and past it the render stops and the result
    /// is reported without the image (`timeout`).
    func render(_ unreported: UnreportedResult, _ method: Method, _ request: Request, _ session: consuming ServiceSession,
                fingerprint: [UInt8], frames: [[UInt8]], envelope: [[UInt8]], eventsFrom mark: Int, _ call: inout Call) {
        let omitted: String
        do throws(ProtocolError) {
            let drawing = unreported.drawing, size = session.size, maxImageSide = limits.maxImageSide
            let deadline = RenderDeadline(call.now + limits.imageTimeBudget)
            var job = PendingJob(kind: .rendering(unreported), request: request, envelope: envelope, client: call.client,
                                 holding: (session, fingerprint))
            job.frames = frames
            job.retaking = call.retaking
            try jobs.read(for: job, kind: .render) { .image(ActionExecutor.png(drawing, size: size, maxImageSide: maxImageSide, deadline: deadline)) }
            return
        } catch {
            omitted = error.data["reason"]?.stringValue ?? "busy"
        }
        var session = session
        let reply = canvas.report(unreported, image: .omitted(reason: omitted), &session, &call).reply(id: request.id)
        finish(reply, method, request, session, fingerprint: fingerprint, frames: frames, envelope: envelope, eventsFrom: mark, &call)
    }

    /// The answer to a request found answered in the session's reply cache, or in the store's
    /// record of answered requests: its first reply, whichever instance gave it.
    func recorded(_ lookup: ReplyCache.Lookup, _ request: Request) throws(ProtocolError) -> [UInt8] {
        switch lookup {
        case .retry(let reply):
            return reply
        case .notKept:
            throw ProtocolError(.unavailable, "id \(request.id) was answered, but its reply was over \(limits.maxCachedReplyBytes) bytes and not kept; it is not run twice",
                                data: ["reason": "replyNotKept", "limit": .integer(Int64(limits.maxCachedReplyBytes))])
        case .reused:
            // Well-formed, but it clashes with what the session already holds under that id.
            throw ProtocolError(.conflict, "id \(request.id) was already used for a different request in this session",
                                data: ["id": request.id.json])
        case .miss:
            preconditionFailure("a request not answered has no recorded answer")
        }
    }

    /// Remembers a session request's reply for retries: the one place the reply cache is written.
    func remember(_ reply: [UInt8], _ request: Request, _ fingerprint: [UInt8], in session: inout ServiceSession) {
        session.replies.store(reply, for: request.id, request: fingerprint)
    }

    /// Gives a session back and replays what queued behind it, in order.
    func resume(_ session: consuming ServiceSession, _ call: inout Call) {
        let id = session.id
        let queued = table.release(session)
        if !queued.isEmpty { replay(queued, on: id, &call) }
    }

    func replay(_ queued: [QueuedWork], on id: String, _ call: inout Call) {
        // Each queued request is a request of its own: not one being answered a second time.
        let retaking = call.retaking
        call.retaking = false
        defer { call.retaking = retaking }
        for (index, work) in queued.enumerated() {
            // Held again by the one before: the rest wait their turn as they are, not read,
            // decoded and counted once more per request ahead of them.
            if index > 0, table.requeue(id, queued[index...]) { return }
            switch work {
            case .request(let request, let method, let frames, let envelope, let client):
                call.client = client
                call.connection = envelope.first
                if let reply = answer(request, method, frames: frames, envelope: envelope, &call) { call.reply(reply, to: envelope) }
            case .timer(let ticket):
                fire(ticket, on: id, &call)
            }
        }
    }

    // MARK: Jobs

    /// Whether `startJob` may send `method` off the loop: most requests (a `canvas.state`, an
    /// edit) never are, and are spared the call.
    static func mayStartJob(_ method: Method) -> Bool {
        method.scope != .session || method == .canvasOpen || method == .drawingGet
    }

    /// Sends the request off the loop first when it needs file or heavy work, the job taking the
    /// session with it: a document method, the page a `canvas.open` names, a large drawing's
    /// encoding. Returns whether it did. (A submit's save, and a result's image, are asked for
    /// by the canvas as it runs: `save`, `render`.)
    func startJob(_ method: Method, _ request: Request, _ params: Params, _ session: inout ServiceSession,
                  _ fingerprint: @autoclosure () -> [UInt8], frames: [[UInt8]], envelope: [[UInt8]], _ call: Call) throws(ProtocolError) -> Bool {
        var job: PendingJob {
            var job = PendingJob(kind: .canvas(method), request: request, envelope: envelope, client: call.client,
                                 holding: (session, fingerprint()))
            job.frames = frames
            job.retaking = call.retaking
            return job
        }
        // The methods here are those `mayStartJob` lets through.
        switch method {
        case _ where method.scope == .documentRead || method.scope == .documentWrite:
            let writes = method.scope == .documentWrite
            try startDocumentJob(method, params, request, envelope: envelope, client: call.client, now: call.now,
                                 holding: (session, fingerprint()), frames: frames,
                                 madeBy: writes ? madeBy(session, request, fingerprint()) : nil,
                                 fence: writes ? saveFence(session, request, fingerprint()) : nil)
        case .canvasOpen:
            guard let documents, let target = try? documents.targetParams(params) else { return false }
            // Only a canvas opened from closed takes the page's ink; otherwise the page alone
            // is checked, as for any open.
            if (try? params.bool("reopen", default: false)) == true, session.canvas.phase == .closed {
                try jobs.read(for: job) { .pageInk(Result { () throws(DocumentError) in try documents.store.pageInk(target.name, target.page) }) }
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
        default:
            return false
        }
        return true
    }

    /// What a session's save leaves in the document's history so that the same request, run
    /// again on another instance, finds the revision it made instead of saving twice: with
    /// several instances, the one that saved can die, or lose the session to another, before
    /// the session records the save; the retry then runs on the session as last stored. One
    /// instance alone loses its sessions with it, so it leaves nothing. The key stands for the
    /// session, the request's id and the request itself (ids are the client's, and a reused id
    /// on another request must not find this save), and the version of the session the save
    /// was made from (fenced: the store confirmed it), so that a retry run on the session as it
    /// was finds the save, and one run on a session changed since does not.
    func madeBy(_ session: ServiceSession, _ request: Request, _ fingerprint: [UInt8]) -> String? {
        guard shared != nil else { return nil }
        let bytes = Array(session.id.utf8) + [0] + JSONCodec.serialize(request.id.json) + [0] + fingerprint + [0]
            + Array(String(session.storedVersion).utf8)
        return String(DocumentStore.sha256(bytes).prefix(32))
    }

    /// What running a session's request came to: its reply (a result or an error), a save the
    /// canvas waits for, or a result image to render before what the canvas did is reported.
    enum Ran {
        case reply([UInt8])
        case saving(Drawing)
        case rendering(UnreportedResult)
    }

    /// Runs a session's request.
    func execute(_ method: Method, _ request: Request, _ params: Params, _ session: inout ServiceSession,
                 found: JobOutcome?, _ call: inout Call) -> Ran {
        do throws(ProtocolError) {
            let result = try canvas.run(method, params, &session, found: found, &call)
            switch result {
            case .saving(let drawing): return .saving(drawing)
            case .rendering(let unreported): return .rendering(unreported)
            case .object, .raw: return .reply(result.reply(id: request.id))
            }
        } catch {
            return .reply(ReplyEncoder.failure(id: request.id, error: error))
        }
    }

    /// A due timer: its transition finishes now, or after what holds the session.
    func fire(_ ticket: TransitionTicket, on id: String, _ call: inout Call) {
        guard var session = table.arrive(id, .timer(ticket)) else { return }
        // A transition a client already finished leaves a stale timer: nothing to do.
        let mark = call.output.events.count
        if let actions = try? session.canvas.finishTransition(ticket) {
            canvas.executor.run(actions, &session, imageData: false, &call)
            if shared != nil {
                persistTransition(session, eventsFrom: mark, &call)
                return
            }
        }
        resume(session, &call)
    }

    /// Publishes `event` and ends the session here, answering what queued behind it (it is gone
    /// for those).
    func close(_ session: ServiceSession, event: String, _ call: inout Call) {
        var session = session
        canvas.executor.publish(&session, event, [:], &call)
        let queued = table.queued(session.id)
        table.remove(session.id)
        timers.cancel(session: session.id)
        logger.info("\(event)", metadata: ["session": "\(session.id)"])
        replay(queued, on: session.id, &call)
    }

    /// Answers every finished job and store step, then runs what queued behind a session it held
    /// (which may start another job, and make the rest wait again).
    func finishJobs(_ call: inout Call) {
        while case let finished = jobs.finished(), !finished.isEmpty {
            for (job, outcome) in finished {
                memory.release(job.reservedBytes)
                call.client = job.client
                call.connection = job.envelope.first
                if case .store(let step) = job.kind, case .stored(let answer) = outcome {
                    settle(step, answer, job, &call)
                    continue
                }
                let request = job.request!
                guard case (var session, let fingerprint)? = job.holding else {
                    call.reply(documentReply(job, request, outcome, &call), to: job.envelope)
                    continue
                }
                let mark = call.output.events.count
                let method = Method(named: request.method)!
                if case .saved(.failure(.fenced(_, let reason, let message)), _) = outcome {
                    // The save's own fence (under the document's lock, or at its commit) stopped
                    // it: settled as the fence before the save would have been, so the session
                    // is taken back from the store (moved) or the client told to retry (store
                    // not answering), and the refusal is never remembered as the request's answer.
                    let step: StoreStep
                    if case .documentWrite = job.kind { step = .fence(.request(method)) } else { step = .fence(.save(.empty)) }
                    let answer: StoreAnswer = reason == "sessionMoved" ? .lost
                        : .failed(ProtocolError(.unavailable, message, data: ["reason": "sessionStore"]))
                    settle(step, answer, job, &call)
                    continue
                }
                switch (job.kind, outcome) {
                case (.canvas, .reply(let bytes)):
                    // An encoding of what the session holds: nothing changed, but with a session
                    // store the copy it was read from is confirmed first, as every read's is.
                    call.retaking = job.retaking
                    finish(bytes, method, request, session, fingerprint: fingerprint, frames: job.frames, envelope: job.envelope,
                           eventsFrom: mark, &call)
                case (.canvas, _):
                    call.retaking = job.retaking
                    switch execute(method, request, Params(request.params), &session, found: outcome, &call) {
                    case .saving(let drawing):
                        save(drawing, request, Params(request.params), session, fingerprint: fingerprint, frames: job.frames,
                             envelope: job.envelope, &call)
                    case .rendering:
                        preconditionFailure("a method run with its job's outcome has its image")
                    case .reply(let reply):
                        finish(reply, method, request, session, fingerprint: fingerprint, frames: job.frames, envelope: job.envelope,
                               eventsFrom: mark, &call)
                    }
                case (.rendering(let unreported), .image(let image)):
                    call.retaking = job.retaking
                    let reply = canvas.report(unreported, image: .rendered(image), &session, &call).reply(id: request.id)
                    finish(reply, method, request, session, fingerprint: fingerprint, frames: job.frames, envelope: job.envelope,
                           eventsFrom: mark, &call)
                default:
                    call.retaking = job.retaking
                    finish(documentReply(job, request, outcome, &call), method, request, session, fingerprint: fingerprint,
                           frames: job.frames, envelope: job.envelope, eventsFrom: mark, &call)
                }
                call.retaking = false
            }
        }
    }
}
