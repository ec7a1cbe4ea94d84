@testable import CanvasService
import Testing

/// `/metrics` in Prometheus's text format: every sample's value in plain decimals.
@Suite("metrics text")
struct MetricsTextTests {
    @Test("a small value is written in plain decimals, not with an exponent; other values as before")
    func smallValuesWithoutExponent() {
        #expect(ServiceMetrics.decimal(9.8306e-05) == "0.000098306")
        #expect(ServiceMetrics.decimal(1.5e-10) == "0.00000000015")
        #expect(ServiceMetrics.decimal(0.25) == "0.25")
        #expect(ServiceMetrics.decimal(-3.5e-07) == "-0.00000035")
        let text = ServiceMetrics().exposition(instance: "t", extra: [("canvasd_request_loop_idle_seconds", "Idle.", 9.8306e-05)])
        #expect(text.contains("canvasd_request_loop_idle_seconds 0.000098306\n"), "\(text)")
        #expect(!text.split(separator: "\n").contains { !$0.hasPrefix("#") && $0.contains("e-") })
    }
}
