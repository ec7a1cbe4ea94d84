@testable import CanvasOperations
@testable import CanvasService
import Testing

/// `/metrics` in Prometheus's text format, written by swift-prometheus from each server's own registry.
@Suite("metrics text")
struct MetricsTextTests {
    static func scrape(_ metrics: ServiceMetrics, idle: Double = 0.05) -> String {
        metrics.exposition(instance: "t", extra: .init(residentBytes: 1e7, draining: false, loopIdleSeconds: idle))
    }

    @Test("a small value is written in plain decimals, not with an exponent")
    func smallValuesWithoutExponent() {
        let metrics = ServiceMetrics()
        metrics.handled(seconds: 9.8306e-05)
        let text = Self.scrape(metrics, idle: 9.8306e-05)
        #expect(text.contains("canvasd_request_loop_idle_seconds 0.0\n"), "\(text)")
        #expect(text.contains("canvasd_request_handling_seconds_sum 0.000098306\n"), "\(text)")
        #expect(!text.split(separator: "\n").contains { !$0.hasPrefix("#") && $0.contains("e-") }, "\(text)")
    }

    @Test("two servers in one process count apart: no process-wide metrics system")
    func registriesApart() {
        let first = ServiceMetrics(), second = ServiceMetrics()
        first.request(.canvasState)
        first.request(.canvasState)
        second.request(nil)
        first.publish()
        first.request(.canvasState)
        first.publish()
        first.publish()   // nothing new: nothing added
        second.publish()
        let one = Self.scrape(first), two = Self.scrape(second)
        #expect(one.contains("canvasd_requests_total{method=\"canvas.state\"} 3\n"), "\(one)")
        #expect(!one.contains("method=\"other\""), "\(one)")
        #expect(two.contains("canvasd_requests_total{method=\"other\"} 1\n"), "\(two)")
        #expect(!two.contains("canvas.state"), "\(two)")
    }

    @Test("histogram buckets, HELP lines and labels as protocol/health.md gives them")
    func familiesAsDocumented() {
        let metrics = ServiceMetrics()
        metrics.handled(seconds: 0.002)
        metrics.replied(Array(#"{"error":{"code":"INVALID_PARAMS","message":"m"},"id":1}"#.utf8))
        metrics.publish()
        let text = Self.scrape(metrics)
        let bounds = ["0.0001", "0.0005", "0.001", "0.005", "0.01", "0.05", "0.1", "0.5", "1.0", "5.0", "+Inf"]
        let buckets = text.split(separator: "\n").filter { $0.hasPrefix("canvasd_request_handling_seconds_bucket") }.map(String.init)
        #expect(buckets == bounds.enumerated().map { index, bound in
            "canvasd_request_handling_seconds_bucket{le=\"\(bound)\"} \(index >= 3 ? 1 : 0)"
        })
        #expect(text.contains("# HELP canvasd_replies_total Replies sent, by error code (\"ok\" for results).\n"), "\(text)")
        #expect(text.contains("canvasd_replies_total{code=\"INVALID_PARAMS\"} 1\n"), "\(text)")
        #expect(text.contains("canvasd_info{instance=\"t\"} 1.0\n"), "\(text)")
    }
}
