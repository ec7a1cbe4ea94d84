public import CanvasOperations
public import CanvasService
public import WebTransport

/// How a server is set up: its endpoints, who may reach them, the session store, health and
/// drain; and `service`, what the request path behind them is configured with.
public struct ServerConfiguration: Sendable {
    public var service = ServiceConfiguration()
    public var endpoint = "tcp://127.0.0.1:5555"
    public var eventsEndpoint = "tcp://127.0.0.1:5556"
    /// Loopback-only without authentication unless CurveZMQ keys are given.
    public var security = ServiceSecurity.loopbackOnly
    /// ws:// endpoints for web pages, when they are served.
    public var web: WebConfiguration?
    /// `redis://host:port/db`, or `redis-sentinel://host:port,host:port/master/db`: sessions
    /// shared with other instances through Redis (nil: kept in this process only).
    public var sessionStore: String? = nil
    /// Replicas that must confirm each write to the session store (Redis's `WAIT`) within
    /// `sessionStoreReplicaTimeout` before the change it carries is acknowledged; 0: the
    /// primary's word is enough (a change is then lost if the primary's machine is).
    public var sessionStoreReplicas = 0
    public var sessionStoreReplicaTimeout: Duration = .milliseconds(250)
    /// `HOST:PORT` (or `PORT`, on loopback) of the HTTP health and metrics endpoint; nil: none.
    public var healthEndpoint: String? = nil
    /// How long a drain (SIGTERM) keeps serving after it goes unready, so that the balancer
    /// sees it (HAProxy's checks: under a second) and sends clients elsewhere before the exit.
    public var drainTime: Duration = .zero

    public init() {}

    /// The request path's configuration as this server runs it: clients are authenticated
    /// exactly when CurveZMQ keys are given.
    var serviceAsRun: ServiceConfiguration {
        var service = self.service
        if case .curve = security { service.clientsAuthenticated = true } else { service.clientsAuthenticated = false }
        return service
    }
}

public struct WebConfiguration: Sendable {
    public var endpoint: String
    public var eventsEndpoint: String
    /// Without tokens both endpoints must be loopback (a proxy in front serves the world).
    public var tokens: WebTokens?
    /// Bounds on each ws:// endpoint's connections.
    public var connections: ConnectionRules.Limits
    /// Addresses of proxies (HAProxy's `send-proxy-v2`) whose connections begin with a PROXY v2
    /// header naming the client: its address, not the proxy's, is what the per-source bound counts.
    public var proxies: Set<String>
    /// A page's unread outbound bytes past which it alone is closed.
    public var maxQueuedBytes: Int
    /// wss:// served by canvasd itself (both endpoints then `wss://`), for a deployment with no
    /// proxy in front.
    public var tls: WebTLS?

    public init(endpoint: String, eventsEndpoint: String, tokens: WebTokens? = nil,
                connections: ConnectionRules.Limits = WebConfiguration.defaultConnections(), proxies: Set<String> = [],
                maxQueuedBytes: Int = WebTransport.defaultQueuedBytes, tls: WebTLS? = nil) {
        self.endpoint = endpoint
        self.eventsEndpoint = eventsEndpoint
        self.tokens = tokens
        self.connections = connections
        self.proxies = proxies
        self.maxQueuedBytes = maxQueuedBytes
        self.tls = tls
    }

    /// Descriptors kept for everything but web peers: documents, uploads' spools, the
    /// workers' and libdispatch's own, Redis, the tcp:// clients.
    public static let reservedDescriptors = 256

    /// Per endpoint: half of what the descriptor limit leaves after the reserve (requests and
    /// events each), at most 4,096, a quarter of them kept for peers that have authenticated;
    /// at most 256 from one address; at most 64 connections in their upgrade, for 5 s each; 5 s
    /// for a peer to authenticate.
    public static func defaultConnections(descriptorLimit: Int = ProcessLimits.descriptors) -> ConnectionRules.Limits {
        let open = max(8, min(4_096, (descriptorLimit - reservedDescriptors) / 2))
        return ConnectionRules.Limits(maxConnections: open, maxUpgrading: min(64, open), upgradeTimeout: .seconds(5),
                                      authenticationTimeout: .seconds(5), maxPerSource: min(256, open))
    }
}
