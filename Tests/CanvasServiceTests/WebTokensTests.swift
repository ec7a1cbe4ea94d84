import CanvasService
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
        #expect(tokens.owner(of: "fedcba9876543210fedc") == "web:fedcba98")
        #expect(tokens.owner(of: "0123456789abcdef012") == nil)
    }

    @Test("short, repeated or malformed tokens and empty files are refused with the line")
    func refused() throws {
        for text in ["alice short\n", "a 0123456789abcdef0123\nb 0123456789abcdef0123\n", "a b 0123456789abcdef0123\n", "# none\n"] {
            #expect(throws: WebTokens.LoadError.self) { try WebTokens(path: file(text)) }
        }
    }
}
