import CanvasProtocol

/// What a session waits on in the session store (with `--session-store`), and what comes of it.
///
/// Every step holds its session (`SessionSlot.held`), runs on the store's own thread
/// (`StoreLine`) and is settled on the loop when the store has answered: the loop never waits
/// on the store, and a slow or absent store holds up only the sessions that need it.
enum StoreStep {
    /// A new session is stored at version 1 before `reply` (its id) goes out.
    case create(reply: [UInt8])
    /// The session is not held here: taken over from the store, then the request runs on it
    /// (or is answered from the store's record, if another instance answered it).
    case takeOver
    /// A save may start once the store confirms this copy is the session as stored and the
    /// request unanswered (fencing); then the request goes on where it stopped.
    case fence(Method)
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

/// What the session store said to a step.
enum StoreAnswer: @unchecked Sendable {
    // @unchecked: a `ServiceSession` is Sendable as its fields are (see its comment); the
    // enum's payloads are values.
    /// Written, created, confirmed or removed: the session is at this version in the store.
    case kept(version: UInt64)
    /// The local copy is stale (another instance holds the session, or answered the request), or
    /// the id is taken: nothing was written.
    case lost
    /// The store did not answer: nothing was written.
    case failed(ProtocolError)
    /// The session as stored, now held here, and what the store recorded for the request.
    case tookOver(ServiceSession, answered: ReplyCache.Lookup?)
    /// No such session, or another client's.
    case none
}
