import FuzzTargets

// libFuzzer's entry point; its own main() drives it (this target is built only with
// CANVAS_FUZZ=1 and --sanitize=fuzzer, see `make fuzz`).
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ data: UnsafeRawPointer, _ size: Int) -> CInt {
    DeltaTarget.run(Array(UnsafeRawBufferPointer(start: data, count: size)))
    return 0
}
