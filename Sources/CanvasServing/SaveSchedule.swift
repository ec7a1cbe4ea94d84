import Foundation
import Synchronization

/// Which saves may run now: one at a time per document (its writer lock would make a second
/// wait anyway, holding a worker), at most `width` at once (one save's memory times `width` is
/// what saves take), the others in the order they came.
///
/// Pure: it decides, the `SaveRunner` runs.
struct SaveSchedule<Job> {
    let width: Int
    private(set) var running: Set<String> = []
    private var waiting: [(document: String, job: Job)] = []

    init(width: Int) { self.width = max(1, width) }

    var isIdle: Bool { running.isEmpty && waiting.isEmpty }

    /// A save for `document` came: the job to start now, or nil when it waits.
    mutating func submit(_ document: String, _ job: Job) -> Job? {
        guard running.count < width, !running.contains(document) else {
            waiting.append((document, job))
            return nil
        }
        running.insert(document)
        return job
    }

    /// A save of `document` ended: the jobs that may start now, each with its document.
    mutating func finished(_ document: String) -> [(document: String, job: Job)] {
        running.remove(document)
        var started: [(document: String, job: Job)] = []
        var index = 0
        while running.count < width, index < waiting.count {
            let candidate = waiting[index]
            if running.contains(candidate.document) {
                index += 1
                continue
            }
            waiting.remove(at: index)
            running.insert(candidate.document)
            started.append(candidate)
        }
        return started
    }
}

/// Runs saves on worker threads as `SaveSchedule` allows, and calls `done` after each.
///
/// Each job gets a thread of its own with a large stack, not one of libdispatch's: qpdf walks
/// some structures recursively, and a PDF made deep enough overflowed a dispatch worker's stack
/// (SIGSEGV). The stack is address space, not memory, until it is used; at most `width` jobs run.
final class SaveRunner: Sendable {
    /// Room for qpdf's deepest walks (its parser stops at 500 levels of nesting, the store at
    /// 1,024 levels of page tree) many times over.
    static let stackBytes = 64 << 20
    typealias Job = @Sendable () -> Void
    private let schedule: Mutex<SaveSchedule<Job>>
    private let group = DispatchGroup()
    private let done: @Sendable () -> Void

    init(width: Int, done: @escaping @Sendable () -> Void) {
        schedule = Mutex(SaveSchedule(width: width))
        self.done = done
    }

    func submit(_ document: String, _ job: @escaping Job) {
        group.enter()
        if let start = schedule.withLock({ $0.submit(document, job) }) { run(document, start) }
    }

    private func run(_ document: String, _ job: @escaping Job) {
        let thread = Thread { [self] in
            job()
            let next = schedule.withLock { $0.finished(document) }
            done()
            group.leave()
            for (document, job) in next { run(document, job) }
        }
        thread.stackSize = Self.stackBytes
        thread.start()
    }

    /// Waits for every save submitted so far to finish.
    func wait() { group.wait() }
}
