import CanvasProtocol
import Foundation
import Synchronization

/// What canvasd counts about itself, for Prometheus to scrape (`/metrics` on the health
/// endpoint). The loop records; the health endpoint's thread reads what it last published.
///
/// Labels are kept to small fixed sets (method names this server has, error codes), so a client
/// cannot grow the set of series by sending made-up names.
public final class ServiceMetrics: @unchecked Sendable {
    // @unchecked: `counting` is the serving loop's alone (every recording method runs on it);
    // the endpoint's thread reads only `published`, behind its lock. Counting without a lock
    // keeps the per-request cost off the loop's hot path; the loop publishes once a second.
    /// A histogram with fixed upper bounds, in seconds.
    struct Histogram {
        static let bounds: [Double] = [0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5]
        var counts = [UInt64](repeating: 0, count: bounds.count + 1)
        var sum = 0.0

        mutating func observe(_ seconds: Double) {
            counts[Self.bounds.firstIndex { seconds <= $0 } ?? Self.bounds.count] += 1
            sum += seconds
        }
    }

    struct State {
        /// By method: the protocol's methods by `Method.index`; names this server has no
        /// method of, together, as `other`.
        var requestsByMethod = [UInt64](repeating: 0, count: Method.allCases.count)
        var otherRequests: UInt64 = 0
        /// By error code; results are counted apart, as `ok`, in `okReplies`.
        var replies: [String: UInt64] = [:]
        var okReplies: UInt64 = 0
        var handling = Histogram()
        var store = Histogram()
        var storeFailures: UInt64 = 0
        var takeovers: UInt64 = 0
        /// Bytes of session changes written to the session store: deltas, and whole snapshots.
        var storedDeltaBytes: UInt64 = 0
        var storedWholeBytes: UInt64 = 0
        var saves: UInt64 = 0
        var sessions = 0
        var jobsInFlight = 0
        var webConnections = 0
        var webCutOff: UInt64 = 0
    }

    // Counted on every request and reply, and changed by nothing that counts again: without
    // the run-time exclusivity check (see `Dispatcher.table`).
    @exclusivity(unchecked) private var counting = State()
    private let published = Mutex(State())
    /// What the store lanes' threads count (`StoreLine`): their own, behind a lock, taken into what is
    /// published with the rest.
    private let storeCounting = Mutex((store: Histogram(), failures: UInt64(0), takeovers: UInt64(0), delta: UInt64(0), whole: UInt64(0)))

    public init() {}

    /// Makes what the loop counted visible to the endpoint (the loop calls it once a second).
    func publish() {
        var snapshot = counting
        (snapshot.store, snapshot.storeFailures, snapshot.takeovers, snapshot.storedDeltaBytes, snapshot.storedWholeBytes) =
            storeCounting.withLock { $0 }
        published.withLock { $0 = snapshot }
    }

    /// A request for `method`; nil: a name this server has no method of, counted as `other`.
    func request(_ method: Method?) {
        guard let method else {
            counting.otherRequests += 1
            return
        }
        counting.requestsByMethod[method.index] += 1
    }

    /// A reply sent: counted by its error code, or `ok`. Read from the reply's first bytes,
    /// which `ReplyEncoder` writes as `{"error":{"code":"…"` for every failure.
    func replied(_ bytes: [UInt8]) {
        // A result, by far the most common reply, is told by its first byte after the brace
        // (`{"id"` against `{"error"`) and counted without hashing a label.
        guard bytes.count > 2, bytes[2] == UInt8(ascii: "e"), let code = Self.errorCode(bytes) else {
            counting.okReplies += 1
            return
        }
        counting.replies[code, default: 0] += 1
    }

    func handled(seconds: Double) { counting.handling.observe(seconds) }
    /// Called on a store lane's thread.
    func askedStore(seconds: Double, failed: Bool) {
        storeCounting.withLock {
            $0.store.observe(seconds)
            if failed { $0.failures += 1 }
        }
    }
    /// Called on a store lane's thread.
    func tookOver() { storeCounting.withLock { $0.takeovers += 1 } }
    /// A session's change written to the store, as a delta or whole.
    func stored(bytes: Int, whole: Bool) {
        storeCounting.withLock {
            if whole { $0.whole += UInt64(bytes) } else { $0.delta += UInt64(bytes) }
        }
    }
    func saved(_ count: Int) { counting.saves += UInt64(count) }
    func gauges(sessions: Int, jobsInFlight: Int, webConnections: Int, webCutOff: Int) {
        counting.sessions = sessions
        counting.jobsInFlight = jobsInFlight
        counting.webConnections = webConnections
        counting.webCutOff = UInt64(webCutOff)
    }

    private static let errorPrefix = Array(#"{"error":{"code":""#.utf8)

    static func errorCode(_ bytes: [UInt8]) -> String? {
        let prefix = errorPrefix
        guard bytes.count > prefix.count, bytes.starts(with: prefix) else { return nil }
        let rest = bytes[prefix.count...]
        guard let end = rest.firstIndex(of: UInt8(ascii: "\"")), end - prefix.count <= 32 else { return nil }
        return String(decoding: rest[..<end], as: UTF8.self)
    }

    /// The Prometheus text exposition (version 0.0.4) of everything counted, and `extra`
    /// gauges read at the time of the scrape.
    /// A sample's value in plain decimals: Swift writes small ones with an exponent
    /// (`9.8306e-05`, a loop idle for 98 µs), which a strict reader of the text format refuses.
    static func decimal(_ value: Double) -> String {
        let text = String(value)
        guard value.isFinite, text.contains("e") else { return text }
        var fixed = String(format: "%.15f", value)
        while fixed.hasSuffix("0") { fixed.removeLast() }
        if fixed.hasSuffix(".") { fixed.removeLast() }
        return fixed
    }

    public func exposition(instance: String, extra: [(name: String, help: String, value: Double)] = []) -> String {
        let now = published.withLock { $0 }
        var out = ""
        func family(_ name: String, _ type: String, _ help: String) {
            out += "# HELP \(name) \(help)\n# TYPE \(name) \(type)\n"
        }
        func sample(_ name: String, _ labels: [(String, String)] = [], _ value: Double) {
            let text = value == value.rounded() && abs(value) < 1e15 ? String(Int64(value)) : Self.decimal(value)
            let rendered = labels.isEmpty ? "" : "{" + labels.map { "\($0.0)=\"\(Self.escape($0.1))\"" }.joined(separator: ",") + "}"
            out += "\(name)\(rendered) \(text)\n"
        }
        /// A family of one sample without labels.
        func single(_ name: String, _ type: String, _ help: String, _ value: Double) {
            family(name, type, help)
            sample(name, [], value)
        }
        func histogram(_ name: String, _ help: String, _ h: Histogram) {
            family(name, "histogram", help)
            var cumulative: UInt64 = 0
            for (index, bound) in Histogram.bounds.enumerated() {
                cumulative += h.counts[index]
                sample("\(name)_bucket", [("le", String(bound))], Double(cumulative))
            }
            cumulative += h.counts[Histogram.bounds.count]
            sample("\(name)_bucket", [("le", "+Inf")], Double(cumulative))
            sample("\(name)_sum", [], h.sum)
            sample("\(name)_count", [], Double(cumulative))
        }
        family("canvasd_info", "gauge", "This instance: its name in the session store.")
        sample("canvasd_info", [("instance", instance)], 1)
        family("canvasd_requests_total", "counter", "Requests received, by method (unknown methods as \"other\").")
        var requests: [String: UInt64] = now.otherRequests > 0 ? ["other": now.otherRequests] : [:]
        for method in Method.allCases where now.requestsByMethod[method.index] > 0 {
            requests[method.rawValue, default: 0] += now.requestsByMethod[method.index]
        }
        for (method, count) in requests.sorted(by: { $0.key < $1.key }) { sample("canvasd_requests_total", [("method", method)], Double(count)) }
        family("canvasd_replies_total", "counter", "Replies sent, by error code (\"ok\" for results).")
        var replies = now.replies
        if now.okReplies > 0 { replies["ok", default: 0] += now.okReplies }
        for (code, count) in replies.sorted(by: { $0.key < $1.key }) { sample("canvasd_replies_total", [("code", code)], Double(count)) }
        histogram("canvasd_request_handling_seconds", "Time the request loop spent on one request (work off the loop not included).", now.handling)
        histogram("canvasd_session_store_seconds", "Time one call to the session store took.", now.store)
        single("canvasd_session_store_failures_total", "counter", "Calls to the session store that failed or were not made while it rested.",
               Double(now.storeFailures))
        single("canvasd_session_takeovers_total", "counter", "Sessions taken over from the session store.", Double(now.takeovers))
        family("canvasd_session_store_written_bytes_total", "counter",
               "Bytes of session changes written to the session store, as deltas on a session's log or whole snapshots.")
        sample("canvasd_session_store_written_bytes_total", [("kind", "delta")], Double(now.storedDeltaBytes))
        sample("canvasd_session_store_written_bytes_total", [("kind", "whole")], Double(now.storedWholeBytes))
        single("canvasd_saves_total", "counter", "Revisions saved into documents.", Double(now.saves))
        single("canvasd_sessions", "gauge", "Sessions held by this instance.", Double(now.sessions))
        single("canvasd_jobs_in_flight", "gauge", "Saves and reads running or waiting beside the loop.", Double(now.jobsInFlight))
        single("canvasd_web_connections", "gauge", "Open ws:// connections, both endpoints.", Double(now.webConnections))
        single("canvasd_web_connections_cut_off_total", "counter", "ws:// connections closed for passing a cap or not finishing their upgrade.",
               Double(now.webCutOff))
        for gauge in extra { single(gauge.name, "gauge", gauge.help, gauge.value) }
        return out
    }

    private static func escape(_ value: String) -> String {
        value.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"")
            .replacingOccurrences(of: "\n", with: "\\n")
    }
}
