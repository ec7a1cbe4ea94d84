import CanvasCore
import CanvasProtocol
import SessionStore

/// One connection to the session store and the thread that alone uses it. A session's steps
/// all go to one lane (by its id), one at a time since a step holds its session; several lanes
/// let several sessions' steps wait on the store at once.
package struct StoreLane: Sendable {
    let shared: SharedSessions
    /// Where its work runs; nil runs it in place (tests).
    let run: Dispatcher.StoreExecutor?

    package init(shared: SharedSessions, run: Dispatcher.StoreExecutor?) {
        self.shared = shared
        self.run = run
    }

    func callAsFunction(_ work: @escaping @Sendable () -> Void) {
        if let run { run(work) } else { work() }
    }
}

/// What a session waits on in its keeper (`SessionPersistence`), and what comes of it.
///
/// Every step holds its session. A local keeper answers at once; with a shared store
/// (`--session-store`) the step runs on its session's store lane (`StoreLine`), the request
/// parked in the session's slot meanwhile, and is settled on the loop when the store has
/// answered: the loop never waits on the store, and a slow or absent store holds up only the
/// sessions that need it.
enum StoreStep {
    /// A new session is stored at version 1 before `reply` (its id) goes out.
    case create(reply: [UInt8])
    /// The session is not held here: taken over from the store, then the request runs on it
    /// (or is answered from the store's record, if another instance answered it).
    case takeOver
    /// A save may start once the store confirms this copy is the session as stored and the
    /// request unanswered (fencing); then the request goes on where it stopped.
    case fence(Fenced)
    /// A change is written, recording its request, before `reply` and the events go out; a
    /// timer's transition has no reply.
    case persist(reply: [UInt8]?)
    /// A read's reply goes out if the copy it read is still the session as stored.
    case confirm(reply: [UInt8])
    /// The session is removed from the store by its holder, then closed here.
    case close(reply: [UInt8])
    /// An idle session is removed from the store, then expires here; if another instance holds
    /// it now, it is just let go.
    case expire
}

/// What waits behind a fence: a document method sent with the session (it goes on where it
/// stopped), or the save a submit's canvas asked for (it starts).
enum Fenced: Equatable {
    case request(Method)
    case save(Drawing)
}

/// The call to the session store a step makes, as a value: what it asks, not where it is asked
/// (a lane runs it, `run(on:)`).
enum StoreCall: @unchecked Sendable {
    // @unchecked: as `StoreAnswer`'s.
    /// Store a new session at version 1.
    case create(ServiceSession)
    /// Take a session over, asking whether `asking` was answered.
    case takeOver(String, owner: String?, connection: [UInt8]?, now: ContinuousClock.Instant, asking: SharedSessions.Answered)
    /// Confirm the copy at `expected` is the session as stored (and `unanswered` unanswered).
    case confirm(String, expected: UInt64, unanswered: SharedSessions.Answered?)
    /// Write the session's next version, recording the request it answers.
    case persist(ServiceSession, answering: (request: SharedSessions.Answered, reply: [UInt8])?)
    /// Remove the session, held here at `expected`.
    case remove(String, expected: UInt64)

    /// The session to fold into a whole snapshot, and its version, when this call wrote it and
    /// its log is due a fold (`StoredSnapshot.foldDue`).
    func foldDue(after answer: StoreAnswer) -> (ServiceSession, UInt64)? {
        guard case .persist(let session, _) = self, case .kept(let version, let stored?) = answer, stored.foldDue else { return nil }
        return (session, version)
    }

    /// Asks the store, waiting for its answer; a store that fails is `.failed`.
    func run(on shared: SharedSessions) -> StoreAnswer {
        do throws(ProtocolError) {
            switch self {
            case .create(let session):
                return try shared.create(session).map { .kept(version: $0.version, stored: $0) } ?? .lost
            case .takeOver(let id, let owner, let connection, let now, let asking):
                guard let taken = try shared.takeOver(id, owner: owner, connection: connection, now: now, asking: asking) else { return .none }
                return .tookOver(taken.session, answered: taken.answered)
            case .confirm(let id, let expected, let unanswered):
                return try shared.confirm(id, expected: expected, unanswered: unanswered) ? .kept(version: expected) : .lost
            case .persist(let session, let answering):
                return try shared.persist(session, answering: answering).map { .kept(version: $0.version, stored: $0) } ?? .lost
            case .remove(let id, let expected):
                switch try shared.remove(id) {
                case .removed: return .kept(version: expected)
                case .heldElsewhere: return .lost
                case .absent: return .none
                }
            }
        } catch {
            return .failed(error)
        }
    }
}

/// What the session store said to a step.
enum StoreAnswer: @unchecked Sendable {
    // @unchecked: a `ServiceSession` is Sendable as its fields are (see its comment); the
    // enum's payloads are values.
    /// Written, created, confirmed or removed: the session is at this version in the store;
    /// `stored` is what the store has of it, when this step wrote it.
    case kept(version: UInt64, stored: StoredSnapshot? = nil)
    /// The local copy is stale (another instance holds the session, or answered the request), or
    /// the id is taken: nothing was written.
    case lost
    /// The store did not answer: nothing was written.
    case failed(ProtocolError)
    /// The session as stored, now held here, and what the store recorded for the request.
    case tookOver(ServiceSession, answered: ReplyCache.Lookup?)
    /// No such session, or another client's (to a removal: the store had let it go already).
    case none
}

/// What settling a store step calls for, which becomes the request's actions
/// (`RequestFlow.settled`), whether the request is a client's or the session's own work. Queued
/// work behind the session is replayed once they are done.
enum StoreAction: Equatable {
    /// The copy is the session as stored, at this version.
    case keep(version: UInt64)
    /// The events the request made go out (they were held back until the store had the change).
    case publish
    /// The step's reply goes out.
    case reply
    /// The request is refused.
    case refuse(Refusal)
    /// The fence held: the request goes on to its save.
    case goOn(Fenced)
    /// The session ends here, with this event.
    case close(event: String)
    /// The session is given back.
    case resume
    /// The local copy goes: stale, or holding a change the store did not take.
    case drop
    /// The request is answered once more, on the session taken over from the store.
    case retake
    /// A session taken over goes into the table, its request answered on it (or from the
    /// store's record, when another instance answered it).
    case adopt
    /// Nothing was taken over: the place kept for it goes.
    case forget

    enum Refusal: Equatable {
        case moved
        case unknownSession
        case noFreeID
        case store(ProtocolError)
    }
}

extension StoreStep {
    /// What the store's `answer` to this step calls for. `retaking`: the request is already being
    /// answered a second time (a stale copy was dropped once), so a second loss is the client's
    /// to retry. Every path gives the session (or the place kept for it) back exactly once,
    /// and answers the request exactly once or lets it go on.
    func settle(_ answer: StoreAnswer, retaking: Bool) -> [StoreAction] {
        switch (self, answer) {
        case (.takeOver, .tookOver):
            return [.adopt]
        case (.takeOver, .none):
            return [.forget, .refuse(.unknownSession)]
        case (.takeOver, .failed(let error)):
            return [.forget, .refuse(.store(error))]
        case (.expire, .none):
            // The store let the idle session go before this sweep did (its key expired or was
            // evicted): nobody else holds it, so it expires here, announced, all the same.
            return [.close(event: "session.expired")]
        case (.close, .none):
            return [.publish, .reply, .close(event: "session.closed")]
        case (.takeOver, _), (_, .tookOver), (_, .none):
            // Only a take-over finds a session, or none: any other pairing is a fault, settled
            // as a store that failed (nothing kept, the request refused).
            return settle(.failed(ProtocolError(.internal, "the session store's answer does not fit the step")), retaking: retaking)
        case (.fence(let fenced), .kept(let version, _)):
            return [.keep(version: version), .goOn(fenced)]
        case (.close, .kept(let version, _)):
            return [.keep(version: version), .publish, .reply, .close(event: "session.closed")]
        case (.expire, .kept(let version, _)):
            return [.keep(version: version), .close(event: "session.expired")]
        case (.persist(nil), .kept(let version, _)):
            return [.keep(version: version), .publish, .resume]
        case (.create, .kept(let version, _)), (.confirm, .kept(let version, _)), (.persist, .kept(let version, _)):
            return [.keep(version: version), .publish, .reply, .resume]
        case (.create, .lost):
            return [.drop, .refuse(.noFreeID)]
        case (.expire, .lost), (.persist(nil), .lost):
            return [.drop]   // another instance holds the session: its copy is the one that counts
        case (_, .lost):
            return retaking ? [.drop, .refuse(.moved)] : [.drop, .retake]
        case (.fence(.request), .failed(let error)):
            return [.refuse(.store(error)), .resume]   // nothing ran: the copy stays as it was
        case (.expire, .failed), (.persist(nil), .failed):
            return [.drop]
        case (_, .failed(let error)):
            // A change the store did not take is not acknowledged: the copy that has it goes (as
            // does a read's, whose reply is remembered in it), and the next request takes the
            // session as stored.
            return [.drop, .refuse(.store(error))]
        }
    }
}
