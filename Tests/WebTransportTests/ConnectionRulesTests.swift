import Testing
@testable import WebTransport

/// The rules ws:// connections are held to, driven directly: which connection each event closes.
@Suite("connection rules")
struct ConnectionRulesTests {
    let start = ContinuousClock.now

    func rules(max: Int = 8, upgrading: Int = 8, perSource: Int? = nil, reserved: Int? = nil) -> ConnectionRules {
        ConnectionRules(limits: .init(maxConnections: max, maxUpgrading: upgrading, upgradeTimeout: .seconds(5),
                                      authenticationTimeout: .seconds(5), maxPerSource: perSource, reservedForAuthenticated: reserved))
    }

    @Test("past the cap the oldest connection that has not authenticated makes room, never one that has")
    func oldestUnauthenticatedGoes() {
        var rules = rules(max: 4, reserved: 0)
        for id in 1...4 { #expect(rules.accepted(UInt64(id), from: "a", at: start) == .init()) }
        for id in 1...4 { rules.upgraded(UInt64(id)) }
        rules.authenticated(1)
        rules.authenticated(3)
        #expect(rules.accepted(5, from: "b", at: start).close.map(\.id) == [2])
        #expect(rules.accepted(6, from: "b", at: start).close.map(\.id) == [4])
        // 5 and 6 have not authenticated either: the older goes.
        #expect(rules.accepted(7, from: "b", at: start).close.map(\.id) == [5])
        rules.authenticated(6)
        rules.authenticated(7)
        // Every connection has authenticated: the new one is refused.
        let refused = rules.accepted(8, from: "c", at: start)
        #expect(refused.close.map(\.id) == [8] && refused.close.map(\.cut) == [.refused])
        #expect(rules.tally.open == 4 && rules.tally.authenticated == 4)
        #expect(rules.tally.cut[.madeRoom] == 3 && rules.tally.cut[.refused] == 1)
    }

    @Test("a source past its share makes room among its own connections only")
    func perSource() {
        var rules = rules(max: 10, perSource: 2, reserved: 0)
        _ = rules.accepted(1, from: "page", at: start)
        rules.authenticated(1)
        _ = rules.accepted(2, from: "flood", at: start)
        _ = rules.accepted(3, from: "flood", at: start)
        #expect(rules.accepted(4, from: "flood", at: start).close.map(\.id) == [2])
        // The page's own source is under its share: nothing of the flood's counts against it.
        #expect(rules.accepted(5, from: "page", at: start) == .init())
        rules.authenticated(5)
        #expect(rules.accepted(6, from: "page", at: start).close.map(\.cut) == [.refused])
    }

    @Test("unauthenticated connections never take the reserved slots")
    func reserved() {
        var rules = rules(max: 4, reserved: 2)
        _ = rules.accepted(1, from: "a", at: start)
        _ = rules.accepted(2, from: "a", at: start)
        #expect(rules.accepted(3, from: "a", at: start).close.map(\.id) == [1])
        rules.authenticated(3)
        #expect(rules.accepted(4, from: "a", at: start) == .init())
        #expect(rules.accepted(5, from: "a", at: start).close.map(\.id) == [2])
        // Two unauthenticated (4, 5) and one that has: the fourth slot is kept for another page.
        #expect(rules.tally.open == 3 && rules.tally.authenticated == 1)
    }

    @Test("upgrades past the bound make room from the oldest upgrade; finished ones do not count")
    func upgrading() {
        var rules = rules(max: 10, upgrading: 2, reserved: 0)
        _ = rules.accepted(1, from: "a", at: start)
        _ = rules.accepted(2, from: "a", at: start)
        #expect(rules.accepted(3, from: "a", at: start).close.map(\.id) == [1])
        rules.upgraded(2)
        #expect(rules.accepted(4, from: "a", at: start) == .init())
        #expect(rules.tally.upgrading == 2)
    }

    @Test("the sweep closes an unfinished upgrade and an unauthenticated connection at their times, and nothing early")
    func timeouts() {
        var rules = rules()
        _ = rules.accepted(1, from: "a", at: start)
        _ = rules.accepted(2, from: "a", at: start + .seconds(1))
        rules.upgraded(2)
        _ = rules.accepted(3, from: "a", at: start + .seconds(2))
        rules.upgraded(3)
        rules.authenticated(3)
        #expect(rules.sweep(at: start + .milliseconds(4999)) == .init())
        let first = rules.sweep(at: start + .seconds(5))
        #expect(first.close.map(\.id) == [1] && first.close.map(\.cut) == [.upgradeTimedOut])
        let second = rules.sweep(at: start + .seconds(6))
        #expect(second.close.map(\.id) == [2] && second.close.map(\.cut) == [.notAuthenticated])
        #expect(rules.sweep(at: start + .seconds(600)) == .init())
        #expect(rules.tally.open == 1)
    }

    @Test("a closed connection frees its slot, and closing it twice counts once")
    func closing() {
        var rules = rules(max: 2, reserved: 0)
        _ = rules.accepted(1, from: "a", at: start)
        rules.authenticated(1)
        _ = rules.accepted(2, from: "a", at: start)
        rules.authenticated(2)
        rules.closed(1, cut: .revoked)
        rules.closed(1, cut: .revoked)
        #expect(rules.tally.cut[.revoked] == 1)
        #expect(rules.accepted(3, from: "a", at: start) == .init())
        #expect(rules.authenticated(1) == false)
    }

    @Test("a flood of silent connections keeps pushing itself out and never a page that authenticated (model check)")
    func flood() {
        var rules = rules(max: 64, upgrading: 16, perSource: 48, reserved: 16)
        var open: Set<UInt64> = []
        var pages: Set<UInt64> = []
        var generator = SystemRandomNumberGenerator()
        for id in UInt64(1)...20_000 {
            let source = id % 7 == 0 ? "page" : "flood"
            let action = rules.accepted(id, from: source, at: start)
            for (closed, _) in action.close { open.remove(closed) }
            if !action.close.contains(where: { $0.id == id }) { open.insert(id) }
            #expect(pages.isDisjoint(with: action.close.map(\.id)), "a page that had authenticated was closed")
            if open.contains(id), Bool.random(using: &generator) { rules.upgraded(id) }
            if source == "page", open.contains(id), pages.count < 40 {
                rules.authenticated(id)
                pages.insert(id)
            }
            #expect(rules.tally.open == open.count)
            #expect(rules.tally.open <= 64 && rules.tally.open - rules.tally.authenticated <= 48)
        }
        #expect(pages.count == 40 && pages.isSubset(of: open))
    }
}
