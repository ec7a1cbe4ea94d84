import DocumentStore
import Foundation
import Synchronization
public import WebTransport

/// The access tokens that let web peers in (`--web-tokens FILE`).
///
/// A browser reaching canvasd over ws:// can offer no security mechanism (it may only ask for
/// the `ZWS2.0` subprotocol), so web peers are authenticated by the application: every request
/// and every event subscription carries a token, and what a token opens belongs to it, as what
/// a CurveZMQ key opens belongs to that key.
///
/// The file has one token per line, `NAME TOKEN` or a bare `TOKEN`; blank lines and lines
/// starting with `#` are skipped. A bare token's owner is named after the SHA-256 of the whole
/// token: two tokens are always two owners, however alike they start (JWTs all begin
/// `eyJhbGci`), and the owner's name, which logs and the session store see, gives nothing of
/// the token away. It is read again on SIGHUP, like the allowed keys.
public final class WebTokens: Sendable {
    public struct LoadError: Error, CustomStringConvertible {
        public let path: String
        public let reason: String
        public var description: String { "web tokens \(path): \(reason)" }
    }

    /// What a reload changed.
    public struct Reload: Sendable {
        public let count: Int
        /// Tokens gone, removed or rotated (the same name with a new token), by digest: the
        /// connections that showed one must end, and their subscriptions with them.
        public let revoked: Set<[UInt8]>
    }

    /// Shorter tokens could be guessed by trying.
    public static let minimumLength = 16

    public let path: String
    /// Each token's SHA-256 and its owner ("web:NAME").
    private let entries: Mutex<[(digest: [UInt8], owner: String)]>

    public init(path: String) throws(LoadError) {
        self.path = path
        entries = Mutex(try Self.read(path))
    }

    public var count: Int { entries.withLock { $0.count } }

    /// The owner a token stands for, or nil for a token not in the file. Every known token's
    /// digest is compared in full, with no early exit, so the time taken says nothing about
    /// how much of a guess was right.
    public func owner(of token: String) -> String? { credential(of: token)?.owner }

    /// What a token stands for (its owner and digest), or nil for a token not in the file.
    public func credential(of token: String) -> WebCredential? {
        let candidate = Self.digest(token)
        return entries.withLock { entries in
            var found: WebCredential?
            for entry in entries {
                var difference: UInt8 = 0
                for index in 0..<candidate.count { difference |= candidate[index] ^ entry.digest[index] }
                if difference == 0 { found = WebCredential(owner: entry.owner, digest: entry.digest) }
            }
            return found
        }
    }

    /// Reads the file again; on failure the tokens already loaded stay in force.
    @discardableResult
    public func reload() throws(LoadError) -> Reload {
        let fresh = try Self.read(path)
        let before = entries.withLock { entries in
            defer { entries = fresh }
            return entries
        }
        // By token, not by name: an entry whose token no longer stands for the same owner is
        // revoked, whether its name is gone or now has another token.
        let kept = Set(fresh.map { Self.key($0.digest, $0.owner) })
        let revoked = Set(before.filter { !kept.contains(Self.key($0.digest, $0.owner)) }.map(\.digest))
        return Reload(count: fresh.count, revoked: revoked)
    }

    private static func read(_ path: String) throws(LoadError) -> [(digest: [UInt8], owner: String)] {
        let text: String
        do {
            text = try String(contentsOfFile: path, encoding: .utf8)
        } catch {
            throw LoadError(path: path, reason: "unreadable: \(error.localizedDescription)")
        }
        var entries: [(digest: [UInt8], owner: String)] = []
        var seen: Set<[UInt8]> = []
        for (number, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let fields = line.split(whereSeparator: { $0 == " " || $0 == "\t" || $0 == "\r" })
            guard let first = fields.first, !first.hasPrefix("#") else { continue }
            guard fields.count <= 2 else { throw LoadError(path: path, reason: "line \(number + 1): expected NAME TOKEN or TOKEN") }
            let token = String(fields.last!)
            guard token.utf8.count >= minimumLength else {
                throw LoadError(path: path, reason: "line \(number + 1): a token needs at least \(minimumLength) characters")
            }
            let digest = Self.digest(token)
            guard seen.insert(digest).inserted else { throw LoadError(path: path, reason: "line \(number + 1): the token appears twice") }
            let name = fields.count == 2 ? String(first) : "sha256:" + String(decoding: digest, as: UTF8.self)
            entries.append((digest, "web:\(name)"))
        }
        guard !entries.isEmpty else { throw LoadError(path: path, reason: "no tokens") }
        return entries
    }

    private static func key(_ digest: [UInt8], _ owner: String) -> String {
        String(decoding: digest, as: UTF8.self) + " " + owner
    }

    /// The token's SHA-256 as lowercase hex: what is kept and compared, never the token.
    private static func digest(_ token: String) -> [UInt8] {
        Array(DocumentStore.sha256(Array(token.utf8)).utf8)
    }
}
