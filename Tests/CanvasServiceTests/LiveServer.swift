import CanvasClient
import CanvasProtocol
import Foundation
import ZeroMQ

/// A real canvasd process on ipc:// endpoints in a fresh folder, stopped when released.
// Every field is set once in init; the only later calls (stop) are Process calls, which are thread-safe.
final class LiveServer: @unchecked Sendable {
    let process = Process()
    let folder: URL
    let endpoint: String
    let events: String
    let log: URL

    /// The canvasd built beside this test binary.
    static var executable: URL {
        URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
            .deletingLastPathComponent().appendingPathComponent("canvasd")
    }

    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// Keys of an allowed client, for a server started with CurveZMQ options.
    let curve: CurveCredentials?

    init(arguments: [String] = [], endpoint: String? = nil, curve: CurveCredentials? = nil,
         folder existing: URL? = nil) throws {
        self.curve = curve
        folder = existing ?? URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("canvasd-\(UInt32.random(in: 0...UInt32.max))")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        self.endpoint = endpoint ?? "ipc://\(folder.path)/requests"
        events = "ipc://\(folder.path)/events"
        log = folder.appendingPathComponent("canvasd.log")
        _ = FileManager.default.createFile(atPath: log.path, contents: nil)
        process.executableURL = Self.executable
        process.arguments = ["--endpoint", self.endpoint, "--events", events, "--documents", folder.path] + arguments
        // Nothing of the server's goes to the test runner's own output, which a lingering child
        // would otherwise hold open.
        process.standardError = try FileHandle(forWritingTo: log)
        process.standardOutput = process.standardError
        try process.run()
        try waitUntilServing()
    }

    private func waitUntilServing() throws {
        let client = try CanvasClient(endpoint: endpoint, timeoutMilliseconds: 200, curve: curve)
        for _ in 0..<50 {
            if case .success? = try? client.call("hello") { return }
            guard process.isRunning else { break }
        }
        throw ServerError.notServing(logText)
    }

    enum ServerError: Error { case notServing(String) }

    var logText: String { (try? String(contentsOf: log, encoding: .utf8)) ?? "" }

    func client(timeoutMilliseconds: Int32 = 5_000, curve: CurveCredentials? = nil) throws -> CanvasClient {
        try CanvasClient(endpoint: endpoint, timeoutMilliseconds: timeoutMilliseconds, curve: curve ?? self.curve)
    }

    /// Stops with SIGTERM and returns the exit status. A server that has not stopped after
    /// five seconds is killed, so a broken shutdown fails its test instead of hanging the run.
    @discardableResult
    func stop() -> Int32 {
        if process.isRunning {
            process.terminate()
            let deadline = Date().addingTimeInterval(5)
            while process.isRunning && Date() < deadline { usleep(10_000) }
            if process.isRunning {
                kill(process.processIdentifier, SIGKILL)
                process.waitUntilExit()
                return -1
            }
        }
        return process.terminationStatus
    }

    deinit {
        stop()
        try? FileManager.default.removeItem(at: folder)
    }
}

/// A subscriber that has seen its subscription take effect: slow-joiner safe.
func subscribe(_ server: LiveServer, prefix: String = "") throws -> EventSubscriber {
    let subscriber = try EventSubscriber(endpoint: server.events, prefix: prefix)
    _ = try subscriber.next(timeoutMilliseconds: 200)
    return subscriber
}

extension Result where Success == [String: JSONValue], Failure == ProtocolError {
    var value: [String: JSONValue]? { if case .success(let v) = self { v } else { nil } }
    var error: ProtocolError? { if case .failure(let e) = self { e } else { nil } }
}
