import CanvasProtocol
import DocumentStore
import InkRendering
import Synchronization

/// What a job run off the loop gives back: a save's new summary (with a submit's result image,
/// when it needs one), a reply already written (a document read's, a large drawing's), a
/// page's geometry (and its ink, to reopen), or a result image.
enum JobOutcome: Sendable {
    case saved(Result<DocumentSummary, DocumentError>, image: Result<String, RenderError>? = nil)
    case reply([UInt8])
    case page(Result<PageSummary, DocumentError>)
    /// The page a `canvas.open` with `reopen` names, and its ink.
    case pageInk(Result<(page: PageSummary, ink: PageInk), DocumentError>)
    case image(Result<String, RenderError>)
    /// What the session store said to a step (`StoreStep`).
    case stored(StoreAnswer)

    /// A submit's result image, rendered with its save.
    var image: ResultImage? {
        if case .saved(_, let image?) = self { return .rendered(image) }
        return nil
    }
}

/// A job started off the loop and not yet answered, and whom its outcome is for.
struct PendingJob {
    enum Owner {
        /// Whatever holds this session, parked in its slot (`SessionSlot.parked`): the request
        /// or step of its own that the job works for.
        case session(String)
        /// A document method sent without a session.
        case request(InFlightRequest)
    }
    let owner: Owner
    /// Who the job runs for, for the bound on reads per owner.
    let client: String?
    /// Memory reserved for its reply (`MemoryPressure`), given back when it finishes.
    var reservedBytes = 0
}

/// The jobs running off the loop: saves on the save runner, reads on the read runner, their
/// outcomes posted back by whichever thread ran them.
struct Jobs {
    /// What a job on the read runner is, for its owner's bound: a read of a document (or a
    /// large drawing's encoding, a page's geometry) or a result image.
    enum ReadKind {
        case read
        case render
    }

    /// Where saves run, given the document each writes; nil runs each in place.
    private let saves: Dispatcher.SaveExecutor?
    /// Where reads run; nil runs each in place.
    private let reads: Dispatcher.SaveExecutor?
    private let inbox = Inbox()
    /// Each job, and for one on the read runner, its kind and owner (nil: the local owner).
    private var pending: [UInt64: (job: PendingJob, read: (kind: ReadKind, owner: String?)?)] = [:]
    private var lastJob: UInt64 = 0
    /// The jobs that are calls to the session store.
    private var storing: Set<UInt64> = []
    private var reading = 0
    /// Reads and renders in flight per owner: connections cost nothing, so an owner, not a
    /// connection, is what may not fill the runner.
    private var readingBy: [String?: (reads: Int, renders: Int)] = [:]
    /// Reads are bounded in time by the store; this bounds how many may wait.
    static let maxPendingReads = 64
    /// How many of those one owner may have: a quarter, so four owners always find room.
    static let maxPendingReadsPerOwner = 16
    /// Result images one owner may have rendering: each of the largest takes about a second
    /// of a core, so a few are all one owner gets; past that a result goes without its image.
    static let maxRendersPerOwner = 4

    init(saves: Dispatcher.SaveExecutor?, reads: Dispatcher.SaveExecutor?) {
        self.saves = saves
        self.reads = reads
    }

    /// Starts a step in the session store, on `lane`. Not bounded here: each holds its session,
    /// and a session has one step at a time.
    mutating func store(for job: PendingJob, on lane: StoreLane, _ storeCall: StoreCall) {
        let id = add(job, read: nil), inbox = self.inbox, shared = lane.shared
        storing.insert(id)
        lane {
            let answer = storeCall.run(on: shared)
            inbox.post(id, .stored(answer))
            // The fold a write made due runs on the lane's next turn: the loop hears of the
            // write (and replies) first.
            if let (session, version) = storeCall.foldDue(after: answer) { lane { shared.fold(session, version: version) } }
        }
    }

    /// Starts a save where saves of `document` run. `render`, for a submit whose result has an
    /// image to render, runs after a save that worked, beside the loop like the save.
    mutating func save(_ document: String, _ save: @escaping PreparedSave, for job: PendingJob,
                       render: (@Sendable () -> Result<String, RenderError>)? = nil) {
        let id = add(job, read: nil), inbox = self.inbox
        let work: @Sendable () -> Void = {
            let saved = Result(catching: save)
            inbox.post(id, .saved(saved, image: (try? saved.get()) == nil ? nil : render?()))
        }
        if let saves { saves(document, work) } else { work() }
    }

    /// Starts a read, or refuses at once when too many wait, in all or for the job's owner
    /// (each is bounded in time, but a flood of them must not grow without end).
    mutating func read(for job: PendingJob, kind: ReadKind = .read, _ read: @escaping @Sendable () -> JobOutcome) throws(ProtocolError) {
        guard reading < Self.maxPendingReads else {
            throw ProtocolError(.unavailable, "\(reading) document reads are waiting; try again",
                                data: ["reason": "busy", "limit": .integer(Int64(Self.maxPendingReads))])
        }
        let owner = job.client
        let mine = readingBy[owner] ?? (0, 0)
        switch kind {
        case .read where mine.reads >= Self.maxPendingReadsPerOwner:
            throw ProtocolError(.unavailable, "\(ServerMethods.describe(owner)) has \(mine.reads) reads waiting; try again",
                                data: ["reason": "ownerBusy", "limit": .integer(Int64(Self.maxPendingReadsPerOwner))])
        case .render where mine.renders >= Self.maxRendersPerOwner:
            throw ProtocolError(.unavailable, "\(ServerMethods.describe(owner)) has \(mine.renders) images rendering",
                                data: ["reason": "ownerBusy", "limit": .integer(Int64(Self.maxRendersPerOwner))])
        case .read, .render:
            break
        }
        reading += 1
        count(owner, kind, +1)
        let id = add(job, read: (kind, owner)), inbox = self.inbox
        let work: @Sendable () -> Void = { inbox.post(id, read()) }
        // Reads of one document need not wait for each other: each job is its own key.
        if let reads { reads("read \(id)", work) } else { work() }
    }

    var inFlight: Int { pending.count }

    /// Whether a call to the session store is out.
    var awaitsStore: Bool { !storing.isEmpty }

    /// Whether a job has finished since the last `finished()`.
    var anyFinished: Bool { !pending.isEmpty && !inbox.isEmpty }

    /// The jobs finished since the last call, in the order they finished.
    mutating func finished() -> [(job: PendingJob, outcome: JobOutcome)] {
        // Asked after every request: with no job out, the workers' inbox (a lock, memory an
        // idle server finds uncached) has nothing to give.
        guard !pending.isEmpty else { return [] }
        return inbox.take().compactMap { id, outcome in
            guard let entry = pending.removeValue(forKey: id) else { return nil }
            storing.remove(id)
            if let read = entry.read {
                reading -= 1
                count(read.owner, read.kind, -1)
            }
            return (entry.job, outcome)
        }
    }

    private mutating func count(_ owner: String?, _ kind: ReadKind, _ change: Int) {
        var counts = readingBy[owner] ?? (0, 0)
        switch kind {
        case .read: counts.reads += change
        case .render: counts.renders += change
        }
        // Forgotten at zero, so owners that come and go leave nothing behind.
        readingBy[owner] = counts == (0, 0) ? nil : counts
    }

    private mutating func add(_ job: PendingJob, read: (kind: ReadKind, owner: String?)?) -> UInt64 {
        lastJob += 1
        pending[lastJob] = (job, read)
        return lastJob
    }

    private final class Inbox: Sendable {
        private let finished = Mutex<[(UInt64, JobOutcome)]>([])
        func post(_ job: UInt64, _ outcome: JobOutcome) { finished.withLock { $0.append((job, outcome)) } }
        var isEmpty: Bool { finished.withLock { $0.isEmpty } }
        func take() -> [(UInt64, JobOutcome)] {
            finished.withLock { list in
                defer { list.removeAll() }
                return list
            }
        }
    }
}
