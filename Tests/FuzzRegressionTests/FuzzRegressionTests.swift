import Foundation
import FuzzTargets
import Testing

/// Every input saved under Inputs/<target>/ (crashes libFuzzer found, once fixed, and inputs
/// picked by hand) is run through its target again. A target traps on a broken invariant, so
/// a regression fails this suite by crashing it, as it crashed the fuzzer. Serialized: the
/// targets share one document folder, as they do in the fuzzer's single thread.
@Suite("fuzz regressions", .serialized)
struct FuzzRegressionTests {
    static let inputs = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Inputs")

    static func files(_ target: String) -> [String] {
        let folder = inputs.appendingPathComponent(target)
        return ((try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? [])
            .filter { !$0.hasPrefix(".") }.sorted()
    }

    static func bytes(_ target: String, _ name: String) throws -> [UInt8] {
        Array(try Data(contentsOf: inputs.appendingPathComponent(target).appendingPathComponent(name)))
    }

    @Test("request decoder and dispatcher", arguments: files("request"))
    func request(_ name: String) throws { RequestTarget.run(try Self.bytes("request", name)) }

    @Test("drawing validator", arguments: files("drawing"))
    func drawing(_ name: String) throws { DrawingTarget.run(try Self.bytes("drawing", name)) }

    @Test(".yianazip reader", arguments: files("yianazip"))
    func yianazip(_ name: String) throws { YianazipTarget.run(try Self.bytes("yianazip", name)) }

    @Test("session snapshot deltas", arguments: files("delta"))
    func delta(_ name: String) throws { DeltaTarget.run(try Self.bytes("delta", name)) }

    @Test("every target has saved inputs")
    func present() {
        for target in ["request", "drawing", "yianazip", "delta"] { #expect(!Self.files(target).isEmpty, "no inputs for \(target)") }
    }
}
