import ArgumentParser
import CanvasClient
import Foundation
import ZeroMQ

struct Keygen: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Write a CurveZMQ key pair: NAME.key (secret, mode 600) and NAME.pub (give this one away).",
        discussion: """
            For the server: canvasd --curve-secret-key server.key, and clients get server.pub.
            For a client: copy client.pub into the server's --allowed-keys folder and connect with
            --client-key client.key --server-key server.pub.
            """)
    @Argument(help: "The path without extension: NAME.key and NAME.pub are written.") var name: String
    @Flag(help: "Replace existing files.") var force = false

    func run() throws {
        let secretPath = name + ".key", publicPath = name + ".pub"
        if !force {
            for path in [secretPath, publicPath] where FileManager.default.fileExists(atPath: path) {
                throw ValidationError("\(path) exists; --force replaces it")
            }
        }
        let pair = try CurveKeyPair.generate()
        // The secret file is created with mode 600 from the start, never readable by others.
        try write(CurveKeyFile.secretText(pair), to: secretPath, mode: 0o600)
        try write(CurveKeyFile.publicText(pair.publicKey), to: publicPath, mode: 0o644)
        print(pair.publicKey.z85)
    }

    private func write(_ text: String, to path: String, mode: mode_t) throws {
        unlink(path)
        let descriptor = open(path, O_WRONLY | O_CREAT | O_EXCL, mode)
        guard descriptor >= 0 else { throw ValidationError("\(path): \(String(cString: strerror(errno)))") }
        defer { close(descriptor) }
        let bytes = Array(text.utf8)
        guard bytes.withUnsafeBytes({ Foundation.write(descriptor, $0.baseAddress, $0.count) }) == bytes.count else {
            throw ValidationError("\(path): \(String(cString: strerror(errno)))")
        }
    }
}
