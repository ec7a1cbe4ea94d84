import ArgumentParser
import Foundation
import SessionStore

/// The floor under a changing request of a shared session: a bare client's round trip of the
/// store's own write script (a delta and the request's answer, as canvasd sends them), one at
/// a time, with nothing else around it. A request through canvasd with `--session-store` cannot
/// be faster than its round trip without the store plus this; `make bench-cluster` prints the
/// ratio to that sum.
struct StoreFloorBench: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "store-floor",
                                                    abstract: "A bare client's round trip of the session store's write script.")

    @Option(help: "The store: redis://host:port/db.") var sessionStore: String
    @Option(help: "Writes, one after another.") var requests = 3_000
    @Option(help: "Bytes each change adds to the session (a stroke of a few dozen points is a few hundred).") var changeBytes = 300
    @Option(help: "Replicas each write waits for (Redis WAIT), as canvasd's --session-store-replicas.") var replicas = 0

    func run() throws {
        let store = try SessionSnapshotStore(url: sessionStore, instance: "floor-\(getpid())", ttl: .seconds(60), replicas: replicas)
        let session = "floor-\(UInt64.random(in: 0...UInt64.max))"
        // Snapshots that grow by one change each, and the deltas between them, made before the
        // clock starts: what is timed is the script's round trip alone.
        var generator = SystemRandomNumberGenerator()
        var snapshot = (0..<4_096).map { _ in UInt8.random(in: 32...126, using: &generator) }
        guard try store.create(session, owner: nil, snapshot: snapshot) else { throw ValidationError("session id taken") }
        var changes: [(delta: [UInt8], whole: [UInt8])] = []
        for index in 0..<requests {
            let next = snapshot + (0..<changeBytes).map { _ in UInt8.random(in: 32...126, using: &generator) }
            changes.append((SnapshotDelta.make(from: snapshot, to: next, version: UInt64(index) + 2), next))
            snapshot = next
        }
        var samples: [Double] = [], wholes = 0
        samples.reserveCapacity(requests)
        for (index, change) in changes.enumerated() {
            let expected = UInt64(index) + 1
            let answer = SessionSnapshotStore.Answer(key: Array("r\(index)".utf8),
                                                     entry: Array(#"{"id":\#(index),"result":{"changed":true,"canUndo":true,"canRedo":false}}"#.utf8))
            let started = ContinuousClock.now
            var outcome = try store.write(session, .delta(change.delta), expected: expected, answering: answer)
            if outcome == .wholeNeeded {
                // The store asks for the whole now and then; canvasd then writes it, so does this.
                outcome = try store.write(session, .whole(change.whole), expected: expected, answering: answer)
                wholes += 1
            }
            samples.append((ContinuousClock.now - started).microseconds)
            guard outcome == .written(version: expected + 1) else { throw ValidationError("write \(index + 1): \(outcome)") }
        }
        _ = try store.remove(session)
        let stats = Stats(samples)
        print("store floor: \(requests) writes of the session store's script, one at a time, \(changeBytes)-byte changes"
              + (wholes > 0 ? " (\(wholes) written whole when the store asked)" : ""))
        print("  latency µs       p50       p90       p99       max")
        print("  script         " + [50.0, 90, 99, 100].map {
            let figure = format(stats.percentile($0), 0)
            return String(repeating: " ", count: max(0, 10 - figure.count)) + figure
        }.joined())
    }
}
