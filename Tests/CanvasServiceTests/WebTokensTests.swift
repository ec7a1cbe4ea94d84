import CanvasService
import CanvasServing
import Foundation
import Testing

@Suite("Web access tokens")
struct WebTokensTests {
    func file(_ text: String) throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("tokens-\(UUID().uuidString)").path
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    @Test("named and bare tokens, comments skipped; each token stands for its own owner")
    func read() throws {
        let tokens = try WebTokens(path: file("# who may use the web endpoints\nalice 0123456789abcdef0123\n\nfedcba9876543210fedc\n"))
        #expect(tokens.count == 2)
        #expect(tokens.owner(of: "0123456789abcdef0123") == "web:alice")
        // A bare token's owner is named after the SHA-256 of the whole token.
        #expect(tokens.owner(of: "fedcba9876543210fedc") == "web:sha256:66ebc374d4ade67915932d22ecab4e69974a050df3ee028181601c5b44c45c81")
        #expect(tokens.owner(of: "0123456789abcdef012") == nil)
    }

    @Test("bare tokens that start alike (every JWT starts eyJhbGci) are two owners")
    func alike() throws {
        let alice = "eyJhbGciOiJIUzI1NiJ9.alice", bob = "eyJhbGciOiJIUzI1NiJ9.bob.1"
        let tokens = try WebTokens(path: file("\(alice)\n\(bob)\n"))
        let owners = [tokens.owner(of: alice), tokens.owner(of: bob)]
        #expect(owners[0] != nil && owners[1] != nil && owners[0] != owners[1])
        #expect(tokens.owner(of: "eyJhbGciOiJIUzI1NiJ9.carol") == nil)
    }

    @Test("a reload names the tokens removed (by digest, as the connections that showed them know them)")
    func revoked() throws {
        let path = try file("alice 0123456789abcdef0123\nbob fedcba9876543210fedc\n")
        let tokens = try WebTokens(path: path)
        let bob = try #require(tokens.credential(of: "fedcba9876543210fedc"))
        #expect(bob.owner == "web:bob")
        try "alice 0123456789abcdef0123\ncarol 00001111222233334444\n".write(toFile: path, atomically: true, encoding: .utf8)
        let reloaded = try tokens.reload()
        #expect(reloaded.count == 2)
        #expect(reloaded.revoked == [bob.digest])
        #expect(tokens.owner(of: "fedcba9876543210fedc") == nil)
        #expect(tokens.owner(of: "00001111222233334444") == "web:carol")
    }

    @Test("a reload names the token rotated (same name, new token), not those left alone")
    func rotated() throws {
        let path = try file("alice 0123456789abcdef0123\nbob fedcba9876543210fedc\n")
        let tokens = try WebTokens(path: path)
        let bob = try #require(tokens.credential(of: "fedcba9876543210fedc"))
        try "alice 0123456789abcdef0123\nbob 99998888777766665555\n".write(toFile: path, atomically: true, encoding: .utf8)
        let reloaded = try tokens.reload()
        #expect(reloaded.revoked == [bob.digest])
        #expect(tokens.owner(of: "fedcba9876543210fedc") == nil)
        #expect(tokens.owner(of: "99998888777766665555") == "web:bob")
        #expect(tokens.credential(of: "99998888777766665555")?.digest != bob.digest)
        // Reading the same file again revokes nothing.
        #expect(try tokens.reload().revoked.isEmpty)
    }

    @Test("short, repeated or malformed tokens and empty files are refused with the line")
    func refused() throws {
        for text in ["alice short\n", "a 0123456789abcdef0123\nb 0123456789abcdef0123\n", "a b 0123456789abcdef0123\n", "# none\n"] {
            #expect(throws: WebTokens.LoadError.self) { try WebTokens(path: file(text)) }
        }
    }
}
