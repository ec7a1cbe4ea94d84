import Foundation
import Synchronization
public import ZeroMQ

/// The client public keys allowed in: a key file, or a folder whose every visible file holds
/// keys (one client per file, as `canvasctl keygen` writes them).
///
/// The ZAP handler's thread reads it while the serving loop may reload it (on SIGHUP), so the
/// set sits behind a lock.
public final class AllowedKeys: Sendable {
    public struct LoadError: Error, CustomStringConvertible {
        public let path: String
        public let reason: String
        public var description: String { "allowed keys \(path): \(reason)" }
    }

    public let path: String
    private let keys: Mutex<Set<CurveKey>>

    public init(path: String) throws(LoadError) {
        self.path = path
        keys = Mutex(try Self.read(path))
    }

    public var count: Int { keys.withLock { $0.count } }

    public func contains(_ key: CurveKey) -> Bool { keys.withLock { $0.contains(key) } }

    /// Reads the path again; on failure the keys already loaded stay in force.
    @discardableResult
    public func reload() throws(LoadError) -> Int {
        let fresh = try Self.read(path)
        keys.withLock { $0 = fresh }
        return fresh.count
    }

    private static func read(_ path: String) throws(LoadError) -> Set<CurveKey> {
        var isFolder: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isFolder) else {
            throw LoadError(path: path, reason: "no such file or folder")
        }
        var files = [path]
        if isFolder.boolValue {
            do {
                files = try FileManager.default.contentsOfDirectory(atPath: path)
                    .filter { !$0.hasPrefix(".") }.sorted()
                    .map { (path as NSString).appendingPathComponent($0) }
            } catch {
                throw LoadError(path: path, reason: "unreadable folder: \(error.localizedDescription)")
            }
        }
        var keys = Set<CurveKey>()
        for file in files {
            var isSubfolder: ObjCBool = false
            if FileManager.default.fileExists(atPath: file, isDirectory: &isSubfolder), isSubfolder.boolValue { continue }
            do {
                keys.formUnion(try CurveKeyFile.read(file).publicKeys)
            } catch {
                throw LoadError(path: file, reason: error.reason)
            }
        }
        return keys
    }
}

/// How the service lets clients in.
public enum ServiceSecurity: Sendable {
    /// No authentication: anyone who reaches the endpoints is served, so they must be local.
    case loopbackOnly
    /// CurveZMQ on both sockets; only the allowed client keys get through the handshake, and
    /// each client's sessions and events are its own.
    case curve(server: CurveKeyPair, allowed: AllowedKeys)

    /// Whether `endpoint` can only be reached from this machine.
    public static func isLocal(_ endpoint: String) -> Bool {
        guard let schemeEnd = endpoint.range(of: "://") else { return false }
        let scheme = endpoint[..<schemeEnd.lowerBound].lowercased()
        let rest = endpoint[schemeEnd.upperBound...]
        switch scheme {
        case "ipc", "inproc":
            return true
        case "tcp", "ws", "wss":
            // host:port, [v6]:port, or for ws:// and wss:// host:port/path.
            let authority = rest.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false).first.map(String.init) ?? ""
            let host: Substring
            if authority.hasPrefix("["), let close = authority.firstIndex(of: "]") {
                host = authority[authority.index(after: authority.startIndex)..<close]
            } else {
                host = authority.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
            }
            if host == "localhost" || host == "::1" || host == "lo" { return true }
            let octets = host.split(separator: ".", omittingEmptySubsequences: false)
            return octets.count == 4 && octets.first == "127" && octets.allSatisfy { UInt8($0) != nil }
        default:
            return false
        }
    }
}
