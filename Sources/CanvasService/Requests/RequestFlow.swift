import CanvasCore
import CanvasProtocol
import DocumentStore
import SessionStore

/// Where a session's request is between being decoded and being answered. The table of these
/// states is `protocol/request-states.md`.
enum RequestState {
    /// Its session is handed over; nothing has run yet (or a fence let it go on).
    case ready
    /// A job off the loop works for it before it runs: the page a `canvas.open` names, a
    /// document method sent with the session, a large drawing's encoding.
    case working
    /// The session's persistence confirms this copy before a save starts.
    case fencing(Fenced)
    /// The save its canvas asked for runs.
    case saving
    /// Its result image renders beside the loop; the canvas has run already.
    indirect case rendering(UnreportedResult)
    /// Its reply is in and remembered; the session's persistence keeps the change (or confirms
    /// the copy a read read, or removes a closed session) before the reply and its events go.
    case persisting(StoreStep)
    /// No copy of its session is here: one is being taken over from the session store.
    case takingOver
    /// Its reply went (or it was refused); its session is given back or closed.
    case answered
    /// Its copy of the session went (stale, or holding a change not kept), and it was refused.
    case dropped
}

/// Work a session does of its own, with no client's request: the same machine runs it, and the
/// same executor carries it out, answering nobody.
enum OwnWork: Equatable {
    /// A timed transition's time came: it finishes, and the change is kept before its events go.
    case timer(TransitionTicket)
    /// Idle past the idle timeout: the session expires, removed from its keeper.
    case expiry
}

/// What happens to a request: what its holder found or what it ran, fed to `RequestFlow.next`.
enum RequestEvent {
    /// The session's own work came to it, the session handed over.
    case due(OwnWork)
    /// Its session was handed over, and the session's reply cache says whether it was answered.
    case arrived(ReplyCache.Lookup)
    /// A `session.open` made its session; `reply` goes once the session's keeper has it.
    case created(reply: [UInt8])
    /// No copy of its session is here (a place is kept for one): the keeper may have it.
    case notHeld
    /// Asked to start a job first (`FollowUp.startJob`): started, not needed, or refused.
    case job(JobStart)
    /// The method ran on the session.
    case ran(Ran)
    /// Its job off the loop finished.
    indirect case finished(JobOutcome)
    /// Its result image is not rendered (the runner is full, the owner at its bound): why.
    case imageOmitted(String)
    /// The session's persistence answered its step.
    indirect case stored(StoreAnswer)

    enum JobStart {
        case started
        case notNeeded
        indirect case refused(ProtocolError)
    }
}

/// What running a session's request came to: its reply (a result or an error), a save the
/// canvas waits for, or a result image to render before what the canvas did is reported.
enum Ran {
    case reply([UInt8])
    /// A timer's transition: finished, or stale (a client finished it first) and nothing done.
    case transition(finished: Bool)
    indirect case saving(Drawing)
    indirect case rendering(UnreportedResult)
}

/// What the executor does after a step's actions, at most one a step: each gives the machine
/// its next event. (Large payloads are indirect: every request's steps pass through the loop,
/// most with none of them.)
enum FollowUp {
    /// → `.ran(.transition)`: finish the timed transition, if it is still the one under way.
    case finishTransition(TransitionTicket)
    /// → `.job`: start the job the method needs first, if it needs one.
    case startJob
    /// → `.ran`: run the method on the session.
    case run
    /// → `.ran`: run the method on the session again, with what its job found.
    indirect case runWith(found: JobOutcome)
    /// → `.ran`: the reply of a document method from its job's outcome.
    indirect case documentReply(JobOutcome)
    /// → `.ran`: report what the canvas did, with its image or without.
    indirect case report(UnreportedResult, ResultImage)
    /// → `.finished` or `.imageOmitted`: render the result's image beside the loop.
    indirect case render(UnreportedResult)
    /// → `.finished`, or `.ran` with the refusal: start the save the canvas asked for.
    indirect case save(Drawing)
    /// → `.stored`, at once or later: the step asked of the session's persistence.
    case ask(StoreStep)
    /// → `.arrived`: put the session taken over into the table and hand it to the request, with
    /// what the store recorded for it (answered by another instance, or not).
    indirect case adopt(ServiceSession, recorded: ReplyCache.Lookup?)
}

/// What the executor does for a request (`SessionRequests.perform`), in order, before the
/// step's follow-up: none gives the machine an event.
enum RequestAction {
    /// Keep the reply in the session's reply cache, for retries: the one place it is written.
    case remember([UInt8])
    /// The saves the request made (a submit's, a document write's) go out on the documents
    /// feed, now that its reply is remembered (a retry finds it made and saves nothing twice).
    case announce
    /// The events the request made are held back until its change is kept (`publish`).
    case holdEvents
    /// The copy is the session as stored, at this version (`stored`: the snapshot, when the
    /// step wrote it).
    indirect case keep(version: UInt64, stored: StoredSnapshot?)
    /// The events the request made go out.
    case publish
    case reply([UInt8])
    indirect case refuse(ProtocolError)
    /// Give the session back.
    case resume
    /// End the session here, with this event.
    case close(event: String)
    /// The local copy goes.
    case drop
    /// The request is to be answered once more, on the session as the store has it: a place is
    /// kept for the session while it is taken over.
    case retake
    /// A place is kept in the table for a session this instance does not hold, while it is
    /// taken over (what comes for it meanwhile waits there).
    case keepPlace
    /// The session a `session.open` made goes into the table, held by its request.
    case insert
    /// Nothing was taken over: the place kept for it goes.
    case forget
}

/// A session request's life as a machine: given its state and what happened, the next state
/// and what to do. Pure: it runs nothing, so its every path is tested without sockets, a store
/// or a canvas (`RequestFlowTests`). The store's answers are read by `StoreStep.settle`.
enum RequestFlow {
    /// What the machine needs to know of the request besides its state.
    struct Facts {
        let method: Method
        let id: RequestID
        let session: String
        /// The largest reply a session's reply cache keeps.
        let replyLimit: Int
        /// Whether the session's keeper keeps every step the moment it is asked (local): a
        /// reply then goes as soon as it is in, and no copy needs a fence.
        let keptAtOnce: Bool
        /// Whether the session's copy was confirmed by a shared keeper during this very turn:
        /// a fence would ask again for nothing.
        let confirmedNow: Bool
        /// Whether the request is being answered a second time, after a stale copy was dropped.
        let retaking: Bool
    }

    /// What the machine says to do on one event: the state it moves to, what to do, in order,
    /// and then at most one follow-up, whose outcome is the next event. One by type: a list
    /// of effects cannot hold a second event for the executor to choose between.
    struct Step {
        let state: RequestState
        let actions: [RequestAction]
        let then: FollowUp?

        init(_ state: RequestState, _ actions: [RequestAction], then: FollowUp? = nil) {
            self.state = state
            self.actions = actions
            self.then = then
        }
    }

    /// The one entry: each event has its own method below, and each of those names every state
    /// it is not for, so a new state or event is a compile error until it is given its path.
    static func next(_ state: RequestState, _ event: RequestEvent, _ facts: Facts) -> Step {
        switch event {
        case .due(let work): return due(work, in: state, facts)
        case .arrived(let lookup): return arrived(lookup, in: state, facts)
        case .created(let reply): return created(reply, in: state, facts)
        case .notHeld: return notHeld(in: state, facts)
        case .job(let start): return job(start, in: state, facts)
        case .ran(let ran): return afterRunning(ran, facts)
        case .finished(let outcome): return finished(outcome, in: state, facts)
        case .imageOmitted(let reason): return imageOmitted(reason, in: state, facts)
        case .stored(let answer): return stored(answer, in: state, facts)
        }
    }

    /// The session's own work: a timer's transition to finish, or its expiry to keep.
    private static func due(_ work: OwnWork, in state: RequestState, _ facts: Facts) -> Step {
        switch state {
        case .ready: break
        case .working, .fencing, .saving, .rendering, .persisting, .takingOver, .answered, .dropped: return unexpected(state, facts)
        }
        switch work {
        case .timer(let ticket): return Step(.ready, [], then: .finishTransition(ticket))
        case .expiry: return Step(.persisting(.expire), [], then: .ask(.expire))
        }
    }

    /// Its session was handed over: answered already, or its turn to run.
    private static func arrived(_ lookup: ReplyCache.Lookup, in state: RequestState, _ facts: Facts) -> Step {
        switch state {
        case .ready: break
        case .working, .fencing, .saving, .rendering, .persisting, .takingOver, .answered, .dropped: return unexpected(state, facts)
        }
        let method = facts.method
        switch lookup {
        case .retry(let reply):
            // A reply already given stays true wherever the session is now.
            return Step(.answered, [.reply(reply), .resume])
        case .notKept where !method.changesNothing:
            return Step(.answered, [.refuse(notKept(facts)), .resume])
        case .reused:
            // Well-formed, but it clashes with what the session already holds under that id.
            return Step(.answered, [.refuse(ProtocolError(.conflict, "id \(facts.id) was already used for a different request in this session",
                                                      data: ["id": facts.id.json])), .resume])
        case .miss, .notKept:
            // A read answered again is the same answer.
            if method.traits.needsFence && !facts.keptAtOnce && !facts.confirmedNow {
                return Step(.fencing(.request(method)), [], then: .ask(.fence(.request(method))))
            }
            return Step(.ready, [], then: goOn(method))
        }
    }

    /// A `session.open` made its session: kept by the keeper before its reply goes.
    private static func created(_ reply: [UInt8], in state: RequestState, _ facts: Facts) -> Step {
        switch state {
        case .ready: return Step(.persisting(.create(reply: reply)), [.insert], then: .ask(.create(reply: reply)))
        case .working, .fencing, .saving, .rendering, .persisting, .takingOver, .answered, .dropped: return unexpected(state, facts)
        }
    }

    /// No copy of its session is here: the keeper may have one to take over.
    private static func notHeld(in state: RequestState, _ facts: Facts) -> Step {
        switch state {
        case .ready: return Step(.takingOver, [.keepPlace], then: .ask(.takeOver))
        case .working, .fencing, .saving, .rendering, .persisting, .takingOver, .answered, .dropped: return unexpected(state, facts)
        }
    }

    /// The job it may need first: started, not needed, or refused.
    private static func job(_ start: RequestEvent.JobStart, in state: RequestState, _ facts: Facts) -> Step {
        switch state {
        case .ready: break
        case .working, .fencing, .saving, .rendering, .persisting, .takingOver, .answered, .dropped: return unexpected(state, facts)
        }
        switch start {
        case .started: return Step(.working, [])
        case .notNeeded: return Step(.ready, [], then: .run)
        case .refused(let error): return Step(.answered, [.refuse(error), .resume])
        }
    }

    /// The method ran (in place, again with what a job found, or reported after its image):
    /// whichever state it ran from, what it came to decides alone.
    private static func afterRunning(_ ran: Ran, _ facts: Facts) -> Step {
        let method = facts.method
        switch ran {
        case .reply(let reply):
            // The reply is in: remembered, then kept by the session's keeper before it goes (a
            // local keeper has it already), its events held until then.
            if facts.keptAtOnce {
                return Step(.answered, [.remember(reply), .announce, .reply(reply), method == .sessionClose ? .close(event: "session.closed") : .resume])
            }
            let step: StoreStep = method == .sessionClose ? .close(reply: reply)
                : method.changesNothing ? .confirm(reply: reply) : .persist(reply: reply)
            return Step(.persisting(step), [.remember(reply), .announce, .holdEvents], then: .ask(step))
        case .saving(let drawing):
            if facts.keptAtOnce || facts.confirmedNow { return Step(.saving, [], then: .save(drawing)) }
            return Step(.fencing(.save(drawing)), [], then: .ask(.fence(.save(drawing))))
        case .rendering(let unreported):
            return Step(.rendering(unreported), [], then: .render(unreported))
        case .transition(finished: false):
            return Step(.answered, [.resume])
        case .transition(finished: true):
            // Its events wait for the keeper as a reply's do; a local keeper has the change.
            if facts.keptAtOnce { return Step(.answered, [.resume]) }
            return Step(.persisting(.persist(reply: nil)), [.holdEvents], then: .ask(.persist(reply: nil)))
        }
    }

    /// Its job off the loop finished: a document method's outcome, a save's, a page, an
    /// encoding, or a result image.
    private static func finished(_ outcome: JobOutcome, in state: RequestState, _ facts: Facts) -> Step {
        let method = facts.method
        switch state {
        case .rendering(let unreported):
            guard case .image(let image) = outcome else { return unexpected(state, facts) }
            return Step(.rendering(unreported), [], then: .report(unreported, .rendered(image)))
        case .working:
            if case .saved(.failure(.fenced(_, let reason, let message)), _) = outcome {
                // A document write's own fence (under the document's lock, or at its commit)
                // stopped it: settled as the fence before it would have been.
                return stored(fenceAnswer(reason, message), in: .fencing(.request(method)), facts)
            }
            if case .reply(let reply) = outcome {
                // An encoding of what the session holds, made beside the loop.
                return afterRunning(.reply(reply), facts)
            }
            if method.scope == .documentRead || method.scope == .documentWrite { return Step(.working, [], then: .documentReply(outcome)) }
            // The method runs again with what its job found: the page.
            return Step(.working, [], then: .runWith(found: outcome))
        case .saving:
            if case .saved(.failure(.fenced(_, let reason, let message)), _) = outcome {
                return stored(fenceAnswer(reason, message), in: .fencing(.save(.empty)), facts)
            }
            // The method runs again with the save's outcome.
            return Step(.saving, [], then: .runWith(found: outcome))
        case .ready, .fencing, .persisting, .takingOver, .answered, .dropped:
            return unexpected(state, facts)
        }
    }

    /// Its result image will not be rendered: reported without it.
    private static func imageOmitted(_ reason: String, in state: RequestState, _ facts: Facts) -> Step {
        switch state {
        case .rendering(let unreported): return Step(.rendering(unreported), [], then: .report(unreported, .omitted(reason: reason)))
        case .ready, .working, .fencing, .saving, .persisting, .takingOver, .answered, .dropped: return unexpected(state, facts)
        }
    }

    /// The session's keeper answered the step this state waits on.
    private static func stored(_ answer: StoreAnswer, in state: RequestState, _ facts: Facts) -> Step {
        switch state {
        case .fencing(let fenced): return settled(.fence(fenced), answer, facts)
        case .persisting(let step):
            switch step {
            case .create, .persist, .confirm, .close, .expire: return settled(step, answer, facts)
            // Steps a request waits on in other states.
            case .fence, .takeOver: return unexpected(state, facts)
            }
        case .takingOver: return settled(.takeOver, answer, facts)
        case .ready, .working, .saving, .rendering, .answered, .dropped: return unexpected(state, facts)
        }
    }

    /// Not a path a request takes: refused as the server's fault rather than left holding its
    /// session, or the place kept for it (or trapping the process).
    private static func unexpected(_ state: RequestState, _ facts: Facts) -> Step {
        let fault = ProtocolError(.internal, "request \(facts.method.rawValue) met an event its state does not wait for")
        if case .takingOver = state { return Step(.answered, [.refuse(fault), .forget]) }
        return Step(.answered, [.refuse(fault), .resume])
    }

    /// Past its lookup (and fence): a job first when the method may need one, else run.
    private static func goOn(_ method: Method) -> FollowUp {
        method.traits.mayNeedJob ? .startJob : .run
    }

    /// What the store's answer to a step calls for (`StoreStep.settle`), as the request's actions.
    static func settled(_ step: StoreStep, _ answer: StoreAnswer, _ facts: Facts) -> Step {
        var state = RequestState.answered
        let settled = step.settle(answer, retaking: facts.retaking)
        var actions: [RequestAction] = []
        actions.reserveCapacity(settled.count)
        // `StoreStep.settle` ends in at most one of goOn, retake and adopt: the one follow-up.
        var then: FollowUp?
        for action in settled {
            switch action {
            case .keep(let version): actions.append(.keep(version: version, stored: stored(answer)))
            case .publish: actions.append(.publish)
            case .reply:
                switch step {
                case .create(let reply), .confirm(let reply), .close(let reply), .persist(let reply?): actions.append(.reply(reply))
                case .persist(nil), .takeOver, .fence, .expire: break
                }
            case .refuse(let refusal): actions.append(.refuse(refused(refusal, session: facts.session)))
            case .goOn(.request(let method)):
                state = .ready
                then = goOn(method)
            case .goOn(.save(let drawing)):
                state = .saving
                then = .save(drawing)
            case .close(let event): actions.append(.close(event: event))
            case .resume: actions.append(.resume)
            case .drop:
                state = .dropped
                actions.append(.drop)
            case .retake:
                state = .takingOver
                actions.append(.retake)
                then = .ask(.takeOver)
            case .adopt:
                guard case .tookOver(let session, let recorded) = answer else { continue }
                state = .ready
                then = .adopt(session, recorded: recorded)
            case .forget: actions.append(.forget)
            }
        }
        return Step(state, actions, then: then)
    }

    /// What the store has of the session, when the step wrote it.
    static func stored(_ answer: StoreAnswer) -> StoredSnapshot? {
        if case .kept(_, let stored) = answer { return stored }
        return nil
    }

    /// The answer a save's own fence amounts to: the session moved, or the store not answering.
    private static func fenceAnswer(_ reason: String, _ message: String) -> StoreAnswer {
        reason == "sessionMoved" ? .lost : .failed(ProtocolError(.unavailable, message, data: ["reason": "sessionStore"]))
    }

    static func refused(_ refusal: StoreAction.Refusal, session id: String) -> ProtocolError {
        switch refusal {
        case .moved: return moved(id)
        case .unknownSession: return Dispatcher.unknownSession(id)
        case .noFreeID: return ProtocolError(.unavailable, "no free session id; try again", data: ["reason": "sessionStore"])
        case .store(let failure): return failure
        }
    }

    static func moved(_ id: String) -> ProtocolError {
        ProtocolError(.unavailable, "session \"\(id)\" moved to another instance while this request ran; try again",
                      data: ["reason": "sessionMoved", "session": .string(id)])
    }

    private static func notKept(_ facts: Facts) -> ProtocolError {
        ProtocolError(.unavailable, "id \(facts.id) was answered, but its reply was over \(facts.replyLimit) bytes and not kept; it is not run twice",
                      data: ["reason": "replyNotKept", "limit": .integer(Int64(facts.replyLimit))])
    }
}
