@testable import CanvasService
@testable import CanvasServing
import Testing

@Suite("Save schedule")
struct SaveScheduleTests {
    @Test("different documents run side by side up to the width; one document's saves run one at a time, in order")
    func perDocument() {
        var schedule = SaveSchedule<Int>(width: 2)
        #expect(schedule.submit("a.pdf", 1) == 1)
        #expect(schedule.submit("a.pdf", 2) == nil, "a second writer of a.pdf would only wait on its lock")
        #expect(schedule.submit("b.pdf", 3) == 3)
        #expect(schedule.submit("c.pdf", 4) == nil, "over the width")
        #expect(schedule.submit("a.pdf", 5) == nil)
        // b ends: the oldest waiting save whose document is free starts, a.pdf's still wait.
        #expect(schedule.finished("b.pdf").map(\.job) == [4])
        // a ends: its next save starts, not the one after it.
        #expect(schedule.finished("a.pdf").map(\.job) == [2])
        #expect(schedule.finished("c.pdf").map(\.job) == [])
        #expect(schedule.finished("a.pdf").map(\.job) == [5])
        #expect(!schedule.isIdle)
        #expect(schedule.finished("a.pdf").isEmpty)
        #expect(schedule.isIdle)
    }

    @Test("width 1 runs everything in the order it came")
    func serial() {
        var schedule = SaveSchedule<Int>(width: 1)
        #expect(schedule.submit("a.pdf", 1) == 1)
        #expect(schedule.submit("b.pdf", 2) == nil)
        #expect(schedule.submit("c.pdf", 3) == nil)
        #expect(schedule.finished("a.pdf").map(\.job) == [2])
        #expect(schedule.finished("b.pdf").map(\.job) == [3])
        #expect(schedule.finished("c.pdf").isEmpty && schedule.isIdle)
    }
}
