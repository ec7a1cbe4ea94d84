package import CanvasProtocol
import CoreMetrics
import Foundation
public import Prometheus
import Synchronization

/// What canvasd counts about itself, for Prometheus to scrape (`/metrics` on the health
/// endpoint): recorded through swift-metrics (`Counter`, `Timer`, `Meter`), kept and written in
/// the text format by swift-prometheus.
///
/// Each server has a registry of its own, handed to whatever records: no process-wide
/// `MetricsSystem.bootstrap`, so several servers in one process (the tests) count apart. Each
/// family is registered in the registry with its HELP text, which swift-metrics has no way to
/// carry (`PrometheusMetricsFactory` registers every family with an empty one), and recorded
/// through swift-metrics' types over the registry's handlers.
///
/// Labels are kept to small fixed sets (method names this server has, error codes), so a client
/// cannot grow the set of series by sending made-up names.
public final class ServiceMetrics: @unchecked Sendable {
    // @unchecked: `counting`, `published`, the counters by label and `webCutOffCounted` are the
    // serving loop's alone (every call that reaches them runs on it); everything else is
    // immutable, and swift-metrics' and swift-prometheus's handlers are safe from any thread.
    public static let contentType = "text/plain; version=0.0.4; charset=utf-8"
    /// The histograms' upper bounds.
    package static let buckets: [Duration] = [.microseconds(100), .microseconds(500), .milliseconds(1), .milliseconds(5), .milliseconds(10),
                                      .milliseconds(50), .milliseconds(100), .milliseconds(500), .seconds(1), .seconds(5)]

    public let registry = PrometheusCollectorRegistry()
    /// swift-metrics' factory over this server's registry, for anything else that records.
    public let factory: PrometheusMetricsFactory

    /// What the loop counts on every request and reply, in plain fields: an atomic counter's
    /// increment, twice a request, showed in the loop's time per request, so these are counted
    /// here and given to the registry's counters once a second (`publish`). By method: the
    /// protocol's methods by `Method.index`; names this server has no method of, together, as
    /// `other`. Replies by error code; results, by far the most common reply, apart, without
    /// hashing a label.
    package struct Counts {
        var requestsByMethod = [UInt64](repeating: 0, count: Method.allCases.count)
        var otherRequests: UInt64 = 0
        var replies: [String: UInt64] = [:]
        var okReplies: UInt64 = 0
    }

    /// Counted on every request and reply.
    private var counting = Counts()
    /// What the registry's counters have been given of `counting`.
    private var published = Counts()
    /// The registry's counters by label value, made on first publication so a family has a
    /// sample only for the values seen.
    private var requestCounters: [String: CoreMetrics.Counter] = [:]
    private var replyCounters: [String: CoreMetrics.Counter] = [:]
    private let handling: CoreMetrics.Timer
    private let store: CoreMetrics.Timer
    private let storeFailures: CoreMetrics.Counter
    private let takeovers: CoreMetrics.Counter
    /// Bytes of session changes written to the session store, by how (`StoreWrite`).
    private let storedBytes: [StoreWrite: CoreMetrics.Counter]
    private let saves: CoreMetrics.Counter
    private let sessions: Meter
    private let jobsInFlight: Meter
    private let webConnections: Meter
    private let webCutOff: CoreMetrics.Counter
    /// The web endpoints' own tally of connections cut off, of which `webCutOff` has counted this much.
    private var webCutOffCounted = 0
    private let residentMemory: Meter
    private let draining: Meter
    private let loopIdle: Meter
    /// Failures of work nobody waits on (pruning, compaction, ...), by the work's name: the
    /// names are given at start, so the set of series is fixed.
    private let housekeeping: [String: CoreMetrics.Counter]

    /// `housekeeping`: the names of the document store's background work, each a series of
    /// `canvasd_housekeeping_failures_total`.
    public init(housekeeping: [String] = []) {
        factory = PrometheusMetricsFactory(registry: registry)
        handling = Self.timer(registry, factory, "canvasd_request_handling_seconds",
                              "Time the request loop spent on one request (work off the loop not included).")
        store = Self.timer(registry, factory, "canvasd_session_store_seconds", "Time one call to the session store took.")
        storeFailures = Self.counter(registry, factory, "canvasd_session_store_failures_total",
                                     "Calls to the session store that failed or were not made while it rested.")
        takeovers = Self.counter(registry, factory, "canvasd_session_takeovers_total", "Sessions taken over from the session store.")
        let written = ("canvasd_session_store_written_bytes_total",
                       "Bytes of session changes written to the session store: operations or byte deltas on a session's log, whole snapshots, and logs folded into whole snapshots.")
        var storedBytes: [StoreWrite: CoreMetrics.Counter] = [:]
        for kind in StoreWrite.allCases { storedBytes[kind] = Self.counter(registry, factory, written.0, written.1, [("kind", kind.rawValue)]) }
        self.storedBytes = storedBytes
        saves = Self.counter(registry, factory, "canvasd_saves_total", "Revisions saved into documents.")
        sessions = Self.meter(registry, factory, "canvasd_sessions", "Sessions held by this instance.")
        jobsInFlight = Self.meter(registry, factory, "canvasd_jobs_in_flight", "Saves and reads running or waiting beside the loop.")
        webConnections = Self.meter(registry, factory, "canvasd_web_connections", "Open ws:// connections, both endpoints.")
        webCutOff = Self.counter(registry, factory, "canvasd_web_connections_cut_off_total",
                                 "ws:// connections closed by canvasd: past a cap, upgrade or authentication not in time, or a token revoked.")
        residentMemory = Self.meter(registry, factory, "canvasd_resident_memory_bytes", "Resident memory of the process.")
        draining = Self.meter(registry, factory, "canvasd_draining", "1 while the instance drains (SIGTERM), else 0.")
        loopIdle = Self.meter(registry, factory, "canvasd_request_loop_idle_seconds", "Seconds since the request loop last turned.")
        var housekeepingCounters: [String: CoreMetrics.Counter] = [:]
        for work in housekeeping {
            housekeepingCounters[work] = Self.counter(registry, factory, "canvasd_housekeeping_failures_total",
                                                      "Background work on documents that failed (logged each time); a document's next writer does it again.",
                                                      [("work", work)])
        }
        self.housekeeping = housekeepingCounters
    }

    private static func counter(_ registry: PrometheusCollectorRegistry, _ factory: PrometheusMetricsFactory, _ name: String,
                                _ help: String, _ labels: [(String, String)] = []) -> CoreMetrics.Counter {
        let handler = registry.makeCounter(descriptor: MetricNameDescriptor(metricName: name, unitName: "", helpText: help), labels: labels)
        return CoreMetrics.Counter(label: name, dimensions: labels, handler: handler, factory: factory)
    }

    private static func meter(_ registry: PrometheusCollectorRegistry, _ factory: PrometheusMetricsFactory, _ name: String,
                              _ help: String, _ labels: [(String, String)] = []) -> Meter {
        let handler = registry.makeGauge(descriptor: MetricNameDescriptor(metricName: name, unitName: "", helpText: help), labels: labels)
        return Meter(label: name, dimensions: labels, handler: handler, factory: factory)
    }

    private static func timer(_ registry: PrometheusCollectorRegistry, _ factory: PrometheusMetricsFactory, _ name: String,
                              _ help: String) -> CoreMetrics.Timer {
        let handler = registry.makeDurationHistogram(descriptor: MetricNameDescriptor(metricName: name, unitName: "", helpText: help),
                                                     labels: [], buckets: buckets)
        return CoreMetrics.Timer(label: name, dimensions: [], handler: handler, factory: factory)
    }

    private static let requestsHelp = "Requests received, by method (unknown methods as \"other\")."
    private static let repliesHelp = "Replies sent, by error code (\"ok\" for results)."

    /// A request for `method`; nil: a name this server has no method of, counted as `other`.
    package func request(_ method: Method?) {
        guard let method else {
            counting.otherRequests += 1
            return
        }
        counting.requestsByMethod[method.index] += 1
    }

    /// A reply sent: counted by its error code, or `ok`. Read from the reply's first bytes,
    /// which `ReplyEncoder` writes as `{"error":{"code":"…"` for every failure.
    package func replied(_ bytes: [UInt8]) {
        // A result is told by its first byte after the brace (`{"id"` against `{"error"`).
        guard bytes.count > 2, bytes[2] == UInt8(ascii: "e"), let code = Self.errorCode(bytes) else {
            counting.okReplies += 1
            return
        }
        counting.replies[code, default: 0] += 1
    }

    /// Gives the registry what the loop counted since the last time (the loop calls it once a second).
    package func publish() {
        for method in Method.allCases {
            let count = counting.requestsByMethod[method.index]
            add(count - published.requestsByMethod[method.index], to: &requestCounters, method.rawValue,
                "canvasd_requests_total", Self.requestsHelp, label: "method")
        }
        add(counting.otherRequests - published.otherRequests, to: &requestCounters, "other",
            "canvasd_requests_total", Self.requestsHelp, label: "method")
        add(counting.okReplies - published.okReplies, to: &replyCounters, "ok", "canvasd_replies_total", Self.repliesHelp, label: "code")
        for (code, count) in counting.replies {
            add(count - published.replies[code, default: 0], to: &replyCounters, code, "canvasd_replies_total", Self.repliesHelp,
                label: "code")
        }
        published = counting
    }

    private func add(_ delta: UInt64, to counters: inout [String: CoreMetrics.Counter], _ value: String, _ name: String,
                     _ help: String, label: String) {
        guard delta > 0 else { return }
        if let counter = counters[value] {
            counter.increment(by: delta)
            return
        }
        let counter = Self.counter(registry, factory, name, help, [(label, value)])
        counters[value] = counter
        counter.increment(by: delta)
    }

    package func handled(seconds: Double) { handling.recordNanoseconds(Int64(seconds * 1e9)) }
    /// Called on a store lane's thread.
    package func askedStore(seconds: Double, failed: Bool) {
        store.recordNanoseconds(Int64(seconds * 1e9))
        if failed { storeFailures.increment() }
    }
    /// Called on a store lane's thread.
    package func tookOver() { takeovers.increment() }
    /// A session's change written to the store, as a delta or whole.
    package func stored(bytes: Int, _ kind: StoreWrite) { storedBytes[kind]?.increment(by: bytes) }

    /// How bytes went to the session store.
    package enum StoreWrite: String, CaseIterable, Sendable {
        /// A change as its operations, on the session's log.
        case operations
        /// A change as a byte delta of the snapshot, on the log.
        case delta
        /// A change written as the whole session.
        case whole
        /// A log folded into a whole snapshot, after the change's reply.
        case fold
    }
    package func saved(_ count: Int) { saves.increment(by: count) }
    /// Background work that failed; from any thread (a save's worker).
    package func housekeepingFailed(_ work: String) { housekeeping[work]?.increment() }
    /// What the loop holds now (it calls this once a second). `webCutOff` is the web endpoints'
    /// tally since the start; the counter is given what it has not counted yet.
    package func gauges(sessions: Int, jobsInFlight: Int, webConnections: Int, webCutOff: Int) {
        self.sessions.set(sessions)
        self.jobsInFlight.set(jobsInFlight)
        self.webConnections.set(webConnections)
        if webCutOff > webCutOffCounted {
            self.webCutOff.increment(by: webCutOff - webCutOffCounted)
            webCutOffCounted = webCutOff
        }
    }

    private static let errorPrefix = Array(#"{"error":{"code":""#.utf8)

    package static func errorCode(_ bytes: [UInt8]) -> String? {
        let prefix = errorPrefix
        guard bytes.count > prefix.count, bytes.starts(with: prefix) else { return nil }
        let rest = bytes[prefix.count...]
        guard let end = rest.firstIndex(of: UInt8(ascii: "\"")), end - prefix.count <= 32 else { return nil }
        return String(decoding: rest[..<end], as: UTF8.self)
    }

    /// Gauges read at the time of a scrape, not by the loop.
    public struct ScrapeGauges: Sendable {
        public var residentBytes: Double
        public var draining: Bool
        public var loopIdleSeconds: Double
    }

    /// The Prometheus text exposition (version 0.0.4) of everything recorded, with `scrape`'s gauges.
    public func exposition(instance: String, extra scrape: ScrapeGauges) -> String {
        let info = registry.makeGauge(descriptor: MetricNameDescriptor(metricName: "canvasd_info", unitName: "",
                                                                       helpText: "This instance: its name in the session store."),
                                      labels: [("instance", instance)])
        info.set(Double(1))
        residentMemory.set(scrape.residentBytes)
        draining.set(scrape.draining ? 1 : 0)
        // To the millisecond: swift-prometheus writes a gauge as Swift prints a Double, with an
        // exponent below 0.0001 (`9.8306e-05`), which a strict reader of the text format refuses.
        loopIdle.set((scrape.loopIdleSeconds * 1000).rounded() / 1000)
        return registry.emitToString()
    }
}
