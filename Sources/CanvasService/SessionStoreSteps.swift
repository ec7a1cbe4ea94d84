import CanvasCore
import CanvasProtocol
import Dispatch
import DocumentStore
import Synchronization

/// With a session store, what a session waits on there (`StoreStep`) and how each answer is
/// settled. Each step holds its session and runs on its lane's thread; its reply, and the
/// events its request made, go out only once the store has answered. A copy of a session that
/// the store says is stale is dropped, and its request answered once more on the session as
/// stored, where the store's record of answered requests answers it if another instance did:
/// a request is never run a second time on a stale copy.
extension Dispatcher {
    /// How long a save waits, with its document's lock held, for the store to confirm its
    /// session (`saveFence`): four times the store's timeout.
    static let saveFenceWait = DispatchTimeInterval.seconds(2)

    /// The lane a session's store steps go through: always the same one for an id.
    func lane(for id: String) -> StoreLane {
        var hash: UInt32 = 2_166_136_261   // FNV-1a: stable, unlike Hasher, which is seeded per process
        for byte in id.utf8 { hash = (hash ^ UInt32(byte)) &* 16_777_619 }
        return lanes[Int(hash % UInt32(lanes.count))]
    }

    /// Starts a store step for a request (or a session's own step, with no request), on the
    /// session's lane; `work` gets that lane's store.
    func startStore(_ step: StoreStep, session id: String, for request: Request?, envelope: [[UInt8]] = [], client: String?,
                    frames: [[UInt8]] = [], retaking: Bool = false, holding: (session: ServiceSession, fingerprint: [UInt8])?,
                    events: [[[UInt8]]] = [], _ storeCall: StoreCall) {
        var job = PendingJob(kind: .store(step), request: request, envelope: envelope, client: client, holding: holding)
        job.frames = frames
        job.retaking = retaking
        job.events = events
        jobs.store(for: job, on: lane(for: id), storeCall)
    }

    /// A new session, held until the store has it at version 1; then `reply` (its id) goes.
    func create(_ session: ServiceSession, reply: [UInt8], for request: Request, envelope: [[UInt8]], _ call: inout Call) {
        startStore(.create(reply: reply), session: session.id, for: request, envelope: envelope, client: call.client,
                   holding: (session, []), .create(session))
    }

    /// Takes a session this instance does not hold over from the store, for `request`: held (with
    /// no session yet) until the store answers, then the request runs on it. The store is asked
    /// with the request, so one it has on record as answered (by any instance, however long
    /// ago) is answered from there and not run again.
    func takeOver(_ request: Request, frames: [[UInt8]], envelope: [[UInt8]], _ call: inout Call) {
        let id = request.session!
        table.insertTakingOver(id, owner: call.client, connection: call.connection)
        let asking = SharedSessions.Answered(id: request.id, fingerprint: ReplyCache.fingerprint(request))
        let owner = call.client, connection = call.connection, now = call.now
        startStore(.takeOver, session: id, for: request, envelope: envelope, client: call.client, frames: frames,
                   retaking: call.retaking, holding: nil, .takeOver(id, owner: owner, connection: connection, now: now, asking: asking))
    }

    /// Before a save: the store must confirm that this copy is the session as stored, and that
    /// the request is not answered already. A copy some other instance moved on from would
    /// otherwise save what the client has since changed (and a retry of the request, run on the
    /// session as stored, find that save its own).
    func fence(_ fenced: Fenced, _ request: Request, _ session: ServiceSession, fingerprint: [UInt8], frames: [[UInt8]],
               envelope: [[UInt8]], _ call: inout Call) {
        let id = session.id, expected = session.storedVersion
        let answered = SharedSessions.Answered(id: request.id, fingerprint: fingerprint)
        startStore(.fence(fenced), session: id, for: request, envelope: envelope, client: call.client, frames: frames,
                   retaking: call.retaking, holding: (session, fingerprint), .confirm(id, expected: expected, unanswered: answered))
    }

    /// What a session's save checks under the document's lock, before it writes and again just
    /// before it commits: that the store still has this instance holding the session at the
    /// version the save was made from, and the request unanswered. The fence before the save
    /// (`fence`) cannot see a pause between it and the lock, nor one while the save writes;
    /// this can. (A pause between its answer and the commit's one system call, it cannot.)
    /// Asked on the session's lane, in order with its other calls; the save's thread waits, with
    /// the document's lock held, for `saveFenceWait` at most: each call on the lane is bounded
    /// by the store's timeout, but a queue of them is not, and the lock must not be held for
    /// as long as a queue takes. Past it the save is refused as the store not answering, which
    /// the client retries like any other.
    func saveFence(_ session: ServiceSession, _ request: Request, _ fingerprint: [UInt8]) -> DocumentStore.WriteFence? {
        guard !lanes.isEmpty else { return nil }
        let id = session.id, expected = session.storedVersion, lane = lane(for: id), shared = lane.shared
        let answered = SharedSessions.Answered(id: request.id, fingerprint: fingerprint)
        return { (name: String) throws(DocumentError) in
            // nil: confirmed; else why not (moved, or the store not answering: told apart, as
            // the client is to retry the second and be answered on the session as stored after
            // the first).
            let refusal = Mutex<(reason: String, message: String)?>(nil)
            let asked = DispatchSemaphore(value: 0)
            let ask: @Sendable () -> Void = {
                do throws(ProtocolError) {
                    if try !shared.confirm(id, expected: expected, unanswered: answered) {
                        refusal.withLock {
                            $0 = ("sessionMoved", "the session \(id) this save was for moved to another instance before the save was made")
                        }
                    }
                } catch {
                    refusal.withLock { $0 = ("sessionStore", "the session store could not confirm session \(id) for this save: \(error.message)") }
                }
                asked.signal()
            }
            lane(ask)
            guard asked.wait(timeout: .now() + Self.saveFenceWait) == .success else {
                throw .fenced(name: name, reason: "sessionStore",
                              message: "the session store did not confirm session \(id) for this save within 2 s")
            }
            if let (reason, message) = refusal.withLock({ $0 }) { throw .fenced(name: name, reason: reason, message: message) }
        }
    }

    /// After a request ran (its reply remembered): the store writes the change, confirms a
    /// read's copy, or removes a closed session, before the reply and the request's events go.
    func conclude(_ method: Method, _ request: Request, _ reply: [UInt8], _ session: ServiceSession, fingerprint: [UInt8],
                  frames: [[UInt8]], envelope: [[UInt8]], eventsFrom mark: Int, _ call: inout Call) {
        let id = session.id, expected = session.storedVersion
        let events = call.takeEvents(from: mark)
        let step: StoreStep
        let storeCall: StoreCall
        if method == .sessionClose {
            // Removed only by its holder: a stale copy is taken back first, then closed.
            step = .close(reply: reply)
            storeCall = .remove(id, expected: expected)
        } else if method.changesNothing {
            step = .confirm(reply: reply)
            storeCall = .confirm(id, expected: expected, unanswered: nil)
        } else {
            step = .persist(reply: reply)
            storeCall = .persist(session, answering: (SharedSessions.Answered(id: request.id, fingerprint: fingerprint), reply))
        }
        startStore(step, session: id, for: request, envelope: envelope, client: call.client, frames: frames, retaking: call.retaking,
                   holding: (session, fingerprint), events: events, storeCall)
    }

    /// A timed transition that finished: written before its events go.
    func persistTransition(_ session: ServiceSession, eventsFrom mark: Int, _ call: inout Call) {
        startStore(.persist(reply: nil), session: session.id, for: nil, client: nil, holding: (session, []),
                   events: call.takeEvents(from: mark), .persist(session, answering: nil))
    }

    /// An idle session: removed from the store by its holder, then expired here.
    func expire(_ session: ServiceSession) {
        let id = session.id, expected = session.storedVersion
        startStore(.expire, session: id, for: nil, client: nil, holding: (session, []), .remove(id, expected: expected))
    }

    // MARK: Answers

    /// Carries out what the store's answer to a step calls for (`StoreStep.settle`), then
    /// replays what queued behind the session if the session (or the place kept for it) went.
    func settle(_ step: StoreStep, _ answer: StoreAnswer, _ job: PendingJob, _ call: inout Call) {
        call.retaking = job.retaking
        defer { call.retaking = false }
        let id = job.holding?.session.id ?? job.request?.session ?? ""
        var session = job.holding?.session
        var queued: [QueuedWork] = []
        for action in step.settle(answer, retaking: job.retaking) {
            switch action {
            case .keep(let version):
                session?.storedVersion = version
                session?.storedAt = call.now
                if case .kept(_, let stored?) = answer { session?.stored = stored }
            case .publish:
                call.output.events += job.events
            case .reply:
                switch step {
                case .create(let reply), .confirm(let reply), .close(let reply), .persist(let reply?):
                    call.reply(reply, to: job.envelope)
                default:
                    break
                }
            case .refuse(let refusal):
                guard let request = job.request else { break }
                let error: ProtocolError
                switch refusal {
                case .moved: error = Self.moved(id)
                case .unknownSession: error = Self.unknownSession(id)
                case .noFreeID: error = ProtocolError(.unavailable, "no free session id; try again", data: ["reason": "sessionStore"])
                case .store(let failure): error = failure
                }
                call.reply(ReplyEncoder.failure(id: request.id, error: error), to: job.envelope)
            case .goOn(.request(let method)):
                let request = job.request!
                if let reply = proceed(method, request, Params(request.params), session.take()!, fingerprint: job.holding?.fingerprint,
                                       frames: job.frames, envelope: job.envelope, &call) {
                    call.reply(reply, to: job.envelope)
                }
            case .goOn(.save(let drawing)):
                let request = job.request!
                startSave(drawing, request, Params(request.params), session.take()!, fingerprint: job.holding?.fingerprint ?? [],
                          frames: job.frames, envelope: job.envelope, &call)
            case .close(let event):
                close(session.take()!, event: event, &call)
            case .resume:
                resume(session.take()!, &call)
            case .drop:
                queued = table.queued(id)
                drop(id, &call)
            case .forget:
                queued = table.queued(id)
                table.remove(id)
            case .retake:
                retake(job, &call)
            case .adopt:
                guard case .tookOver(let taken, let answered) = answer else { preconditionFailure("adopted what was not taken over") }
                queued = adopt(taken, answering: job, recorded: answered, &call)
            }
        }
        if !queued.isEmpty { replay(queued, on: id, &call) }
    }

    /// Puts a session taken over into the table (with the timer of a transition under way) and
    /// answers the request it was taken over for. Returns what queued meanwhile.
    private func adopt(_ session: ServiceSession, answering job: PendingJob, recorded: ReplyCache.Lookup?,
                       _ call: inout Call) -> [QueuedWork] {
        let request = job.request!
        table.adopt(session)
        startTimers(session, &call)
        let queued = table.release(session)
        let fingerprint = ReplyCache.fingerprint(request)
        var reply: [UInt8]?
        if let recorded, case .miss = session.replies.lookup(request.id, request: fingerprint) {
            // Answered by another instance, and gone from the reply cache since: the record's.
            do throws(ProtocolError) {
                reply = try self.recorded(recorded, request)
            } catch {
                reply = ReplyEncoder.failure(id: request.id, error: error)
            }
        } else {
            reply = answer(request, Method(named: request.method), frames: job.frames, envelope: job.envelope, &call)
        }
        if let reply { call.reply(reply, to: job.envelope) }
        return queued
    }

    /// A request whose copy of the session turned out stale: answered once more on the session
    /// as the store has it (taken over); a second loss in a row is the client's to retry.
    private func retake(_ job: PendingJob, _ call: inout Call) {
        guard let request = job.request, let id = request.session else { return }
        guard !job.retaking else {
            call.reply(ReplyEncoder.failure(id: request.id, error: Self.moved(id)), to: job.envelope)
            return
        }
        call.retaking = true
        takeOver(request, frames: job.frames, envelope: job.envelope, &call)
    }

    static func moved(_ id: String) -> ProtocolError {
        ProtocolError(.unavailable, "session \"\(id)\" moved to another instance while this request ran; try again",
                      data: ["reason": "sessionMoved", "session": .string(id)])
    }

    /// Drops a local copy the store did not keep: out of the table, its timers gone.
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
}
