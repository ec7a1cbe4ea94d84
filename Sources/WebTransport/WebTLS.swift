import NIOSSL
import Synchronization

/// The certificate chain and key wss:// is served with (`--web-tls-cert`, `--web-tls-key`), for
/// a deployment with no proxy in front. Read again on `reload` (SIGHUP): connections accepted
/// afterwards are served with the new ones, those open keep theirs.
public final class WebTLS: Sendable {
    public let certificatePath: String
    public let keyPath: String
    private let current: Mutex<NIOSSLContext>

    /// Why the files could not be used: which, and the cause.
    public struct LoadError: Error, CustomStringConvertible {
        public let description: String
    }

    public init(certificate: String, key: String) throws(LoadError) {
        certificatePath = certificate
        keyPath = key
        current = Mutex(try Self.load(certificate: certificate, key: key))
    }

    /// Reads both files again; on failure the ones in use stay.
    public func reload() throws(LoadError) {
        let fresh = try Self.load(certificate: certificatePath, key: keyPath)
        current.withLock { $0 = fresh }
    }

    var context: NIOSSLContext { current.withLock { $0 } }

    private static func load(certificate: String, key: String) throws(LoadError) -> NIOSSLContext {
        do {
            let chain = try NIOSSLCertificate.fromPEMFile(certificate)
            guard !chain.isEmpty else { throw LoadError(description: "\(certificate): no certificate in it") }
            let privateKey = try NIOSSLPrivateKey(file: key, format: .pem)
            var configuration = TLSConfiguration.makeServerConfiguration(certificateChain: chain.map { .certificate($0) },
                                                                         privateKey: .privateKey(privateKey))
            configuration.minimumTLSVersion = .tlsv12
            return try NIOSSLContext(configuration: configuration)
        } catch let error as LoadError {
            throw error
        } catch {
            throw LoadError(description: "web TLS certificate \(certificate) and key \(key): \(error)")
        }
    }
}
