import Dispatch
import Foundation
import Synchronization

/// The one thread that talks to the session store, so that the request loop never waits on it.
///
/// Work runs in the order it was submitted (a session's writes must land in order, and a
/// hiredis connection is one thread's), and `done` is called once after each batch that was
/// waiting, not after each piece of work: under load many requests' writes are answered with
/// one wake-up of the loop.
package final class StoreLine: Sendable {
    package typealias Work = @Sendable () -> Void
    private struct Queue {
        var work: [Work] = []
        var stopping = false
        /// Submitted and not yet finished, for `wait`.
        var unfinished = 0
    }

    private let queue = Mutex(Queue())
    private let signal = DispatchSemaphore(value: 0)
    private let done: @Sendable () -> Void

    package init(done: @escaping @Sendable () -> Void) {
        self.done = done
        let thread = Thread { [self] in serve() }
        thread.name = "canvasd-store"
        thread.start()
    }

    package func submit(_ work: @escaping Work) {
        queue.withLock {
            $0.work.append(work)
            $0.unfinished += 1
        }
        signal.signal()
    }

    private func serve() {
        while true {
            signal.wait()
            let (batch, stopping) = queue.withLock { queue in
                defer { queue.work.removeAll(keepingCapacity: true) }
                return (queue.work, queue.stopping)
            }
            if batch.isEmpty {
                if stopping { return }
                continue
            }
            for work in batch { work() }
            queue.withLock { $0.unfinished -= batch.count }
            done()
        }
    }

    /// Waits until everything submitted so far has run (at shutdown, so a poll is enough).
    package func wait() {
        while queue.withLock({ $0.unfinished > 0 }) { usleep(1_000) }
    }

    /// Lets the thread end once its queue is empty.
    package func stop() {
        queue.withLock { $0.stopping = true }
        signal.signal()
    }
}
