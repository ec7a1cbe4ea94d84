import CanvasCore
import CanvasProtocol
import SessionStore

/// The executor of a session's requests: it feeds each request's machine (`RequestFlow`) what
/// happened and carries out the actions it returns, one direction, each step once. A request
/// runs on the loop until it waits for a job or the session's persistence; then it is parked,
/// with its session, in the session's slot, and driven on from there when the answer comes
/// (`finishJobs`). Every path that gives a session back goes through `resume`, which replays
/// what queued behind it.
extension Dispatcher {
    /// Runs a request on the session its slot handed over.
    func serve(_ request: consuming InFlightRequest, _ method: Method, on session: consuming ServiceSession, _ call: inout Call) {
        session.lastActive = call.now
        let lookup = session.replies.lookup(request.id, request: request.digest())
        // Moved on, never copied: a second owner of the session's buffers would make the
        // request copy them whole to change them.
        drive(consume request, method, consume session, .arrived(lookup), &call)
    }

    /// Feeds `event` to the request's machine and carries out its actions, feeding back what
    /// they give, until the request is answered or waits (then parked in its session's slot).
    func drive(_ request: consuming InFlightRequest, _ method: Method, _ session: consuming ServiceSession?, _ event: RequestEvent,
               _ call: inout Call) {
        let id = session?.id ?? request.request.session ?? ""
        // The events this request makes from here on are its own, held until its change is kept.
        let mark = call.output.events.count
        var queued: [QueuedWork] = []
        var next: RequestEvent? = event
        while let event = next.take() {
            let facts = RequestFlow.Facts(method: method, id: request.id, session: id, replyLimit: limits.maxCachedReplyBytes,
                                          keptAtOnce: persistence.keepsAtOnce, confirmedNow: session?.storedAt == call.now,
                                          retaking: request.retaking)
            let step = RequestFlow.next(request.state, event, facts)
            request.state = step.state
            // By index: each action is lent to `perform`, not copied out of the array.
            for index in step.actions.indices {
                perform(step.actions[index], id, &request, &session, eventsFrom: mark, &queued, &call)
            }
            if let then = step.then { next = follow(then, method, id, &request, &session, &call) }
        }
        switch request.state {
        case .working, .fencing, .saving, .rendering, .persisting, .takingOver:
            table.park(id, session.take(), request)
        case .ready, .answered, .dropped:
            break
        }
        if !queued.isEmpty { replay(queued, on: id, &call) }
    }

    /// Carries out one action of a step; none gives the machine an event.
    private func perform(_ action: RequestAction, _ id: String, _ request: inout InFlightRequest,
                         _ session: inout ServiceSession?, eventsFrom mark: Int, _ queued: inout [QueuedWork], _ call: inout Call) {
        switch action {
        case .remember(let reply):
            session?.remember(reply, for: request.id, digest: request.digest())
        case .announce:
            announceSaves(&call)
        case .holdEvents:
            request.events += call.takeEvents(from: mark)
        case .keep(let version, let stored):
            keep(&session, version: version, stored: stored, call)
        case .publish:
            call.output.events += request.events
            request.events = []
        case .reply(let reply):
            if !call.sendAtOnce(reply, to: request.envelope) { call.reply(reply, to: request.envelope) }
        case .refuse(let error):
            // The session's own work has nobody to tell: the server's log does.
            guard request.own == nil else {
                logger.error("a session's own work refused", metadata: ["session": "\(id)", "error": "\(error)"])
                return
            }
            call.reply(ReplyEncoder.failure(id: request.id, error: error), to: request.envelope)
        case .resume:
            if let held = session.take() { resume(held, &call) }
        case .close(let event):
            if let held = session.take() { close(held, event: event, &call) }
        case .drop:
            queued += table.queued(id)
            drop(id, &call)
            session = nil
        case .retake:
            request.retaking = true
            table.insertTakingOver(id, owner: request.client, connection: request.connection)
        case .keepPlace:
            table.insertTakingOver(id, owner: request.client, connection: request.connection)
        case .insert:
            if let session { table.insertHeld(session) }
        case .forget:
            queued += table.queued(id)
            table.remove(id)
        }
    }

    /// Carries out a step's follow-up; returns the event it gives the machine (nil: the
    /// answer comes later, from a job or the session's keeper, or there is no session to run on).
    private func follow(_ then: FollowUp, _ method: Method, _ id: String, _ request: inout InFlightRequest,
                        _ session: inout ServiceSession?, _ call: inout Call) -> RequestEvent? {
        switch then {
        case .finishTransition(let ticket):
            guard var held = session.take() else { return nil }
            defer { session = held }
            // A transition a client already finished leaves a stale timer: nothing to do.
            guard let actions = try? held.run(.finishTransition(ticket)) else { return .ran(.transition(finished: false)) }
            canvas.executor.run(actions, &held, imageData: false, &call)
            return .ran(.transition(finished: true))
        case .startJob:
            guard let held = session.take() else { return nil }
            defer { session = held }
            do throws(ProtocolError) {
                return .job(try startJob(method, &request, held, call) ? .started : .notNeeded)
            } catch {
                return .job(.refused(error))
            }
        case .run, .runWith:
            var found: JobOutcome?
            if case .runWith(let outcome) = then { found = outcome }
            guard var held = session.take() else { return nil }
            let ran = execute(method, request.request, &held, found: found, &call)
            session = held
            return .ran(ran)
        case .report(let unreported, let image):
            guard var held = session.take() else { return nil }
            let reply = canvas.report(unreported, image: image, &held, &call).reply(id: request.id)
            session = held
            return .ran(.reply(reply))
        case .documentReply(let outcome):
            return .ran(.reply(documentReply(request, outcome, &call)))
        case .render(let unreported):
            guard let held = session else { return nil }
            return render(unreported, &request, held, call)
        case .save(let drawing):
            guard var held = session.take() else { return nil }
            let refused = startSave(drawing, &request, &held, call)
            session = held
            return refused.map { .ran(.reply(ReplyEncoder.failure(id: request.id, error: $0))) }
        case .ask(let step):
            if let answer = persistence.localAnswer(step, session) { return .stored(answer) }
            let job = PendingJob(owner: .session(id), client: request.client)
            // The session's own work is asked for nobody: no request is recorded as answered.
            let asker = request.own == nil ? (answered: request.answered(), client: request.client, connection: request.connection) : nil
            return persistence.ask(step, session: id, session, for: asker, now: call.now, job: job, &jobs).map { .stored($0) }
        case .adopt(let taken, let recorded):
            table.adopt(taken)
            startTimers(taken, &call)
            let lookup = taken.replies.lookup(request.id, request: request.digest())
            // The copy this instance held before another took the session: let go of after the
            // replies are out, not before this request runs (freeing a large session's history
            // was a tenth of a take-over's time).
            if let stale = session.take() { call.output.released.append(stale) }
            session = taken
            // Answered by another instance and gone from the reply cache since: the record's.
            if case .miss = lookup, let recorded { return .arrived(recorded) }
            return .arrived(lookup)
        }
    }

    private func keep(_ session: inout ServiceSession?, version: UInt64, stored: StoredSnapshot?, _ call: Call) {
        // Written only when it changes: a local keeper keeps every step at the same version.
        guard var held = session.take() else { return }
        if held.storedVersion != version { held.storedVersion = version }
        if held.storedAt != call.now { held.storedAt = call.now }
        if let stored {
            // Written: the journal's operations are in the store now.
            held.stored = stored
            held.startJournal()
        }
        session = held
    }

    /// Gives a session back and replays what queued behind it, in order.
    func resume(_ session: consuming ServiceSession, _ call: inout Call) {
        let id = session.id
        let queued = table.release(session)
        if !queued.isEmpty { replay(queued, on: id, &call) }
    }

    func replay(_ queued: [QueuedWork], on id: String, _ call: inout Call) {
        for (index, work) in queued.enumerated() {
            // Held again by the one before: the rest wait their turn as they are, not read,
            // decoded and counted once more per request ahead of them.
            if index > 0, table.requeue(id, queued[index...]) { return }
            switch work {
            case .request(let request):
                answer(request, &call)
            case .timer(let ticket):
                fire(ticket, on: id, &call)
            }
        }
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

    /// Drops a local copy its persistence did not keep: out of the table, its timers gone.
    private func drop(_ id: String, _ call: inout Call) {
        table.remove(id)
        timers.cancel(session: id)
        call.timers.removeAll { $0.session == id }
    }

    /// The timer of a timed transition that was under way in a session taken over (started
    /// again: the old instance's clock is gone).
    private func startTimers(_ session: ServiceSession, _ call: inout Call) {
        if let ticket = session.canvas.canvas.pendingTransition, case .timed(let milliseconds) = session.transitions {
            call.timers.append(TransitionTimer(deadline: call.now + .milliseconds(milliseconds), session: session.id, ticket: ticket))
        }
    }

    /// A due timer: its transition finishes now, or after what holds the session, as the
    /// session's own work through the same machine as a request.
    func fire(_ ticket: TransitionTicket, on id: String, _ call: inout Call) {
        guard let session = table.arrive(id, .timer(ticket)) else { return }
        drive(InFlightRequest(own: .timer(ticket), session: id, as: .canvasFinishTransition), .canvasFinishTransition, session,
              .due(.timer(ticket)), &call)
    }

    /// Answers every finished job, driving on what each worked for.
    func finishJobs(_ call: inout Call) {
        while case let finished = jobs.finished(), !finished.isEmpty {
            for (job, outcome) in finished {
                memory.release(job.reservedBytes)
                switch job.owner {
                case .request(let request):
                    call.reply(documentReply(request, outcome, &call), to: request.envelope)
                case .session(let id):
                    guard let (session, request) = table.unpark(id), let method = request.method else { continue }
                    var event = RequestEvent.finished(outcome)
                    if case .stored(let answer) = outcome { event = .stored(answer) }
                    drive(consume request, method, consume session, event, &call)
                }
            }
        }
    }
}
