import CanvasProtocol
import Dispatch
import DocumentStore
import Synchronization

/// Where the sessions are kept, which every session's steps go through in one shape: a new
/// session is created there, a change kept before its reply goes, a read's copy confirmed, a
/// save fenced, a closed or idle session removed (`StoreStep`).
///
/// `local`: this process alone holds its sessions; every step is kept the moment it is asked,
/// and a session this process does not hold does not exist. `shared`: sessions live in the
/// session store (Redis) for every instance; each step goes to the session's store lane and is
/// answered later, on the loop. A copy the store says is stale is dropped, and its request
/// answered once more on the session as stored, where the store's record of answered requests
/// answers it if another instance did: a request is never run a second time on a stale copy.
enum SessionPersistence {
    case local
    case shared(lanes: [StoreLane])

    /// The store lanes; none when local.
    var lanes: [StoreLane] {
        if case .shared(let lanes) = self { return lanes }
        return []
    }

    /// The first lane's store, which also announces saves on the document feed; nil when local.
    /// Used only on its lane's thread.
    var store: SharedSessions? { lanes.first?.shared }

    /// The lane a session's steps go through: always the same one for an id.
    func lane(for id: String) -> StoreLane? {
        let lanes = self.lanes
        guard !lanes.isEmpty else { return nil }
        var hash: UInt32 = 2_166_136_261   // FNV-1a: stable, unlike Hasher, which is seeded per process
        for byte in id.utf8 { hash = (hash ^ UInt32(byte)) &* 16_777_619 }
        return lanes[Int(hash % UInt32(lanes.count))]
    }

    /// Whether every step is kept the moment it is asked.
    var keepsAtOnce: Bool {
        if case .local = self { return true }
        return false
    }

    /// A local keeper's answer to `step`, given at once: kept; and what this process does not
    /// hold, nobody holds. nil when the keeper is shared: ask it (`ask`).
    func localAnswer(_ step: StoreStep, _ session: ServiceSession?) -> StoreAnswer? {
        guard case .local = self else { return nil }
        if case .takeOver = step { return StoreAnswer.none }
        return .kept(version: session?.storedVersion ?? 0)
    }

    /// Who asks a step, when a request waits on it: the request as the store records it, and
    /// who sent it on which connection (a take-over's new holder).
    typealias Asker = (answered: SharedSessions.Answered, client: String?, connection: [UInt8]?)

    /// Asks `step` of session `id`'s shared keeper, on the session's lane; the answer comes to
    /// the loop later as the outcome of `job`, and this returns nil. `session`: the copy the
    /// step is about (nil for a take-over); `request`, when a request waits on it. A step that
    /// cannot be asked (no copy to write, no request to take over for) is answered at once as
    /// a failure, so nothing waits for an answer that will not come.
    func ask(_ step: StoreStep, session id: String, _ session: ServiceSession?, for request: Asker?,
             now: ContinuousClock.Instant, job: PendingJob, _ jobs: inout Jobs) -> StoreAnswer? {
        let unaskable = StoreAnswer.failed(ProtocolError(.internal, "session \(id): a step of its keeper was asked without what it is about"))
        guard let lane = lane(for: id) else { return unaskable }
        let expected = session?.storedVersion ?? 0
        let storeCall: StoreCall
        switch step {
        case .create:
            guard let session else { return unaskable }
            storeCall = .create(session)
        case .takeOver:
            guard let request else { return unaskable }
            storeCall = .takeOver(id, owner: request.client, connection: request.connection, now: now, asking: request.answered)
        case .fence:
            storeCall = .confirm(id, expected: expected, unanswered: request?.answered)
        case .persist(let reply):
            guard let session else { return unaskable }
            storeCall = .persist(session, answering: request.flatMap { request in reply.map { (request.answered, $0) } })
        case .confirm:
            storeCall = .confirm(id, expected: expected, unanswered: nil)
        case .close, .expire:
            storeCall = .remove(id, expected: expected)
        }
        jobs.store(for: job, on: lane, storeCall)
        return nil
    }

    /// How long a save waits, with its document's lock held, for the store to confirm its
    /// session (`saveFence`): four times the store's timeout.
    static let saveFenceWait = DispatchTimeInterval.seconds(2)

    /// What a session's save leaves in the document's history so that the same request, run
    /// again on another instance, finds the revision it made instead of saving twice: with
    /// several instances, the one that saved can die, or lose the session to another, before
    /// the session records the save; the retry then runs on the session as last stored. One
    /// instance alone loses its sessions with it, so it leaves nothing. The key stands for the
    /// session, the request's id and the request itself (ids are the client's, and a reused id
    /// on another request must not find this save), and the version of the session the save
    /// was made from (fenced: the store confirmed it), so that a retry run on the session as it
    /// was finds the save, and one run on a session changed since does not.
    func madeBy(_ session: ServiceSession, _ request: inout InFlightRequest) -> String? {
        guard case .shared = self else { return nil }
        let bytes = Array(session.id.utf8) + [0] + JSONCodec.serialize(request.id.json) + [0] + request.fingerprint() + [0]
            + Array(String(session.storedVersion).utf8)
        return String(DocumentStore.sha256(bytes).prefix(32))
    }

    /// What a session's save checks under the document's lock, before it writes and again just
    /// before it commits: that the store still has this instance holding the session at the
    /// version the save was made from, and the request unanswered. The fence before the save
    /// (`StoreStep.fence`) cannot see a pause between it and the lock, nor one while the save
    /// writes; this can. (A pause between its answer and the commit's one system call, it
    /// cannot.) Asked on the session's lane, in order with its other calls; the save's thread
    /// waits, with the document's lock held, for `saveFenceWait` at most: each call on the lane
    /// is bounded by the store's timeout, but a queue of them is not, and the lock must not be
    /// held for as long as a queue takes. Past it the save is refused as the store not
    /// answering, which the client retries like any other.
    func saveFence(_ session: ServiceSession, _ request: inout InFlightRequest) -> DocumentStore.WriteFence? {
        guard let lane = lane(for: session.id) else { return nil }
        let id = session.id, expected = session.storedVersion, shared = lane.shared
        let answered = request.answered()
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
}
