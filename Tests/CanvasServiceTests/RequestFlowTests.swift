import CanvasCore
import CanvasProtocol
@testable import CanvasService
@testable import DocumentStore
import Foundation
import Testing

/// A session request's life as its machine says it (`RequestFlow.next`), without sockets, a
/// store or a canvas: each path walked event by event, the state and actions checked after
/// every step, and every state against every event for what must always hold.
@Suite("request flow")
struct RequestFlowTests {
    static let session = StoreStepTests.session
    static let failure = StoreStepTests.failure
    static let unreported = UnreportedResult(command: .ended(.canvasMinimize, imageData: true, saved: nil), actions: [], drawing: .empty)

    static func facts(_ method: Method, keptAtOnce: Bool = false, confirmedNow: Bool = false, retaking: Bool = false) -> RequestFlow.Facts {
        RequestFlow.Facts(method: method, id: .integer(7), session: "s", replyLimit: 1024, keptAtOnce: keptAtOnce, confirmedNow: confirmedNow,
                          retaking: retaking)
    }

    static func stepName(_ step: StoreStep) -> String {
        switch step {
        case .create: return "create"
        case .takeOver: return "takeOver"
        case .fence: return "fence"
        case .persist: return "persist"
        case .confirm: return "confirm"
        case .close: return "close"
        case .expire: return "expire"
        }
    }

    static func name(_ state: RequestState) -> String {
        switch state {
        case .ready: return "ready"
        case .working: return "working"
        case .fencing: return "fencing"
        case .saving: return "saving"
        case .rendering: return "rendering"
        case .persisting(let step): return "persisting.\(stepName(step))"
        case .takingOver: return "takingOver"
        case .answered: return "answered"
        case .dropped: return "dropped"
        }
    }

    static func name(_ then: FollowUp) -> String {
        switch then {
        case .finishTransition: return "finishTransition"
        case .startJob: return "startJob"
        case .run: return "run"
        case .runWith: return "run(found)"
        case .documentReply: return "documentReply"
        case .report(_, .rendered): return "report(image)"
        case .report(_, .omitted): return "report(omitted)"
        case .render: return "render"
        case .save: return "save"
        case .ask(let step): return "ask.\(stepName(step))"
        case .adopt: return "adopt"
        }
    }

    /// A step's actions and its follow-up, named in order.
    static func names(_ step: RequestFlow.Step) -> [String] {
        step.actions.map { name($0) } + [step.then].compactMap { $0.map { name($0) } }
    }

    static func name(_ action: RequestAction) -> String {
        switch action {
        case .remember: return "remember"
        case .announce: return "announce"
        case .holdEvents: return "hold"
        case .keep: return "keep"
        case .publish: return "publish"
        case .reply(let bytes): return "reply\(bytes)"
        case .refuse(let error): return "refuse(\(error.data["reason"]?.stringValue ?? error.code.rawValue))"
        case .resume: return "resume"
        case .close(let event): return "close(\(event))"
        case .drop: return "drop"
        case .retake: return "retake"
        case .keepPlace: return "keepPlace"
        case .insert: return "insert"
        case .forget: return "forget"
        }
    }

    /// Feeds `events` in order from `state`; returns, per step, the state reached and the actions.
    static func walk(_ method: Method, from state: RequestState = .ready, _ events: [RequestEvent], retaking: Bool = false,
                     confirmedNow: Bool = false, local: Bool = false) -> [String] {
        var state = state
        var steps: [String] = []
        for event in events {
            let step = RequestFlow.next(state, event, facts(method, keptAtOnce: local, confirmedNow: confirmedNow, retaking: retaking))
            state = step.state
            steps.append("\(name(step.state)): " + names(step).joined(separator: " "))
        }
        return steps
    }

    static let saved = JobOutcome.saved(.success(DocumentSummary(name: "d.pdf", revision: 2, pageCount: 1, sha256: "")))

    @Test("a read: run, remembered, its copy confirmed, answered, given back")
    func read() {
        #expect(Self.walk(.canvasState, [.arrived(.miss), .ran(.reply([1])), .stored(.kept(version: 3))]) == [
            "ready: run",
            "persisting.confirm: remember announce hold ask.confirm",
            "answered: keep publish reply[1] resume",
        ])
    }

    @Test("with a local keeper a reply goes as soon as it is in, and a save needs no fence")
    func local() {
        #expect(Self.walk(.canvasState, [.arrived(.miss), .ran(.reply([1]))], local: true) == ["ready: run", "answered: remember announce reply[1] resume"])
        #expect(Self.walk(.sessionClose, [.ran(.reply([1]))], local: true) == ["answered: remember announce reply[1] close(session.closed)"])
        #expect(Self.walk(.canvasSubmit, [.ran(.saving(.empty))], local: true) == ["saving: save"])
        #expect(Self.walk(.documentFlatten, [.arrived(.miss)], local: true) == ["ready: startJob"])
        // What it asks (a new session, a take-over) it answers at once, through the same steps.
        #expect(Self.walk(.canvasState, from: .takingOver, [.stored(.none)], local: true) == ["answered: forget refuse(UNKNOWN_SESSION)"])
    }

    @Test("a retry answered from the reply cache runs nothing; a reused id, or one whose reply was not kept, is refused")
    func answeredBefore() {
        #expect(Self.walk(.drawingAddStroke, [.arrived(.retry(reply: [9]))]) == ["answered: reply[9] resume"])
        #expect(Self.walk(.drawingAddStroke, [.arrived(.reused)]) == ["answered: refuse(CONFLICT) resume"])
        #expect(Self.walk(.drawingAddStroke, [.arrived(.notKept)]) == ["answered: refuse(replyNotKept) resume"])
        // A read answered again is the same answer: it runs.
        #expect(Self.walk(.canvasState, [.arrived(.notKept)]) == ["ready: run"])
    }

    @Test("a submit into a document: fenced, saved, run again with the save, kept, answered")
    func submitIntoDocument() {
        #expect(Self.walk(.canvasSubmit, [.arrived(.miss), .ran(.saving(.empty)), .stored(.kept(version: 4)), .finished(Self.saved),
                                          .ran(.reply([2])), .stored(.kept(version: 5))]) == [
            "ready: run",
            "fencing: ask.fence",
            "saving: keep save",
            "saving: run(found)",
            "persisting.persist: remember announce hold ask.persist",
            "answered: keep publish reply[2] resume",
        ])
        // Confirmed in this very turn (just taken over, say): no second fence.
        #expect(Self.walk(.canvasSubmit, [.ran(.saving(.empty))], confirmedNow: true) == ["saving: save"])
    }

    @Test("a save stopped by its own fence under the document's lock settles as the fence: moved is answered again, a silent store refused")
    func saveFencedUnderLock() {
        let moved = JobOutcome.saved(.failure(.fenced(name: "d.pdf", reason: "sessionMoved", message: "moved")))
        let silent = JobOutcome.saved(.failure(.fenced(name: "d.pdf", reason: "sessionStore", message: "no answer")))
        #expect(Self.walk(.canvasSubmit, from: .saving, [.finished(moved)]) == ["takingOver: drop retake ask.takeOver"])
        #expect(Self.walk(.canvasSubmit, from: .saving, [.finished(moved)], retaking: true) == ["dropped: drop refuse(sessionMoved)"])
        #expect(Self.walk(.canvasSubmit, from: .saving, [.finished(silent)]) == ["dropped: drop refuse(sessionStore)"])
        // A document write sent with the session: nothing ran, the copy stays.
        #expect(Self.walk(.documentFlatten, from: .working, [.finished(silent)]) == ["answered: refuse(sessionStore) resume"])
    }

    @Test("a document method with a session: fenced first, its job, its reply kept with the session")
    func documentWithSession() {
        #expect(Self.walk(.documentFlatten, [.arrived(.miss), .stored(.kept(version: 2)), .job(.started), .finished(Self.saved),
                                             .ran(.reply([3])), .stored(.kept(version: 3))]) == [
            "fencing: ask.fence",
            "ready: keep startJob",
            "working: ",
            "working: documentReply",
            "persisting.persist: remember announce hold ask.persist",
            "answered: keep publish reply[3] resume",
        ])
        #expect(Self.walk(.documentInfo, [.arrived(.miss), .job(.refused(Self.failure))]) == [
            "ready: startJob", "answered: refuse(sessionStore) resume",
        ])
        // A canvas.open whose page needs no lookup runs at once.
        #expect(Self.walk(.canvasOpen, [.arrived(.miss), .job(.notNeeded)]) == ["ready: startJob", "ready: run"])
    }

    @Test("a result image rendered beside the loop, or left out, is reported before the change is kept")
    func rendering() {
        #expect(Self.walk(.canvasMinimize, [.arrived(.miss), .ran(.rendering(Self.unreported)), .finished(.image(.success("png"))),
                                            .ran(.reply([4]))]) == [
            "ready: run", "rendering: render", "rendering: report(image)", "persisting.persist: remember announce hold ask.persist",
        ])
        #expect(Self.walk(.canvasMinimize, from: .rendering(Self.unreported), [.imageOmitted("busy")]) == ["rendering: report(omitted)"])
    }

    @Test("a stale copy: dropped and the request answered once more on the session taken over; a second loss is the client's")
    func staleCopy() {
        #expect(Self.walk(.drawingAddStroke, [.arrived(.miss), .ran(.reply([5])), .stored(.lost), .stored(.tookOver(Self.session, answered: nil)),
                                              .arrived(.miss)]) == [
            "ready: run",
            "persisting.persist: remember announce hold ask.persist",
            "takingOver: drop retake ask.takeOver",
            "ready: adopt",
            "ready: run",
        ])
        #expect(Self.walk(.drawingAddStroke, from: .persisting(.persist(reply: [5])), [.stored(.lost)], retaking: true) == [
            "dropped: drop refuse(sessionMoved)",
        ])
        // A change the store did not take is not acknowledged.
        #expect(Self.walk(.drawingAddStroke, from: .persisting(.persist(reply: [5])), [.stored(.failed(Self.failure))]) == [
            "dropped: drop refuse(sessionStore)",
        ])
    }

    @Test("opening, closing and taking over go through the same persistence")
    func sessionSteps() {
        #expect(Self.walk(.sessionOpen, [.created(reply: [6]), .stored(.kept(version: 1))]) == [
            "persisting.create: insert ask.create", "answered: keep publish reply[6] resume",
        ])
        #expect(Self.walk(.canvasState, [.notHeld, .stored(.tookOver(Self.session, answered: nil)), .arrived(.miss)]) == [
            "takingOver: keepPlace ask.takeOver", "ready: adopt", "ready: run",
        ])
        #expect(Self.walk(.sessionClose, [.arrived(.miss), .ran(.reply([7])), .stored(.kept(version: 3))]) == [
            "ready: run", "persisting.close: remember announce hold ask.close", "answered: keep publish reply[7] close(session.closed)",
        ])
        #expect(Self.walk(.canvasState, from: .takingOver, [.stored(.none)]) == ["answered: forget refuse(UNKNOWN_SESSION)"])
        #expect(Self.walk(.canvasState, from: .takingOver, [.stored(.failed(Self.failure))]) == ["answered: forget refuse(sessionStore)"])
    }

    @Test("every state, every event: never a trap; the session given back at most once, and a request that ends is answered once")
    func everyStateEveryEvent() {
        for method in Method.allCases {
            for state in RequestStatesTableTests.StateKind.allCases.map(\.sample) {
                for event in RequestStatesTableTests.EventKind.allCases.map(\.sample) {
                    for (local, retaking) in [(true, false), (false, false), (false, true)] {
                        let step = RequestFlow.next(state, event, Self.facts(method, keptAtOnce: local, retaking: retaking))
                        let next = step.state
                        let names = Self.names(step)
                        let ends = names.filter { ["resume", "drop", "forget"].contains($0) || $0.hasPrefix("close(") }
                        let answers = names.filter { $0.hasPrefix("reply") || $0.hasPrefix("refuse(") }
                        let context = "\(method) \(local ? "local" : "shared") \(Self.name(state)) + \(event) → \(Self.name(next)): \(names)"
                        #expect(ends.count <= 1, "\(context)")
                        #expect(answers.count <= 1, "\(context)")
                        // The session's own work answers nobody: it ends without a reply.
                        let own: Bool
                        switch (state, event) {
                        case (_, .due), (_, .ran(.transition)), (.persisting(.expire), _), (.persisting(.persist(reply: nil)), _): own = true
                        default: own = false
                        }
                        switch next {
                        case .answered, .dropped:
                            #expect(answers.count == 1 || own && answers.isEmpty, "\(context)")
                            #expect(ends.count == 1, "\(context)")
                        case .working, .fencing, .saving, .rendering, .persisting, .takingOver, .ready:
                            // Still under way: neither answered nor given back.
                            #expect(answers.isEmpty && ends.filter { $0 != "drop" }.isEmpty, "\(context)")
                        }
                        // A copy let go is asked about no more: only a take-over may follow a drop.
                        if let dropped = names.firstIndex(of: "drop") {
                            #expect(names[dropped...].allSatisfy { !$0.hasPrefix("ask.") || $0 == "ask.takeOver" }, "\(context)")
                        }
                        // A reply is remembered before it goes: with a shared keeper it waits, its
                        // events held, until its change is kept; a local keeper has it already.
                        if let remember = names.firstIndex(of: "remember") {
                            // Its saves announced first, once it is remembered.
                            #expect(names.dropFirst(remember + 1).first == "announce", "\(context)")
                            let after = Array(names[(remember + 2)...].prefix(2))
                            #expect(local ? after.first?.hasPrefix("reply") == true : after.first == "hold" && after.last?.hasPrefix("ask.") == true,
                                    "\(context)")
                        }
                    }
                }
            }
        }
    }
}

/// `protocol/request-states.md` against the machine: every state, event, kind of method, keeper
/// and retry flag meets its first matching row, and the machine does what that row says.
@Suite("request states table")
struct RequestStatesTableTests {
    struct Row {
        let state, event, method, keeper, confirmed, retaking, next, actions: String
    }

    static func rows() throws -> [Row] {
        let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("protocol/request-states.md")
        let text = try String(contentsOf: url, encoding: .utf8)
        guard let table = text.range(of: "## Table") else { return [] }
        return text[table.upperBound...].split(separator: "\n").compactMap { line in
            let cells = line.split(separator: "|", omittingEmptySubsequences: false).dropFirst().dropLast()
                .map { $0.trimmingCharacters(in: .whitespaces) }
            guard cells.count == 8, cells[0] != "state", !cells[0].hasPrefix("-") else { return nil }
            return Row(state: cells[0], event: cells[1], method: cells[2], keeper: cells[3], confirmed: cells[4], retaking: cells[5],
                       next: cells[6], actions: cells[7])
        }
    }

    static let unreported = RequestFlowTests.unreported
    static let failure = RequestFlowTests.failure

    /// Every kind of state the table names. A state added to `RequestState` fails to compile in
    /// `init(_:)` until it is given a kind here, and `CaseIterable` then walks its sample.
    enum StateKind: String, CaseIterable {
        case ready, working, fencingRequest = "fencing:request", fencingSave = "fencing:save", saving, rendering
        case persistingCreate = "persisting:create", persistingPersist = "persisting:persist"
        case persistingConfirm = "persisting:confirm", persistingClose = "persisting:close", persistingExpire = "persisting:expire"
        case persistingOwn = "persisting:persistOwn"
        case persistingTakeOver = "persisting:takeOver", persistingFence = "persisting:fence"
        case takingOver, answered, dropped

        init(_ state: RequestState) {
            switch state {
            case .ready: self = .ready
            case .working: self = .working
            case .fencing(.request): self = .fencingRequest
            case .fencing(.save): self = .fencingSave
            case .saving: self = .saving
            case .rendering: self = .rendering
            case .persisting(let step):
                switch step {
                case .create: self = .persistingCreate
                case .persist(reply: nil): self = .persistingOwn
                case .persist: self = .persistingPersist
                case .confirm: self = .persistingConfirm
                case .close: self = .persistingClose
                case .expire: self = .persistingExpire
                case .takeOver: self = .persistingTakeOver
                case .fence: self = .persistingFence
                }
            case .takingOver: self = .takingOver
            case .answered: self = .answered
            case .dropped: self = .dropped
            }
        }

        var sample: RequestState {
            switch self {
            case .ready: .ready
            case .working: .working
            case .fencingRequest: .fencing(.request(.documentFlatten))
            case .fencingSave: .fencing(.save(.empty))
            case .saving: .saving
            case .rendering: .rendering(RequestFlowTests.unreported)
            case .persistingCreate: .persisting(.create(reply: [1]))
            case .persistingPersist: .persisting(.persist(reply: [1]))
            case .persistingConfirm: .persisting(.confirm(reply: [1]))
            case .persistingClose: .persisting(.close(reply: [1]))
            case .persistingExpire: .persisting(.expire)
            case .persistingOwn: .persisting(.persist(reply: nil))
            case .persistingTakeOver: .persisting(.takeOver)
            case .persistingFence: .persisting(.fence(.save(.empty)))
            case .takingOver: .takingOver
            case .answered: .answered
            case .dropped: .dropped
            }
        }
    }

    /// Every kind of event the table names, down to the job outcomes and the keeper's answers;
    /// as `StateKind`, a new one is a compile error until it is walked.
    enum EventKind: String, CaseIterable {
        case dueTimer = "due:timer", dueExpiry = "due:expiry"
        case arrivedMiss = "arrived:miss", arrivedRetry = "arrived:retry", arrivedReused = "arrived:reused"
        case arrivedNotKept = "arrived:notKept", created, notHeld
        case jobStarted = "job:started", jobNotNeeded = "job:notNeeded", jobRefused = "job:refused"
        case ranReply = "ran:reply", ranSaving = "ran:saving", ranRendering = "ran:rendering"
        case ranFinished = "ran:transitionFinished", ranStale = "ran:transitionStale"
        case finishedSaved = "finished:saved", finishedFencedMoved = "finished:fencedMoved"
        case finishedFencedStore = "finished:fencedStore", finishedReply = "finished:reply", finishedPage = "finished:page"
        case finishedPageInk = "finished:pageInk", finishedImage = "finished:image", finishedStored = "finished:stored"
        case imageOmitted
        case storedKept = "stored:kept", storedLost = "stored:lost", storedFailed = "stored:failed"
        case storedTookOver = "stored:tookOver", storedNone = "stored:none"

        init(_ event: RequestEvent) {
            switch event {
            case .due(let work):
                switch work {
                case .timer: self = .dueTimer
                case .expiry: self = .dueExpiry
                }
            case .arrived(let lookup):
                switch lookup {
                case .miss: self = .arrivedMiss
                case .retry: self = .arrivedRetry
                case .reused: self = .arrivedReused
                case .notKept: self = .arrivedNotKept
                }
            case .created: self = .created
            case .notHeld: self = .notHeld
            case .job(let start):
                switch start {
                case .started: self = .jobStarted
                case .notNeeded: self = .jobNotNeeded
                case .refused: self = .jobRefused
                }
            case .ran(let ran):
                switch ran {
                case .reply: self = .ranReply
                case .saving: self = .ranSaving
                case .rendering: self = .ranRendering
                case .transition(finished: true): self = .ranFinished
                case .transition(finished: false): self = .ranStale
                }
            case .finished(let outcome):
                switch outcome {
                case .saved(.failure(.fenced(_, "sessionMoved", _)), _): self = .finishedFencedMoved
                case .saved(.failure(.fenced), _): self = .finishedFencedStore
                case .saved: self = .finishedSaved
                case .reply: self = .finishedReply
                case .page: self = .finishedPage
                case .pageInk: self = .finishedPageInk
                case .image: self = .finishedImage
                case .stored: self = .finishedStored
                }
            case .imageOmitted: self = .imageOmitted
            case .stored(let answer):
                switch answer {
                case .kept: self = .storedKept
                case .lost: self = .storedLost
                case .failed: self = .storedFailed
                case .tookOver: self = .storedTookOver
                case .none: self = .storedNone
                }
            }
        }

        var sample: RequestEvent {
            switch self {
            case .dueTimer: .due(.timer(TransitionTicket(number: 7)))
            case .dueExpiry: .due(.expiry)
            case .arrivedMiss: .arrived(.miss)
            case .arrivedRetry: .arrived(.retry(reply: [1]))
            case .arrivedReused: .arrived(.reused)
            case .arrivedNotKept: .arrived(.notKept)
            case .created: .created(reply: [1])
            case .notHeld: .notHeld
            case .jobStarted: .job(.started)
            case .jobNotNeeded: .job(.notNeeded)
            case .jobRefused: .job(.refused(RequestFlowTests.failure))
            case .ranReply: .ran(.reply([1]))
            case .ranSaving: .ran(.saving(.empty))
            case .ranRendering: .ran(.rendering(RequestFlowTests.unreported))
            case .ranFinished: .ran(.transition(finished: true))
            case .ranStale: .ran(.transition(finished: false))
            case .finishedSaved: .finished(RequestFlowTests.saved)
            case .finishedFencedMoved: .finished(.saved(.failure(.fenced(name: "d", reason: "sessionMoved", message: "moved"))))
            case .finishedFencedStore: .finished(.saved(.failure(.fenced(name: "d", reason: "sessionStore", message: "silent"))))
            case .finishedReply: .finished(.reply([1]))
            case .finishedPage: .finished(.page(.success(PageSummary(width: 1, height: 1, rotation: 0))))
            case .finishedPageInk: .finished(.pageInk(.failure(.notFound("d.pdf"))))
            case .finishedImage: .finished(.image(.success("png")))
            case .finishedStored: .finished(.stored(.kept(version: 1)))
            case .imageOmitted: .imageOmitted("busy")
            case .storedKept: .stored(.kept(version: 1))
            case .storedLost: .stored(.lost)
            case .storedFailed: .stored(.failed(RequestFlowTests.failure))
            case .storedTookOver: .stored(.tookOver(RequestFlowTests.session, answered: nil))
            case .storedNone: .stored(.none)
            }
        }
    }

    /// The table's method classes (its "Method classes" section): every method, each once.
    static func classes() throws -> [Method: String] {
        let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("protocol/request-states.md")
        let text = try String(contentsOf: url, encoding: .utf8)
        guard let start = text.range(of: "## Method classes"), let end = text.range(of: "## Table") else { return [:] }
        var classes: [Method: String] = [:]
        for line in text[start.upperBound..<end.lowerBound].split(separator: "\n") {
            let cells = line.split(separator: "|", omittingEmptySubsequences: false).dropFirst().dropLast()
                .map { $0.trimmingCharacters(in: .whitespaces) }
            guard cells.count == 2, cells[0] != "class", !cells[0].hasPrefix("-") else { continue }
            // The methods are the names in backquotes; the rest of the cell is prose.
            for (index, name) in cells[1].split(separator: "`", omittingEmptySubsequences: false).enumerated() where index % 2 == 1 {
                let method = try #require(Method(rawValue: String(name)), "\(name)")
                #expect(classes[method] == nil, "\(method.rawValue) in two classes")
                classes[method] = cells[0]
            }
        }
        return classes
    }

    static func matches(_ pattern: String, _ value: String) -> Bool {
        pattern == "*" || pattern == value || (pattern.hasSuffix(":*") && value.hasPrefix(pattern.dropLast()))
    }

    /// An action as the table writes it.
    static func cell(_ then: FollowUp) -> String {
        switch then {
        case .runWith: return "run:found"
        case .report: return "report"
        case .ask(let step): return "ask:\(RequestFlowTests.stepName(step))"
        case .finishTransition, .startJob, .run, .documentReply, .render, .save, .adopt: return RequestFlowTests.name(then)
        }
    }

    static func cell(_ action: RequestAction) -> String {
        switch action {
        case .holdEvents: return "hold"
        case .reply: return "reply"
        case .refuse(let error): return "refuse:\(error.data["reason"]?.stringValue ?? error.code.rawValue)"
        case .close(let event): return "close:\(event)"
        default: return RequestFlowTests.name(action)
        }
    }

    @Test("every method is in one class of the table")
    func everyMethodClassed() throws {
        let classes = try Self.classes()
        #expect(Set(classes.keys) == Set(Method.allCases), "unclassed: \(Set(Method.allCases).subtracting(classes.keys).map(\.rawValue))")
    }

    @Test("every combination meets a row, and the machine does what its first matching row says")
    func machineFollowsTable() throws {
        let rows = try Self.rows()
        let classes = try Self.classes()
        #expect(rows.count > 40)
        var used = Set<Int>()
        for stateKind in StateKind.allCases {
            for eventKind in EventKind.allCases {
                // Every method, not one a class: a method in the wrong class meets rows it does not follow.
                for method in Method.allCases {
                    let methodName = classes[method] ?? "unclassed"
                    for (keeper, retaking, confirmed) in [("local", false, false), ("shared", false, false), ("shared", true, false),
                                                          ("shared", false, true)] {
                        let (stateName, eventName) = (stateKind.rawValue, eventKind.rawValue)
                        let flag = retaking ? "yes" : "no", confirmedFlag = confirmed ? "yes" : "no"
                        guard let index = rows.firstIndex(where: {
                            Self.matches($0.state, stateName) && Self.matches($0.event, eventName) && Self.matches($0.method, methodName)
                                && Self.matches($0.keeper, keeper) && Self.matches($0.confirmed, confirmedFlag) && Self.matches($0.retaking, flag)
                        }) else {
                            Issue.record("no row for \(stateName) \(eventName) \(methodName) \(keeper) \(confirmedFlag) \(flag)")
                            continue
                        }
                        used.insert(index)
                        let row = rows[index]
                        let facts = RequestFlowTests.facts(method, keptAtOnce: keeper == "local", confirmedNow: confirmed, retaking: retaking)
                        let step = RequestFlow.next(stateKind.sample, eventKind.sample, facts)
                        let (next, actions) = (step.state, step.actions.map { Self.cell($0) } + [step.then].compactMap { $0.map { Self.cell($0) } })
                        let nextName = StateKind(next).rawValue
                        let cells = actions.isEmpty ? "-" : actions.joined(separator: " ")
                        #expect(nextName == row.next && cells == row.actions,
                                "\(stateName) \(eventName) \(method.rawValue) (\(methodName)) \(keeper) confirmed \(confirmedFlag) retaking \(flag): machine \(nextName) [\(cells)], row \(index + 1) \(row.next) [\(row.actions)]")
                    }
                }
            }
        }
        // A row no combination reaches says nothing: the table has none.
        #expect(used.count == rows.count, "rows never matched first: \(Set(rows.indices).subtracting(used).sorted().map { $0 + 1 })")
    }
}
