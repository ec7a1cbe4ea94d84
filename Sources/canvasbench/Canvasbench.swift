import ArgumentParser
import Foundation

@main
struct Canvasbench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "canvasbench",
        abstract: "Benchmarks for canvas bridge, each next to a baseline measured in the same run.",
        subcommands: [Latency.self, FlattenBench.self, LoadBench.self, Echo.self, FlattenOne.self, DispatchBench.self]
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
