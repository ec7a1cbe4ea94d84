public import ArgumentParser
import CanvasService
import CanvasServing
import CanvasOperations
import DocumentStore
import Foundation
import Logging
import Synchronization
import WebTransport
import ZeroMQ

/// Set from the signal handlers, read by the serving loop.
let stopRequested = Atomic<Bool>(false)
let drainRequested = Atomic<Bool>(false)
let reloadRequested = Atomic<Bool>(false)

/// The service's own defaults, which the options below show and start from.
private let defaults = ServerConfiguration()

@main
struct Canvasd: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "canvasd",
        abstract: "Serves canvas sessions over ZeroMQ: requests on a ROUTER socket, events on a PUB socket."
    )

    @Option(help: "Where clients send requests (ROUTER; tcp://, ipc:// or ws://).")
    var endpoint = defaults.endpoint

    @Option(help: "Where events are published (PUB).")
    var events = defaults.eventsEndpoint

    @Option(help: "The document folder: .pdf and .yianazip files.")
    var documents = defaults.service.documentsPath

    @Option(name: .customLong("idle-timeout"), help: "Seconds before an untouched session is closed.")
    var idleTimeout = Int(defaults.service.idleTimeout.components.seconds)

    @Option(name: .customLong("upload-idle-timeout"), help: "Seconds before an upload no part has added bytes to is dropped.")
    var uploadIdleTimeout = Int(defaults.service.uploadIdleTimeout.components.seconds)

    @Option(name: .customLong("max-message-bytes"), help: "The largest request accepted, all frames together.")
    var maxMessageBytes = defaults.service.limits.maxMessageBytes

    @Option(name: .customLong("max-sessions"), help: "Sessions open at once.")
    var maxSessions = defaults.service.limits.maxSessions

    @Option(name: .customLong("max-upload-bytes"), help: "The largest document document.upload.* takes.")
    var maxUploadBytes = defaults.service.limits.maxUploadBytes

    @Option(name: .customLong("keep-revisions"), help: "Revisions kept per document, the current one included (at least 2).")
    var keepRevisions = defaults.service.keepRevisions

    @Option(name: .customLong("save-mode"),
            help: "replace (a new file renamed over the document: readers of the folder never see a torn file) or append (the update appended in place: a save costs its increment, a reader of the folder may see part of it until it commits).")
    var saveMode = "replace"

    @Option(name: .customLong("curve-secret-key"),
            help: "The server's CurveZMQ key pair file (canvasctl keygen). With it, only --allowed-keys get in.")
    var curveSecretKey: String?

    @Option(name: .customLong("allowed-keys"),
            help: "A file of client public keys, or a folder of such files; read again on SIGHUP.")
    var allowedKeys: String?

    @Option(name: .customLong("max-sessions-per-client"), help: "Sessions one client may hold at once: per key with CurveZMQ, per connection on loopback.")
    var maxSessionsPerClient = defaults.service.limits.maxSessionsPerClient

    @Option(name: .customLong("max-sessions-per-owner"),
            help: "Sessions one owner may hold over all its connections: a key, a web token, or every local client together.")
    var maxSessionsPerOwner = defaults.service.limits.maxSessionsPerOwner

    @Option(name: .customLong("max-uploads"), help: "Uploads under way at once, everyone's together.")
    var maxUploads = defaults.service.limits.maxUploads

    @Option(name: .customLong("max-uploads-per-owner"),
            help: "Uploads one owner may have under way at once: a key, a web token, or one connection of a local client.")
    var maxUploadsPerOwner = defaults.service.limits.maxUploadsPerOwner

    @Option(name: .customLong("web-endpoint"),
            help: "Where web pages send requests (ws://, ZWS 2.0), e.g. ws://127.0.0.1:5580. Loopback unless --web-tokens.")
    var webEndpoint: String?

    @Option(name: .customLong("web-events"), help: "Where web pages receive events (ws://), e.g. ws://127.0.0.1:5581.")
    var webEvents: String?

    @Option(name: .customLong("web-tokens"),
            help: "A file of access tokens (NAME TOKEN per line); web peers must then present one. Read again on SIGHUP.")
    var webTokens: String?

    @Option(name: .customLong("health-endpoint"),
            help: "HOST:PORT (or PORT, on 127.0.0.1) of an HTTP endpoint with /livez, /readyz and /metrics (Prometheus); none if not given.")
    var healthEndpoint: String?

    @Option(name: .customLong("drain-seconds"),
            help: "On SIGTERM, seconds to serve on while unready, so a balancer moves clients away first (default: 2 with --health-endpoint, else 0).")
    var drainSeconds: Double?

    @Option(name: .customLong("memory-budget"),
            help: "Resident megabytes past which large replies (document.get, a large drawing.get) are refused for the moment.")
    var memoryBudget = defaults.service.limits.memoryBudgetBytes >> 20

    @Option(name: .customLong("image-time-budget"),
            help: "Seconds a result image (imageData) may take to render; past them the result goes without it (imageOmitted: timeout).")
    var imageTimeBudget = Double(defaults.service.limits.imageTimeBudget.components.seconds)
        + Double(defaults.service.limits.imageTimeBudget.components.attoseconds) / 1e18

    @Option(name: .customLong("max-web-connections"),
            help: "Connections each ws:// endpoint takes at once (default: half of the descriptor limit left after 256 reserved, at most 4096).")
    var maxWebConnections: Int?

    @Option(name: .customLong("max-web-connections-per-source"),
            help: "Connections each ws:// endpoint takes from one IP address (default: 256, or --max-web-connections if less). Behind a proxy, name it with --web-proxy so that each client counts under its own address.")
    var maxWebConnectionsPerSource: Int?

    @Option(name: .customLong("web-proxy"),
            help: "The address of a proxy (HAProxy with send-proxy-v2) whose ws:// connections begin with a PROXY v2 header naming the client. Repeat for several.")
    var webProxies: [String] = []

    @Option(name: .customLong("web-tls-cert"),
            help: "A PEM certificate chain: serve wss:// (the web endpoints then wss://), with --web-tls-key. Read again on SIGHUP.")
    var webTLSCertificate: String?

    @Option(name: .customLong("web-tls-key"), help: "The PEM private key of --web-tls-cert.")
    var webTLSKey: String?

    @Option(name: .customLong("web-queue-bytes"),
            help: "Unread bytes a web peer may leave queued; past them it alone is closed (default 1 MiB).")
    var webQueueBytes = WebTransport.defaultQueuedBytes

    @Option(name: .customLong("web-auth-timeout"),
            help: "Seconds a ws:// peer may stay connected before it sends a request (a subscription, on the events endpoint) with a valid token.")
    var webAuthTimeout = 5.0

    @Option(name: .customLong("log-level"), help: "The least severe messages logged.")
    var logLevel = Logger.Level.info

    @Option(name: .customLong("session-store"),
            help: "redis://host:port/db, or redis-sentinel://host:port,host:port,.../master/db to find the primary through Redis Sentinel and follow its failovers: share sessions with other instances through Redis (see docs/operations.md, Running several instances).")
    var sessionStore: String?

    @Option(name: .customLong("session-store-replicas"),
            help: "Replicas that must confirm each change written to the session store (Redis WAIT) before it is acknowledged; a change they do not confirm in time is refused UNAVAILABLE sessionStore. 0: the primary's word.")
    var sessionStoreReplicas = 0

    @Option(name: .customLong("session-store-replica-timeout"),
            help: "Seconds the replicas have to confirm a change (--session-store-replicas).")
    var sessionStoreReplicaTimeout = 0.25

    @Option(name: .customLong("instance"), help: "This instance's name in the session store (default: host/pid).")
    var instance: String?

    func validate() throws {
        guard idleTimeout > 0 else { throw ValidationError("--idle-timeout must be positive") }
        guard uploadIdleTimeout > 0 else { throw ValidationError("--upload-idle-timeout must be positive") }
        guard maxUploadBytes > 0 else { throw ValidationError("--max-upload-bytes must be positive") }
        guard maxMessageBytes >= 1024 else { throw ValidationError("--max-message-bytes must be at least 1024") }
        guard SaveMode(rawValue: saveMode) != nil else { throw ValidationError("--save-mode is replace or append, not \(saveMode)") }
        guard keepRevisions >= 2 else { throw ValidationError("--keep-revisions must be at least 2: the original and the latest") }
        guard maxSessions > 0 else { throw ValidationError("--max-sessions must be positive") }
        guard maxSessionsPerClient > 0 else { throw ValidationError("--max-sessions-per-client must be positive") }
        guard memoryBudget >= 64 else { throw ValidationError("--memory-budget must be at least 64 (megabytes)") }
        if let drainSeconds, !(0...600).contains(drainSeconds) { throw ValidationError("--drain-seconds must be between 0 and 600") }
        guard (0.001...600).contains(imageTimeBudget) else { throw ValidationError("--image-time-budget must be between 0.001 and 600 (seconds)") }
        guard (webTLSCertificate == nil) == (webTLSKey == nil) else { throw ValidationError("--web-tls-cert and --web-tls-key go together") }
        guard webTLSCertificate == nil || webEndpoint != nil else { throw ValidationError("--web-tls-cert needs --web-endpoint and --web-events") }
        if webQueueBytes < 4096 { throw ValidationError("--web-queue-bytes must be at least 4096") }
        if let maxWebConnections, maxWebConnections < 1 { throw ValidationError("--max-web-connections must be positive") }
        if let maxWebConnectionsPerSource, maxWebConnectionsPerSource < 1 {
            throw ValidationError("--max-web-connections-per-source must be positive")
        }
        guard webAuthTimeout.isFinite, webAuthTimeout > 0, webAuthTimeout <= 3600 else {
            throw ValidationError("--web-auth-timeout must be between 0 and 3600 seconds")
        }
        guard (0...64).contains(sessionStoreReplicas) else { throw ValidationError("--session-store-replicas must be between 0 and 64") }
        guard sessionStoreReplicaTimeout.isFinite, (0.001...10).contains(sessionStoreReplicaTimeout) else {
            throw ValidationError("--session-store-replica-timeout must be between 0.001 and 10 seconds")
        }
        if sessionStoreReplicas > 0 && sessionStore == nil { throw ValidationError("--session-store-replicas needs --session-store") }
        guard maxSessionsPerOwner > 0 else { throw ValidationError("--max-sessions-per-owner must be positive") }
        guard maxUploads > 0 else { throw ValidationError("--max-uploads must be positive") }
        guard maxUploadsPerOwner > 0 else { throw ValidationError("--max-uploads-per-owner must be positive") }
        guard (curveSecretKey == nil) == (allowedKeys == nil) else {
            throw ValidationError("--curve-secret-key and --allowed-keys go together")
        }
        guard (webEndpoint == nil) == (webEvents == nil) else {
            throw ValidationError("--web-endpoint and --web-events go together")
        }
        guard webTokens == nil || webEndpoint != nil else { throw ValidationError("--web-tokens needs --web-endpoint and --web-events") }
    }

    func run() throws {
        let level = logLevel
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return handler
        }
        let logger = Logger(label: "canvasd")

        if let mount = FolderMount.of(documents) {
            guard mount.problems.isEmpty else {
                throw ValidationError("the document folder \(documents) is on \(mount.type) at \(mount.mountPoint), whose caches would let instances on "
                                      + "other machines hand out one revision number twice: " + mount.problems.joined(separator: "; ")
                                      + " (docs/operations.md, Documents on a network file system)")
            }
            if mount.isNetwork {
                logger.notice("document folder on a network file system", metadata: ["type": "\(mount.type)", "mount": "\(mount.mountPoint)"])
            }
        }

        var configuration = ServerConfiguration()
        configuration.endpoint = endpoint
        configuration.eventsEndpoint = events
        configuration.service.documentsPath = documents
        configuration.service.keepRevisions = keepRevisions
        configuration.service.saveMode = SaveMode(rawValue: saveMode)!
        configuration.service.idleTimeout = .seconds(idleTimeout)
        configuration.service.uploadIdleTimeout = .seconds(uploadIdleTimeout)
        configuration.service.limits.maxMessageBytes = maxMessageBytes
        configuration.service.limits.maxSessions = maxSessions
        configuration.service.limits.maxUploadBytes = maxUploadBytes
        configuration.service.limits.maxSessionsPerClient = maxSessionsPerClient
        configuration.service.limits.memoryBudgetBytes = memoryBudget << 20
        configuration.service.limits.imageTimeBudget = .milliseconds(Int64((imageTimeBudget * 1000).rounded()))
        configuration.service.limits.maxSessionsPerOwner = maxSessionsPerOwner
        configuration.service.limits.maxUploads = maxUploads
        configuration.service.limits.maxUploadsPerOwner = maxUploadsPerOwner
        configuration.sessionStore = sessionStore
        configuration.sessionStoreReplicas = sessionStoreReplicas
        configuration.sessionStoreReplicaTimeout = .milliseconds(Int64(sessionStoreReplicaTimeout * 1000))
        configuration.healthEndpoint = healthEndpoint
        configuration.drainTime = .milliseconds(Int64((drainSeconds ?? (healthEndpoint == nil ? 0 : 2)) * 1000))
        if let instance { configuration.service.instanceName = instance }
        if let curveSecretKey, let allowedKeys {
            do {
                configuration.security = .curve(server: try CurveKeyFile.keyPair(at: curveSecretKey),
                                                allowed: try AllowedKeys(path: allowedKeys))
            } catch {
                throw ValidationError("\(error)")
            }
        }

        // Before any socket: the web endpoints' bounds are worked out from the limit.
        ProcessLimits.raiseDescriptorLimit()
        if let webEndpoint, let webEvents {
            do {
                var connections = WebConfiguration.defaultConnections()
                if let maxWebConnections {
                    connections.maxConnections = maxWebConnections
                    connections.maxUpgrading = min(connections.maxUpgrading, maxWebConnections)
                    connections.maxPerSource = min(connections.maxPerSource, maxWebConnections)
                    connections.reservedForAuthenticated = maxWebConnections / 4
                }
                if let maxWebConnectionsPerSource { connections.maxPerSource = maxWebConnectionsPerSource }
                connections.authenticationTimeout = .milliseconds(Int64(webAuthTimeout * 1000))
                configuration.web = WebConfiguration(endpoint: webEndpoint, eventsEndpoint: webEvents,
                                                     tokens: try webTokens.map { try WebTokens(path: $0) }, connections: connections,
                                                     proxies: Set(webProxies), maxQueuedBytes: webQueueBytes,
                                                     tls: try webTLSCertificate.map { try WebTLS(certificate: $0, key: webTLSKey ?? "") })
            } catch {
                throw ValidationError("\(error)")
            }
        }

        // SIGINT and SIGTERM end the loop at its next turn; the poll wakes with EINTR. A parent
        // may hand us a mask with them blocked (Foundation's Process spawns from Dispatch
        // threads, which block most signals), so unblock them or a plain `kill` never stops us.
        var stopSignals = sigset_t()
        sigemptyset(&stopSignals)
        sigaddset(&stopSignals, SIGINT)
        sigaddset(&stopSignals, SIGTERM)
        pthread_sigmask(SIG_UNBLOCK, &stopSignals, nil)
        signal(SIGINT) { _ in stopRequested.store(true, ordering: .relaxed) }
        // SIGTERM drains (a second one stops at once); SIGINT stops at once.
        signal(SIGTERM) { _ in
            if drainRequested.exchange(true, ordering: .relaxed) { stopRequested.store(true, ordering: .relaxed) }
        }
        signal(SIGPIPE, SIG_IGN)
        signal(SIGHUP) { _ in reloadRequested.store(true, ordering: .relaxed) }

        let server: CanvasServer
        do {
            // SIGTERM too ends a start-up still waiting for its name: there is nothing to drain.
            server = try CanvasServer(configuration: configuration, logger: logger) {
                stopRequested.load(ordering: .relaxed) || drainRequested.load(ordering: .relaxed)
            }
        } catch ServerStartError.stopped(let reason) {
            logger.notice("canvasd stopped before it served", metadata: ["reason": "\(reason)"])
            return
        } catch {
            logger.critical("canvasd not started", metadata: ["error": "\(error)"])
            throw ExitCode(1)
        }
        try server.run(reloadKeys: { reloadRequested.exchange(false, ordering: .relaxed) },
                       shouldDrain: { drainRequested.load(ordering: .relaxed) }) {
            stopRequested.load(ordering: .relaxed)
        }
        logger.info("canvasd stopped")
    }
}

extension Logger.Level: @retroactive ExpressibleByArgument {}
