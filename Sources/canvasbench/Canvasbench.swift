import ArgumentParser
import CanvasClient
import Foundation

@main
struct Canvasbench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "canvasbench",
        abstract: "Benchmarks for canvas bridge, each next to a baseline measured in the same run.",
        subcommands: [Latency.self, WebBench.self, FlattenBench.self, LoadBench.self, Echo.self, FlattenOne.self, BenchDocument.self, FlattenPhases.self, DispatchBench.self,
                      SaveCostBench.self, SessionStoreBench.self, StoreFloorBench.self, StrokeCostBench.self]
    )
}

/// The binaries built beside this one.
enum Sibling {
    static func path(_ name: String) -> String {
        URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
            .deletingLastPathComponent().appendingPathComponent(name).path
    }
}

/// A child process stopped (SIGTERM, then SIGKILL) when the benchmark is done with it.
final class Child {
    let process = Process()

    init(_ executable: String, _ arguments: [String]) throws {
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
    }

    func stop() {
        guard process.isRunning else { return }
        process.terminate()
        let deadline = Date().addingTimeInterval(3)
        while process.isRunning && Date() < deadline { usleep(10_000) }
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
    }

    deinit { stop() }
}

/// Waits for the canvasd `client` talks to (`name`, for the error) to answer `hello`: 5 s at most.
func waitUntilServing(_ client: CanvasClient, name: String = "canvasd") throws {
    for _ in 0..<100 {
        if case .success? = try? client.call("hello") { return }
        usleep(50_000)
    }
    throw ValidationError("\(name) did not answer")
}

/// Summary statistics of a set of samples.
struct Stats {
    let sorted: [Double]
    init(_ samples: [Double]) { sorted = samples.sorted() }
    func percentile(_ p: Double) -> Double {
        guard !sorted.isEmpty else { return .nan }
        return sorted[min(sorted.count - 1, Int((Double(sorted.count) * p / 100).rounded(.down)))]
    }
    var median: Double { percentile(50) }
}

func format(_ value: Double, _ digits: Int = 1) -> String { String(format: "%.\(digits)f", value) }

extension Duration {
    var seconds: Double { Double(components.seconds) + Double(components.attoseconds) / 1e18 }
    var microseconds: Double { Double(components.seconds) * 1e6 + Double(components.attoseconds) / 1e12 }
}

/// A process's resident memory now and at its peak, from /proc, in MB.
enum Memory {
    static func of(_ pid: Int32) -> (rss: Double, peak: Double) {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return (.nan, .nan) }
        func field(_ name: String) -> Double {
            guard let line = text.split(separator: "\n").first(where: { $0.hasPrefix(name + ":") }),
                  let kilobytes = Double(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "")
            else { return .nan }
            return kilobytes / 1024
        }
        return (field("VmRSS"), field("VmHWM"))
    }
}

/// CPU time a process has used so far, by thread (user plus system, from /proc), so a benchmark
/// can say which thread a request's cost falls on: the serving thread or libzmq's I/O thread.
struct ThreadTimes {
    /// Microseconds by thread name; threads of one name (libzmq's `ZMQbg/IO/0`…) add up.
    var microsecondsByName: [String: Double] = [:]

    static func of(_ pid: Int32) -> ThreadTimes {
        var times = ThreadTimes()
        let ticks = Double(sysconf(Int32(_SC_CLK_TCK)))
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? []
        for task in tasks {
            guard let stat = try? String(contentsOfFile: "/proc/\(pid)/task/\(task)/stat", encoding: .utf8),
                  let open = stat.firstIndex(of: "("), let close = stat.lastIndex(of: ")") else { continue }
            let name = String(stat[stat.index(after: open)..<close])
            // After the name: state is field 3, utime field 14, stime field 15.
            let fields = stat[stat.index(close, offsetBy: 2)...].split(separator: " ")
            guard fields.count > 12, let user = Double(fields[11]), let system = Double(fields[12]) else { continue }
            times.microsecondsByName[name, default: 0] += (user + system) / ticks * 1e6
        }
        return times
    }

    static func - (later: ThreadTimes, earlier: ThreadTimes) -> ThreadTimes {
        ThreadTimes(microsecondsByName: later.microsecondsByName.reduce(into: [:]) { difference, thread in
            difference[thread.key] = thread.value - (earlier.microsecondsByName[thread.key] ?? 0)
        })
    }

    static func + (one: ThreadTimes, other: ThreadTimes) -> ThreadTimes {
        ThreadTimes(microsecondsByName: one.microsecondsByName.merging(other.microsecondsByName, uniquingKeysWith: +))
    }
}
