/// The rules every ws:// connection of one endpoint is held to (spec §1.2), with no sockets:
/// the endpoint tells it what happened to a connection and does what it answers.
///
/// A connection is accepted, finishes its WebSocket upgrade, and authenticates (a request or a
/// subscription with a valid token; without tokens, any). Bounds: connections open, from one
/// source, still in their upgrade, and not authenticated (which may fill all but
/// `reservedForAuthenticated` slots). Past a bound, the connection the bound counts that has
/// waited longest without authenticating is closed to make room; the new one is refused only
/// when every connection that bound counts has authenticated. An upgrade not finished within
/// `upgradeTimeout`, and a connection not authenticated within `authenticationTimeout` of being
/// accepted, are closed by `sweep`.
///
/// Connections are numbered as they are accepted, so the oldest is the lowest number: the
/// queues below hold numbers in that order and forget lazily whatever has moved on.
public struct ConnectionRules: Sendable {
    public struct Limits: Sendable, Equatable {
        public var maxConnections: Int
        public var maxUpgrading: Int
        public var upgradeTimeout: Duration
        public var authenticationTimeout: Duration
        public var maxPerSource: Int
        /// Slots connections that have not authenticated may never take.
        public var reservedForAuthenticated: Int

        public init(maxConnections: Int, maxUpgrading: Int, upgradeTimeout: Duration, authenticationTimeout: Duration = .seconds(5),
                    maxPerSource: Int? = nil, reservedForAuthenticated: Int? = nil) {
            self.maxConnections = maxConnections
            self.maxUpgrading = maxUpgrading
            self.upgradeTimeout = upgradeTimeout
            self.authenticationTimeout = authenticationTimeout
            self.maxPerSource = maxPerSource ?? maxConnections
            self.reservedForAuthenticated = reservedForAuthenticated ?? maxConnections / 4
        }

        /// What connections that have not authenticated may hold together.
        public var maxUnauthenticated: Int { max(1, maxConnections - reservedForAuthenticated) }
    }

    /// Where a connection is in its life.
    public enum Phase: Sendable, Equatable {
        /// Accepted; its HTTP upgrade is not finished.
        case upgrading
        /// A WebSocket, not yet authenticated.
        case waiting
        case authenticated
    }

    /// Why a connection was closed.
    public enum Cut: String, Sendable, Equatable, CaseIterable {
        /// Past a bound, with no connection that had not authenticated to make room: the new one.
        case refused
        /// Closed to make room for a newer one, past a bound.
        case madeRoom
        case upgradeTimedOut
        case notAuthenticated
        /// Its token was revoked.
        case revoked
        /// A subscription with a token not known (a subscriber has no reply to be refused in).
        case unknownToken
        /// It stopped reading and its outbound queue filled.
        case slowReader
        /// It sent what ZWS 2.0 does not take (a text or empty message, a message too large).
        case badMessage
    }

    /// What the endpoint must do after an event: close these connections, for these reasons.
    public struct Action: Sendable, Equatable {
        public var close: [(id: UInt64, cut: Cut)]
        public init(close: [(id: UInt64, cut: Cut)] = []) { self.close = close }

        public static func == (a: Action, b: Action) -> Bool {
            a.close.map(\.id) == b.close.map(\.id) && a.close.map(\.cut) == b.close.map(\.cut)
        }
    }

    /// What the endpoint has done since it started, for logs and metrics.
    public struct Tally: Sendable, Equatable {
        public var open = 0
        public var upgrading = 0
        public var authenticated = 0
        public var cut: [Cut: Int] = [:]
        public init() {}
        /// Every connection closed by a rule, whatever the reason.
        public var cutOff: Int { cut.values.reduce(0, +) }
    }

    private struct Entry {
        let source: String
        let accepted: ContinuousClock.Instant
        var phase: Phase
    }

    /// Numbers in acceptance order; entries no longer in the state a queue stands for are
    /// skipped when they reach its front.
    private struct Queue {
        private var items: [UInt64] = []
        private var head = 0
        mutating func append(_ id: UInt64) { items.append(id) }
        mutating func first(where valid: (UInt64) -> Bool) -> UInt64? {
            while head < items.count, !valid(items[head]) { head += 1 }
            if head > 64, head * 2 > items.count {
                items.removeFirst(head)
                head = 0
            }
            return head < items.count ? items[head] : nil
        }
        var isEmpty: Bool { head >= items.count }
    }

    public let limits: Limits
    public private(set) var tally = Tally()
    private var entries: [UInt64: Entry] = [:]
    private var perSource: [String: Int] = [:]
    private var unauthenticatedBySource: [String: Queue] = [:]
    private var unauthenticated = Queue()
    private var upgradingQueue = Queue()
    private var unauthenticatedCount = 0
    private var upgradingCount = 0

    public init(limits: Limits) { self.limits = limits }

    /// A connection from `source` was accepted (its number higher than any before). The action
    /// may close it at once (`refused`) and others to make room.
    public mutating func accepted(_ id: UInt64, from source: String, at now: ContinuousClock.Instant) -> Action {
        var action = Action()
        // Each bound in turn, its count read anew: a connection closed for one bound frees
        // room under the others.
        enum Bound: CaseIterable { case source, total, unauthenticated, upgrading }
        for bound in Bound.allCases {
            while true {
                let (count, limit): (Int, Int)
                switch bound {
                case .source: (count, limit) = (perSource[source, default: 0], limits.maxPerSource)
                case .total: (count, limit) = (entries.count, limits.maxConnections)
                case .unauthenticated: (count, limit) = (unauthenticatedCount, limits.maxUnauthenticated)
                case .upgrading: (count, limit) = (upgradingCount, limits.maxUpgrading)
                }
                guard count >= limit else { break }
                let victim: UInt64?
                switch bound {
                case .source: victim = oldestUnauthenticated(from: source)
                case .total, .unauthenticated: victim = oldestUnauthenticated()
                case .upgrading: victim = oldestUpgrading()
                }
                guard let victim else {
                    tally.cut[.refused, default: 0] += 1
                    action.close.append((id, .refused))
                    recount()
                    return action
                }
                remove(victim)
                tally.cut[.madeRoom, default: 0] += 1
                action.close.append((victim, .madeRoom))
            }
        }
        entries[id] = Entry(source: source, accepted: now, phase: .upgrading)
        perSource[source, default: 0] += 1
        unauthenticatedCount += 1
        upgradingCount += 1
        unauthenticated.append(id)
        // Looking at the front moves it past what has moved on, so a source that always has a
        // connection open (every page through one proxy) does not grow its queue without end.
        _ = unauthenticatedBySource[source]?.first { [entries] in entries[$0].map { $0.phase != .authenticated } ?? false }
        unauthenticatedBySource[source, default: Queue()].append(id)
        upgradingQueue.append(id)
        recount()
        return action
    }

    /// The connection finished its WebSocket upgrade.
    public mutating func upgraded(_ id: UInt64) {
        guard let entry = entries[id] else { return }
        switch entry.phase {
        case .upgrading:
            entries[id]?.phase = .waiting
            upgradingCount -= 1
            recount()
        case .waiting, .authenticated:
            return
        }
    }

    /// The connection proved who it is. Returns false for one the rules no longer hold (closed
    /// meanwhile).
    @discardableResult
    public mutating func authenticated(_ id: UInt64) -> Bool {
        guard let entry = entries[id] else { return false }
        switch entry.phase {
        case .upgrading, .waiting:
            if entry.phase == .upgrading { upgradingCount -= 1 }
            entries[id]?.phase = .authenticated
            unauthenticatedCount -= 1
            recount()
        case .authenticated:
            break
        }
        return true
    }

    /// The connection is closed, for `cut` (counted) or by its peer or the endpoint (nil).
    public mutating func closed(_ id: UInt64, cut: Cut? = nil) {
        guard entries[id] != nil else { return }
        remove(id)
        if let cut { tally.cut[cut, default: 0] += 1 }
        recount()
    }

    /// Closes whatever has run out of time: upgrades not finished within `upgradeTimeout`,
    /// connections not authenticated within `authenticationTimeout`.
    public mutating func sweep(at now: ContinuousClock.Instant) -> Action {
        var action = Action()
        while let id = oldestUpgrading(), let entry = entries[id], now - entry.accepted >= limits.upgradeTimeout {
            remove(id)
            tally.cut[.upgradeTimedOut, default: 0] += 1
            action.close.append((id, .upgradeTimedOut))
        }
        while let id = oldestUnauthenticated(), let entry = entries[id], now - entry.accepted >= limits.authenticationTimeout {
            remove(id)
            tally.cut[.notAuthenticated, default: 0] += 1
            action.close.append((id, .notAuthenticated))
        }
        recount()
        return action
    }

    private mutating func oldestUnauthenticated() -> UInt64? {
        unauthenticated.first { [entries] in entries[$0].map { $0.phase != .authenticated } ?? false }
    }

    private mutating func oldestUnauthenticated(from source: String) -> UInt64? {
        let entries = entries
        let found = unauthenticatedBySource[source]?.first { entries[$0].map { $0.phase != .authenticated } ?? false }
        if unauthenticatedBySource[source]?.isEmpty == true { unauthenticatedBySource[source] = nil }
        return found
    }

    private mutating func oldestUpgrading() -> UInt64? {
        upgradingQueue.first { [entries] in entries[$0]?.phase == .upgrading }
    }

    private mutating func remove(_ id: UInt64) {
        guard let entry = entries.removeValue(forKey: id) else { return }
        switch entry.phase {
        case .upgrading:
            unauthenticatedCount -= 1
            upgradingCount -= 1
        case .waiting: unauthenticatedCount -= 1
        case .authenticated: break
        }
        let left = perSource[entry.source, default: 1] - 1
        perSource[entry.source] = left > 0 ? left : nil
        if left == 0 { unauthenticatedBySource[entry.source] = nil }
    }

    private mutating func recount() {
        tally.open = entries.count
        tally.authenticated = entries.count - unauthenticatedCount
        tally.upgrading = upgradingCount
    }
}
