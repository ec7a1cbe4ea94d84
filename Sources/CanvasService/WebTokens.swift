import Foundation
import Synchronization

/// The access tokens that let web peers in (`--web-tokens FILE`).
///
/// A browser reaching canvasd over ws:// can offer no security mechanism (it may only ask for
/// the `ZWS2.0` subprotocol), so web peers are authenticated by the application: every request
/// and every event subscription carries a token, and what a token opens belongs to it, as what
/// a CurveZMQ key opens belongs to that key.
///
/// The file has one token per line, `NAME TOKEN` or a bare `TOKEN` (then named after its first
/// eight characters); blank lines and lines starting with `#` are skipped. It is read again on
/// SIGHUP, like the allowed keys.
public final class WebTokens: Sendable {
    public struct LoadError: Error, CustomStringConvertible {
        public let path: String
        public let reason: String
        public var description: String { "web tokens \(path): \(reason)" }
    }

    /// Shorter tokens could be guessed by trying.
    public static let minimumLength = 16

    public let path: String
    /// token → owner ("web:NAME").
    private let owners: Mutex<[String: String]>

    public init(path: String) throws(LoadError) {
        self.path = path
        owners = Mutex(try Self.read(path))
    }

    public var count: Int { owners.withLock { $0.count } }

    /// The owner a token stands for, or nil for a token not in the file.
    public func owner(of token: String) -> String? { owners.withLock { $0[token] } }

    /// Reads the file again; on failure the tokens already loaded stay in force.
    @discardableResult
    public func reload() throws(LoadError) -> Int {
        let fresh = try Self.read(path)
        owners.withLock { $0 = fresh }
        return fresh.count
    }

    private static func read(_ path: String) throws(LoadError) -> [String: String] {
        let text: String
        do {
            text = try String(contentsOfFile: path, encoding: .utf8)
        } catch {
            throw LoadError(path: path, reason: "unreadable: \(error.localizedDescription)")
        }
        var owners: [String: String] = [:]
        for (number, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let fields = line.split(whereSeparator: { $0 == " " || $0 == "\t" || $0 == "\r" })
            guard let first = fields.first, !first.hasPrefix("#") else { continue }
            guard fields.count <= 2 else { throw LoadError(path: path, reason: "line \(number + 1): expected NAME TOKEN or TOKEN") }
            let token = String(fields.last!)
            let name = fields.count == 2 ? String(first) : String(token.prefix(8))
            guard token.utf8.count >= minimumLength else {
                throw LoadError(path: path, reason: "line \(number + 1): a token needs at least \(minimumLength) characters")
            }
            guard owners[token] == nil else { throw LoadError(path: path, reason: "line \(number + 1): the token appears twice") }
            owners[token] = "web:\(name)"
        }
        guard !owners.isEmpty else { throw LoadError(path: path, reason: "no tokens") }
        return owners
    }
}
