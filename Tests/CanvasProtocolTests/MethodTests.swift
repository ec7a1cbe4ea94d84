@testable import CanvasProtocol
import Testing

@Suite("method names")
struct MethodTests {
    @Test("every name finds its method, and its index is its place in allCases")
    func everyName() {
        for (place, method) in Method.allCases.enumerated() {
            #expect(Method(named: method.rawValue) == method)
            #expect(method.index == place, "\(method.rawValue)")
        }
    }

    @Test("a name that is not exactly a method's finds none", arguments: [
        "", "h", "hello ", " hello", "Hello", "canvas.stat", "canvas.statE", "canvas.states", "canvas", "canvas.",
        "drawing.undo\u{0}", "document.upload", "document.upload.part.x", "sessionOpen", "canvas_state", "canvas.ståte",
        String(repeating: "x", count: 200),
    ])
    func notAMethod(name: String) {
        #expect(Method(named: name) == nil)
    }

    @Test("names in other string forms (bridged, sliced, non-ASCII neighbours) are read by their UTF-8 bytes")
    func stringForms() {
        let sliced = "xxcanvas.stateyy".dropFirst(2).dropLast(2)
        #expect(Method(named: String(sliced)) == .canvasState)
        let built = ["drawing", "addStroke"].joined(separator: ".")
        #expect(Method(named: built) == .drawingAddStroke)
        // "é" precomposed and decomposed are equal Swift strings but neither is a method name.
        #expect(Method(named: "canvas.op\u{E9}n") == nil && Method(named: "canvas.ope\u{301}n") == nil)
    }
}
