import CanvasCore
@testable import DocumentStore
import Foundation
import Logging
import Synchronization
import TestSupport
import Testing

/// Work nobody waits on fails no save, and is never silent (issue 44, item 6): before, a prune
/// that failed was `catch {}` and nothing anywhere said so.
@Suite("Housekeeping failures")
struct HousekeepingTests {
    /// What a store told of its background work.
    final class Told: Sendable {
        let works = Mutex<[Housekeeping.Work]>([])
        var housekeeping: Housekeeping {
            var logger = Logger(label: "test.housekeeping")
            logger.logLevel = .critical
            return Housekeeping(logger: logger, counted: { work in self.works.withLock { $0.append(work) } })
        }
    }

    /// `chattr` (e2fsprogs, in `make`'s packages) sets a file immutable: not even root may cut
    /// it, as a file on a read-only or failing disk would refuse.
    static func immutable(_ url: URL, _ on: Bool) throws {
        let chattr = Process()
        chattr.executableURL = URL(fileURLWithPath: "/usr/bin/chattr")
        chattr.arguments = [on ? "+i" : "-i", url.path]
        try chattr.run()
        chattr.waitUntilExit()
        try #require(chattr.terminationStatus == 0, "chattr \(on ? "+i" : "-i") \(url.path)")
    }

    @Test("a prune that cannot cut a line file fails nothing, and is told once as a prune failure")
    func pruneFailureTold() throws {
        let folder = try freshFolder("housekeeping-prune")
        let url = folder.appendingPathComponent("d.pdf")
        try Data(HistoryBoundsTests.onePage(0)).write(to: url)
        let told = Told()
        let store = try DocumentStore(folder: folder, keepRevisions: 2, housekeeping: told.housekeeping)
        // Revision 2 continues revision 1's line: once 2 is pruned, the line is cut back to 1.
        _ = try store.flatten("d.pdf", page: 0, drawing: Drawing(strokes: [try dot(20, 20)]))
        #expect(told.works.withLock { $0 }.isEmpty)
        let line = historyFolder(folder, "d.pdf").appendingPathComponent(RevisionHistory.lineName(1))
        try Self.immutable(line, true)
        defer { try? Self.immutable(line, false) }
        // Another program's write, taken in as revision 3 (a line of its own): 2 is pruned, and
        // its line cannot be cut.
        usleep(2_000)
        try Data(HistoryBoundsTests.onePage(5)).write(to: url)
        _ = try store.info("d.pdf")
        #expect(told.works.withLock { $0 } == [.prune], "\(told.works.withLock { $0 })")
        #expect(try store.revisions("d.pdf").map(\.revision) == [1, 3])
        try Self.immutable(line, false)
        // The next change prunes what is left to prune, and tells of nothing more.
        _ = try store.flatten("d.pdf", page: 0, drawing: Drawing(strokes: [try dot(30, 30)]))
        #expect(told.works.withLock { $0 } == [.prune])
        #expect(try store.revisions("d.pdf").map(\.revision) == [1, 4])
        // And the line is cut back to revision 1, as the failed prune would have.
        #expect(try FileManager.default.attributesOfItem(atPath: line.path)[.size] as? Int == HistoryBoundsTests.onePage(0).count)
    }
}
