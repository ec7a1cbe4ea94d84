internal import CZeroMQ
import Foundation

/// A CurveZMQ key: 32 bytes, written as 40 Z85 characters.
public struct CurveKey: Hashable, Sendable, CustomStringConvertible {
    public let bytes: [UInt8]

    public init?(bytes: [UInt8]) {
        guard bytes.count == 32 else { return nil }
        self.bytes = bytes
    }

    /// Reads 40 Z85 characters; anything else is nil.
    public init?(z85 text: String) {
        let characters = Array(text.utf8)
        guard characters.count == 40 else { return nil }
        var decoded = [UInt8](repeating: 0, count: 32)
        let ok = (characters + [0]).withUnsafeBufferPointer { source in
            source.withMemoryRebound(to: CChar.self) { zmq_z85_decode(&decoded, $0.baseAddress) != nil }
        }
        guard ok else { return nil }
        bytes = decoded
    }

    public var z85: String {
        var text = [CChar](repeating: 0, count: 41)
        _ = zmq_z85_encode(&text, bytes, bytes.count)
        return String(decoding: text.prefix(40).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// The Z85 text: a public key is no secret, and this is how people compare keys.
    public var description: String { z85 }
}

/// A CurveZMQ key pair.
public struct CurveKeyPair: Sendable {
    public let publicKey: CurveKey
    public let secretKey: CurveKey

    public init(publicKey: CurveKey, secretKey: CurveKey) {
        self.publicKey = publicKey
        self.secretKey = secretKey
    }

    /// A new random pair from libzmq (libsodium underneath).
    public static func generate() throws(ZMQError) -> CurveKeyPair {
        var publicText = [CChar](repeating: 0, count: 41)
        var secretText = [CChar](repeating: 0, count: 41)
        guard zmq_curve_keypair(&publicText, &secretText) == 0 else { throw ZMQError("zmq_curve_keypair") }
        func key(_ text: [CChar]) -> CurveKey {
            CurveKey(z85: String(decoding: text.prefix(40).map { UInt8(bitPattern: $0) }, as: UTF8.self))!
        }
        return CurveKeyPair(publicKey: key(publicText), secretKey: key(secretText))
    }

    /// The pair of a secret key (its public half is derived from it).
    public init(secretKey: CurveKey) throws(ZMQError) {
        var publicText = [CChar](repeating: 0, count: 41)
        let secret = secretKey.z85
        guard zmq_curve_public(&publicText, secret) == 0 else { throw ZMQError("zmq_curve_public") }
        self.init(publicKey: CurveKey(z85: String(decoding: publicText.prefix(40).map { UInt8(bitPattern: $0) }, as: UTF8.self))!,
                  secretKey: secretKey)
    }
}

/// The text of key files: `public-key = "…"` and `secret-key = "…"` lines, as CZMQ's
/// certificate files have them, so keys made by other ZeroMQ tools can be used as they are.
/// A line holding nothing but 40 Z85 characters is a public key too (lists of allowed keys).
public enum CurveKeyFile {
    public struct Contents: Sendable {
        public var publicKeys: [CurveKey] = []
        public var secretKeys: [CurveKey] = []
    }

    public struct FormatError: Error, CustomStringConvertible, Sendable {
        public let line: Int
        public let reason: String
        public var description: String { "line \(line): \(reason)" }
    }

    public static func parse(_ text: String) throws(FormatError) -> Contents {
        var contents = Contents()
        for (index, raw) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let line = raw.trimmingWhitespace()
            // A bare key first: '#' and '=' are both Z85 characters, so a key line may look like
            // a comment or an assignment. Anything 40 characters long that decodes is a key.
            if let key = CurveKey(z85: line) {
                contents.publicKeys.append(key)
                continue
            }
            if line.isEmpty || line.hasPrefix("#") { continue }
            if let equals = line.firstIndex(of: "=") {
                let name = line[..<equals].trimmingWhitespace()
                var value = line[line.index(after: equals)...].trimmingWhitespace()
                guard name == "public-key" || name == "secret-key" else { continue }   // other zcert metadata
                if value.count >= 2, value.hasPrefix("\""), value.hasSuffix("\"") { value = String(value.dropFirst().dropLast()) }
                guard let key = CurveKey(z85: value) else {
                    throw FormatError(line: index + 1, reason: "\(name) is not 40 Z85 characters")
                }
                if name == "public-key" { contents.publicKeys.append(key) } else { contents.secretKeys.append(key) }
            } else if line.contains(where: { $0 == " " || $0 == "\t" }) || line.count == 40 {
                throw FormatError(line: index + 1, reason: "neither a key nor `name = \"value\"`")
            }
            // Anything else is a zcert section header ("metadata", "curve"): skipped.
        }
        return contents
    }

    /// A file that could not be used as a key file, with why.
    public struct ReadError: Error, CustomStringConvertible, Sendable {
        public let path: String
        public let reason: String
        public var description: String { "\(path): \(reason)" }
    }

    public static func read(_ path: String) throws(ReadError) -> Contents {
        guard let data = FileManager.default.contents(atPath: path) else { throw ReadError(path: path, reason: "unreadable") }
        do {
            return try parse(String(decoding: data, as: UTF8.self))
        } catch {
            throw ReadError(path: path, reason: error.description)
        }
    }

    /// The key pair of a secret file (keygen's, or a CZMQ secret certificate); the public half
    /// is derived from the secret one, so a mismatched file cannot mislead.
    public static func keyPair(at path: String) throws(ReadError) -> CurveKeyPair {
        guard let secret = try read(path).secretKeys.first else {
            throw ReadError(path: path, reason: "no secret-key line (is it a .pub file?)")
        }
        do {
            return try CurveKeyPair(secretKey: secret)
        } catch {
            throw ReadError(path: path, reason: error.description)
        }
    }

    /// A public key given as 40 Z85 characters, or the first one of a key file.
    public static func publicKey(_ pathOrKey: String) throws(ReadError) -> CurveKey {
        if let key = CurveKey(z85: pathOrKey), !FileManager.default.fileExists(atPath: pathOrKey) { return key }
        let contents = try read(pathOrKey)
        if let key = contents.publicKeys.first { return key }
        if let secret = contents.secretKeys.first, let pair = try? CurveKeyPair(secretKey: secret) { return pair.publicKey }
        throw ReadError(path: pathOrKey, reason: "no public-key line")
    }

    /// The text of a key pair's file, secret included.
    public static func secretText(_ pair: CurveKeyPair) -> String {
        """
        # canvas bridge CurveZMQ key pair. Keep this file secret: whoever has it is this client
        # (or this server). Give only the .pub file away.
        curve
            public-key = "\(pair.publicKey.z85)"
            secret-key = "\(pair.secretKey.z85)"

        """
    }

    /// The text of a public key's file, for a server's folder of allowed keys or a client's
    /// `--server-key`.
    public static func publicText(_ key: CurveKey) -> String {
        """
        # canvas bridge CurveZMQ public key.
        curve
            public-key = "\(key.z85)"

        """
    }
}

extension StringProtocol {
    fileprivate func trimmingWhitespace() -> String {
        let scalars = unicodeScalars
        guard let first = scalars.firstIndex(where: { !$0.properties.isWhitespace }) else { return "" }
        let last = scalars.lastIndex(where: { !$0.properties.isWhitespace })!
        var result = String.UnicodeScalarView()
        result.append(contentsOf: scalars[first...last])
        return String(result)
    }
}
