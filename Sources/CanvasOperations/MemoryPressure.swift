import Glibc
package import CanvasProtocol

/// Whether the process may take on a large reply now: its resident memory against a budget.
///
/// A reply stays in libzmq's queue until its client reads it, and nothing tells canvasd which
/// client has read what; what it can see is its own size. So large replies are the work it
/// sheds first when memory runs high, with an error that says why, before any queue can grow
/// the process without end.
package struct MemoryPressure {
    package let budget: Int
    /// What the large replies being made now will take, by estimate: they are not in the
    /// resident set yet, and a burst of them must not all pass one measurement.
    private(set) var reserved = 0
    private var lastTrim: ContinuousClock.Instant?

    package init(budget: Int) { self.budget = budget }

    /// Reserves `bytes` for a large reply, or throws `UNAVAILABLE` (reason `memory`) when the
    /// process would pass its budget. Before refusing, what the allocator holds free is given
    /// back to the system (a burst of large replies, freed, can leave the heap large until then).
    package mutating func admitLargeReply(_ what: String, bytes: Int, now: ContinuousClock.Instant) throws(ProtocolError) -> Int {
        guard let resident = Self.residentBytes() else { return 0 }
        var total = resident + reserved + bytes
        // Trimming walks the whole heap: at most once a second, or a flood of refused
        // requests would spend the loop on it.
        if total > budget, lastTrim.map({ now - $0 >= .seconds(1) }) ?? true {
            lastTrim = now
            _ = malloc_trim(0)
            total = (Self.residentBytes() ?? resident) + reserved + bytes
        }
        guard total <= budget else {
            throw ProtocolError(.unavailable, "canvasd holds \(total >> 20) MB with this reply, over its budget of \(budget >> 20) MB, much of it replies not yet read by their clients; \(what) is refused for now: try again later",
                                data: ["reason": "memory", "limit": .integer(Int64(budget))])
        }
        reserved += bytes
        return bytes
    }

    /// A reserved reply was made and handed to libzmq (or failed): it is in the resident set now.
    package mutating func release(_ bytes: Int) { reserved -= bytes }

    /// The resident set, from /proc/self/statm (its second field, in pages).
    package static func residentBytes() -> Int? {
        let descriptor = open("/proc/self/statm", O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        var buffer = [UInt8](repeating: 0, count: 128)
        let count = read(descriptor, &buffer, buffer.count)
        guard count > 0 else { return nil }
        let fields = buffer[..<count].split(separator: UInt8(ascii: " "))
        guard fields.count >= 2, let pages = Int(String(decoding: fields[1], as: UTF8.self)) else { return nil }
        return pages * sysconf(Int32(_SC_PAGESIZE))
    }
}

// glibc's malloc.h, which Swift's Glibc module does not bring in.
@_silgen_name("malloc_trim")
private func malloc_trim(_ pad: Int) -> Int32
