package import CanvasOperations
import CanvasProtocol
import DocumentStore
import Glibc
package import Logging
package import SessionStore
import Synchronization

/// Sessions shared by several canvasd instances through a session store (Redis).
///
/// Every acknowledged change to a session is written as a new version before its reply goes
/// out; an instance that gets a request for a session it does not hold takes it over from the
/// store. The store's compare-and-set (on version and holder) means that of two instances that
/// both hold a copy, only the one that took it over last can write, so no change is ever
/// acknowledged on a stale copy.
///
/// One thread uses an instance: its store lane's (`StoreLine`) for everything a request waits
/// on, and another, on a connection of its own, for the loop's subscription checks.
/// Nothing it does changes a session: it answers, and the loop applies the answer.
package final class SharedSessions: @unchecked Sendable {
    // @unchecked: confined to one thread at a time (see above); its connection is not shared.
    private let store: SessionSnapshotStore
    private let limits: Limits
    private let logger: Logger
    /// Where store calls and takeovers are counted, once the server has set it.
    package var metrics: ServiceMetrics?

    /// `rest`: shared by the connections that should stop asking together (the lanes).
    package init(store: SessionSnapshotStore, limits: Limits, logger: Logger, rest: StoreRest = StoreRest()) {
        self.store = store
        self.rest = rest
        self.limits = limits
        self.logger = logger
    }

    package var instance: String { store.instance }
    package var address: String { store.address }

    /// The document feed every instance relays, once the server has set it up.
    package var feed: DocumentFeed?

    /// Announces a save on the document feed. False when the store did not take it: the save
    /// is then not in the feed (its subscribers see a gap only if a later one is).
    package func announce(name: String, revision: Int, sha256: String, savedAt: Int64?, data: [UInt8]) -> Bool {
        guard let feed else { return false }
        do {
            _ = try asking(about: "document \(name)") { try feed.announce(name: name, revision: revision, sha256: sha256, savedAt: savedAt, data: data) }
            return true
        } catch {
            logger.error("save not announced on the document feed", metadata: ["document": "\(name)", "revision": "\(revision)"])
            return false
        }
    }

    /// This process's claim on its instance name: random, so a restarted process (or a twin
    /// given the same `--instance`) is told apart from the one that holds the lease.
    private let nameToken = (0..<4).map { _ in String(UInt32.random(in: 0...UInt32.max), radix: 16) }.joined(separator: "-")
    /// How long the name is held without a renewal; renewed every second by the loop.
    package static let nameLease: Duration = .seconds(10)

    /// Claims the instance name at start. A name still under lease may be a live canvasd's, or
    /// the lease of one that was killed (SIGKILL, a crash, a lost machine) and so never gave it
    /// back: this one watches the lease, claiming it again and again, and starts as soon as it
    /// runs out. Only a lease its holder still renews after a whole lease period watched is a
    /// live canvasd's, and then this one refuses. Throws a message for the operator then, or
    /// when the store cannot be asked; `.stopped` when `shouldStop` said so while it waited.
    package func claimName(shouldStop: () -> Bool = { false }) throws(NameClaimError) {
        let clock = ContinuousClock()
        let started = clock.now
        // When the lease ends unless it is renewed, as last seen, and when a renewal was last seen.
        var ends: ContinuousClock.Instant?
        var renewed: ContinuousClock.Instant?
        while true {
            let claim: SessionSnapshotStore.Claim
            do {
                claim = try store.claimInstance(token: nameToken, lease: Self.nameLease)
            } catch {
                throw .store("claiming the instance name \"\(instance)\": \(error)")
            }
            let now = clock.now
            guard case .taken(let left) = claim else {
                if ends != nil {
                    logger.notice("instance name taken: its lease ran out without being renewed", metadata: [
                        "instance": "\(instance)", "waitedMs": "\((now - started).milliseconds)",
                    ])
                }
                return
            }
            let end = now + .milliseconds(left)
            if let ends {
                // Its end moved later: the holder (or another process) claimed it again. Time
                // that passes between the store's answer and this clock is far below this.
                if end > ends + Self.renewalSeen { renewed = now }
            } else {
                logger.notice("instance name held under a lease: waiting to see whether its holder renews it (a live canvasd) or it runs out (one that was killed), and starting once it does", metadata: [
                    "instance": "\(instance)", "leaseEndsInMs": "\(left)", "leaseMs": "\(Self.nameLease.milliseconds)",
                ])
            }
            ends = end
            // Refused at its first renewal past the period: one seen earlier only says the holder
            // was alive then, and one killed since lets the lease run out, which is waited for.
            if let renewed, renewed - started >= Self.nameLease {
                throw .store("the instance name \"\(instance)\" is held by another live canvasd (it still renews its lease after the \((now - started).milliseconds) ms this one watched it): give each instance its own --instance")
            }
            if shouldStop() { throw .stopped("stopped while waiting for the instance name \"\(instance)\"") }
            usleep(UInt32(min(Self.leaseWatch, max(.milliseconds(1), end - now)).milliseconds * 1000))
        }
    }

    /// Why the instance name was not claimed: the store's answer or failure, or a stop asked for.
    package enum NameClaimError: Error {
        case store(String)
        case stopped(String)
    }

    /// How often a start-up waiting for its name asks again, so that it starts this soon after
    /// the lease runs out.
    package static let leaseWatch: Duration = .milliseconds(100)
    /// A lease whose end moved later by more than this was renewed (a renewal moves it by the
    /// second between renewals).
    package static let renewalSeen: Duration = .milliseconds(200)

    /// Renews the name's lease (the loop calls it once a second). False when another process
    /// took the name meanwhile (this one was paused past its lease, say).
    package func renewName() -> Bool {
        do {
            let claim = try asking(about: "instance \(instance)") { try store.claimInstance(token: nameToken, lease: Self.nameLease) }
            if case .taken = claim {
                logger.critical("another canvasd holds this instance's name now: its sessions and this one's are confused; stop one of them",
                                metadata: ["instance": "\(instance)"])
                return false
            }
        } catch {
            // A store that does not answer is already logged and rests; the lease outlives a short outage.
        }
        return true
    }

    package func releaseName() {
        do {
            try store.releaseInstance(token: nameToken)
        } catch {
            logger.warning("instance name not released; its lease ends by itself", metadata: ["error": "\(error)"])
        }
    }

    /// After a failure the store is not asked again for a while (`StoreRest`), by any lane.
    private let rest: StoreRest

    /// One call to the store about `session`; a store that fails is `UNAVAILABLE` to the client,
    /// and so is every call while it rests (one call after each rest tries it again).
    private func asking<Answer>(about session: String, _ call: () throws -> Answer) throws(ProtocolError) -> Answer {
        let unavailable = ProtocolError(.unavailable, "the session store did not answer; try again", data: ["reason": "sessionStore"])
        let now = ContinuousClock.now
        guard rest.mayAsk(at: now) else {
            metrics?.askedStore(seconds: 0, failed: true)
            throw unavailable
        }
        do {
            let answer = try call()
            metrics?.askedStore(seconds: (ContinuousClock.now - now).seconds, failed: false)
            if rest.answered() { logger.notice("session store answering again") }
            return answer
        } catch {
            metrics?.askedStore(seconds: (ContinuousClock.now - now).seconds, failed: true)
            let backoff = rest.failed(at: ContinuousClock.now)
            logger.error("session store failed; not asked again for a while", metadata: [
                "session": "\(session)", "error": "\(error)", "restMs": "\(backoff.milliseconds)",
            ])
            throw unavailable
        }
    }


    private func encode(_ session: ServiceSession) throws(ProtocolError) -> [UInt8] {
        let bytes: [UInt8]
        do {
            bytes = try SessionSnapshot.encode(session)
        } catch {
            logger.critical("session not encoded", metadata: ["session": "\(session.id)", "error": "\(error)"])
            throw ProtocolError(.internal, "the session could not be written out")
        }
        // Within the drawing limits a session is a few megabytes; this bounds what one session
        // can put into the store (and what another instance must read back).
        guard bytes.count <= SessionSnapshot.maxBytes else {
            logger.error("session too large to store", metadata: ["session": "\(session.id)", "bytes": "\(bytes.count)"])
            throw ProtocolError(.payloadTooLarge, "the session would take \(bytes.count) bytes in the session store; the limit is \(SessionSnapshot.maxBytes)",
                                data: ["limit": .integer(Int64(SessionSnapshot.maxBytes)), "size": .integer(Int64(bytes.count))])
        }
        return bytes
    }

    /// A request of a session's as the store records it once answered (`SessionSnapshotStore`'s
    /// answered requests): named by a digest of its id; recorded with a digest of the request,
    /// to tell a retry from a reused id, and its reply when small. The reply cache a snapshot
    /// carries keeps the last 64 in full; this keeps thousands, so that however late a copy of
    /// a request comes (from a paused instance, say), it is never run a second time.
    package struct Answered: Sendable {
        let id: RequestID
        /// The request's digest (`ReplyCache.digest`).
        let digest: [UInt8]
        /// The request itself, for a record an earlier build made (by its fingerprint's SHA-256).
        let request: Request

        var key: [UInt8] { Array(DocumentStore.sha256(JSONCodec.serialize(id.json)).prefix(32).utf8) }

        /// Replies up to this size are recorded whole; a larger one is recorded as answered only.
        static let maxRecordedReplyBytes = 4096

        /// A record's head before it says whether the reply follows: `~`, then the digest in hex.
        /// (Records made before the digests start with 64 hex digits of the SHA-256 of the
        /// request's fingerprint.)
        private var head: [UInt8] { [UInt8(ascii: "~")] + Array(digest.hex.utf8) }

        func entry(reply: [UInt8]) -> [UInt8] {
            let kept = reply.count <= Self.maxRecordedReplyBytes
            return head + [kept ? 1 : 0] + (kept ? reply : [])
        }

        /// What `entry` says to this request: its reply again, answered but not kept, or an id
        /// reused on another request.
        func lookup(_ entry: [UInt8]) -> ReplyCache.Lookup {
            // Asked only of records found, after a take-over or a write that met one: the
            // request is written out for an earlier build's record alone.
            let head = entry.first == UInt8(ascii: "~") ? self.head : Array(DocumentStore.sha256(ReplyCache.fingerprint(request)).utf8)
            guard entry.count > head.count, entry.starts(with: head) else { return .reused }
            return entry[head.count] == 1 ? .retry(reply: Array(entry[(head.count + 1)...])) : .notKept
        }
    }

    /// Stores a new session at version 1, and returns it as stored. nil when another instance
    /// has a session of that id.
    func create(_ session: ServiceSession) throws(ProtocolError) -> StoredSnapshot? {
        let bytes = try encode(session)
        guard try asking(about: session.id, { try store.create(session.id, owner: session.owner, snapshot: bytes) }) else { return nil }
        metrics?.stored(bytes: bytes.count, .whole)
        return StoredSnapshot(version: 1, bytes: bytes)
    }

    /// Writes the session's next version, recording the request that changed it (`answering`,
    /// with its reply) as answered. Returns the session as now stored, or nil when the copy is
    /// stale (another instance took the session over, or it expired in the store) or the
    /// request was answered already: the copy must then be dropped, unacknowledged, and the
    /// request answered from the store.
    ///
    /// The change goes as the operations that made it (`SessionOperation`), when the copy's
    /// journal has them all since the version it expects: the session is not encoded, and what
    /// goes to Redis is about the change's own size. Otherwise the session is encoded whole and
    /// goes as a byte delta from the snapshot last stored (`StoredSnapshot.change`), when this
    /// copy has those bytes, or whole. The store takes either only at the expected version,
    /// from this instance, so the entry follows the very session it was made on.
    func persist(_ session: ServiceSession, answering: (request: Answered, reply: [UInt8])? = nil) throws(ProtocolError) -> StoredSnapshot? {
        let answer = answering.map { SessionSnapshotStore.Answer(key: $0.request.key, entry: $0.request.entry(reply: $0.reply)) }
        let expected = session.storedVersion, id = session.id
        let before = session.stored.flatMap { $0.version == expected ? $0 : nil }
        var bytes: [UInt8]?
        var change: SessionSnapshotStore.Change
        // A log past twice the entries a fold is due at means folds are failing: written whole,
        // so a take-over never finds more than it reads.
        if let before, let journal = session.journal, before.logEntries < 2 * StoredSnapshot.maxOperationEntries - 1 {
            change = .operations(OperationLog.encode(journal, version: expected + 1, after: session))
        } else {
            let whole = try encode(session)
            bytes = whole
            change = before?.change(to: whole) ?? .whole(whole)
        }
        var outcome = try asking(about: id, { try store.write(id, change, expected: expected, answering: answer) })
        if case .wholeNeeded = outcome {
            logger.warning("the session's log in the store does not lead to its version; written whole", metadata: [
                "session": "\(id)", "version": "\(expected)",
            ])
            let whole: [UInt8]
            if let bytes { whole = bytes } else { whole = try encode(session) }
            bytes = whole
            change = .whole(whole)
            outcome = try asking(about: id, { try store.write(id, change, expected: expected, answering: answer) })
        }
        switch outcome {
        case .wholeNeeded:
            throw ProtocolError(.internal, "the session store refused a whole snapshot as if it were a delta")
        case .written(let version):
            switch change {
            case .operations(let entry):
                metrics?.stored(bytes: entry.count, .operations)
                let known = before ?? StoredSnapshot(version: expected, bytes: nil)
                return known.afterOperations(count: entry.count, version: version, logEntries: store.lastLog.entries,
                                             wholeCount: store.lastLog.baseBytes)
            case .delta, .whole:
                metrics?.stored(bytes: change.bytes.count, change.isLogged ? .delta : .whole)
                let next = bytes ?? []
                return before.map { $0.after(change, next: next, version: version) } ?? StoredSnapshot(version: version, bytes: next)
            }
        case .lost(let holder, let version):
            logger.notice("session moved: the local copy is dropped", metadata: [
                "session": "\(id)", "holder": "\(holder ?? "-")", "version": "\(version.map(String.init) ?? "-")",
                "localVersion": "\(expected)",
            ])
            return nil
        case .answered:
            // Run here on a copy that did not know it was answered (its reply cache had let it
            // go); the answer on record stands.
            logger.notice("request already answered: the local copy is dropped", metadata: [
                "session": "\(id)", "id": "\(answering.map { "\($0.request.id)" } ?? "-")",
            ])
            return nil
        }
    }

    /// Folds the session's log into a whole snapshot: `session` is the session at `version`,
    /// just written. Run on its lane after the write's answer went to the loop, so no request
    /// waits for the encoding; a later write of the session waits behind it on the lane, once
    /// per fold. A fold that does not land (the session moved on, the store failed) leaves the
    /// log as it was, which is still the session; the next write says what the store has.
    func fold(_ session: ServiceSession, version: UInt64) {
        // Not through `asking`: a fold that fails (a large snapshot past the store's timeout, a
        // replica slow to confirm it) must not make the store rest for every session's requests.
        // While it rests, no fold is tried.
        guard !rest.resting(at: ContinuousClock.now), let bytes = try? encode(session) else { return }
        do {
            if try store.fold(session.id, version: version, base: bytes) { metrics?.stored(bytes: bytes.count, .fold) }
        } catch {
            logger.warning("the session's log was not folded; it stays as it is", metadata: ["session": "\(session.id)", "error": "\(error)"])
        }
    }

    /// Whether the local copy (at `expected`) is still the session as stored, for a request that
    /// only reads it (renewing its lease, since a session only read is still in use), or before
    /// a side effect (a save) starts: then also whether `unanswered` is still unanswered. False:
    /// another instance took the session over (or answered the request); drop the copy.
    func confirm(_ id: String, expected: UInt64, unanswered: Answered? = nil) throws(ProtocolError) -> Bool {
        let key = unanswered?.key
        return try asking(about: id, { try store.confirm(id, expected: expected, unanswered: key) })
    }

    /// The session as last acknowledged by whichever instance held it, now held here, and what
    /// the store recorded for `asking` if it was answered; nil when there is none (or it is
    /// another client's).
    func takeOver(_ id: String, owner: String?, connection: [UInt8]?, now: ContinuousClock.Instant,
                  asking request: Answered? = nil) throws(ProtocolError) -> (session: ServiceSession, answered: ReplyCache.Lookup?)? {
        let key = request?.key
        guard let snapshot = try asking(about: id, { try store.takeOver(id, owner: owner, asking: key) }) else { return nil }
        do {
            let assembled = try snapshot.assembled(maxCount: SessionSnapshot.maxBytes)
            var session = try SessionSnapshot.decode(assembled.bytes, session: id, connection: connection, now: now, limits: limits)
            for entry in assembled.operations { try OperationLog.replay(entry, on: &session, within: limits.drawingBounds) }
            // What the operations made is held to the limits a snapshot is (`SessionSnapshot.check`).
            if !assembled.operations.isEmpty { try SessionSnapshot.checkLimits(session, limits) }
            session.storedVersion = snapshot.version
            session.storedAt = now
            session.stored = assembled.stored
            session.startJournal()
            metrics?.tookOver()
            logger.info("session taken over", metadata: ["session": "\(id)", "version": "\(snapshot.version)", "seq": "\(session.seq)"])
            guard let request, let entry = snapshot.answer else { return (session, nil) }
            return (session, request.lookup(entry))
        } catch {
            logger.error("session snapshot unreadable", metadata: ["session": "\(id)", "error": "\(error)"])
            throw ProtocolError(.internal, "the stored session could not be read", data: ["session": .string(id)])
        }
    }

    /// Removes a closed or expired session from the store.
    func remove(_ id: String) throws(ProtocolError) -> SessionSnapshotStore.Removal {
        try asking(about: id) { try store.remove(id) }
    }

    /// The owner a session was opened by ("" without authentication), nil if there is none.
    package func owner(of id: String) -> String? {
        do {
            return try asking(about: id) { try store.owner(of: id) }
        } catch {
            return nil   // logged by `asking`; a subscription not applied is the safe answer
        }
    }
}

/// When the session store may be asked again, shared by every lane: after a failure nobody asks
/// it for a while (250 ms, doubling up to 2 s while it keeps failing), and then one call alone
/// tries it, the others still answered `UNAVAILABLE` at once. Each call to a store that does not
/// answer holds its caller for the connection's timeout; with each lane trying on its own, a
/// client's requests met that timeout once per lane per rest.
package final class StoreRest: Sendable {
    private struct State {
        var until: ContinuousClock.Instant
        var backoff: Duration
        var probing = false
    }

    private static let firstBackoff: Duration = .milliseconds(250)
    /// Longest rest: a Sentinel failover takes a few seconds, and its clients wait this long
    /// past it at most (5 s let a client that retried wait 10 s and more after a primary's loss).
    private static let longestBackoff: Duration = .seconds(2)
    private let state = Mutex<State?>(nil)

    package init() {}

    /// Whether a call may go to the store now: it is not resting, or this call is the one that
    /// tries it after a rest.
    package func mayAsk(at now: ContinuousClock.Instant) -> Bool {
        state.withLock { state in
            guard var resting = state else { return true }
            guard now >= resting.until, !resting.probing else { return false }
            resting.probing = true
            state = resting
            return true
        }
    }

    /// Whether calls are held off now (a rest not yet over, or being tried).
    package func resting(at now: ContinuousClock.Instant) -> Bool {
        state.withLock { state in state.map { now < $0.until || $0.probing } ?? false }
    }

    /// The store answered. Returns whether it had been resting.
    package func answered() -> Bool {
        state.withLock { state in
            defer { state = nil }
            return state != nil
        }
    }

    /// The store failed: it rests, longer each time. Returns how long.
    package func failed(at now: ContinuousClock.Instant) -> Duration {
        state.withLock { state in
            let backoff = state.map { min($0.backoff * 2, Self.longestBackoff) } ?? Self.firstBackoff
            state = State(until: now + backoff, backoff: backoff)
            return backoff
        }
    }
}
