import AppStoreSimulator
import Foundation
import RenewalAppleAPI
import RenewalCore
import RenewalJob
import RenewalStorage
import RenewalTesting
import Testing

/// Issue 43: over a simulated month, what the job stores and what the analytics compute from the ledger say
/// the same thing about every subscription, after every run.
@Suite("Timeline property: after every run of a simulated month, the stored state and Core's answer agree")
struct TimelinePropertyTests {
    static let hour: TimeInterval = 3_600
    static let days = 30.0
    static let subscribers = 300

    /// The population's seed: `RENEWAL_PROPERTY_SEED` replays another one (the failure message names it).
    static var seed: UInt64 {
        ProcessInfo.processInfo.environment["RENEWAL_PROPERTY_SEED"].flatMap { UInt64($0) } ?? 43
    }

    /// How the job learns of Apple's changes: through the change feed (Server API deployments; Apple lists
    /// each notification two minutes after its event), or by polling alone (verifyReceipt deployments).
    enum Learning: String, CaseIterable, CustomStringConvertible, Sendable {
        case feed, polling
        var description: String { rawValue }
    }

    @Test(
        """
        A month of subscribers on the simulator (renewals, free trials, cancellations, billing failures with and \
        without a grace period, recovered or ended, full and prorated refunds, upgrades, multiseat, extensions), \
        runs 1 to 12 hours apart: after each run every production subscription bought by its customer is \
        entitled in the database exactly when the analytics' ledger says it is entitled now (but in the minutes \
        between an end and the check planned after it), and the analytics' active count equals the rows stored \
        as entitled and paid; at the end, Core's answer for each earlier run's moment is still the one stored \
        then, unless Apple's facts about that moment changed since
        """,
        arguments: Backend.available, Learning.allCases)
    func storedStateAgreesWithTheLedger(backend: Backend, learning: Learning) async throws {
        let seed = Self.seed
        try await JobHarness.with(backend) { h in
            let origin = h.state.now
            let population = TimelinePopulation(count: Self.subscribers, seed: seed, origin: origin, days: Self.days)
            print("timeline property [\(backend), \(learning)]: seed \(seed), \(population.summary)")
            try await h.importReceipts(population.members.map { ($0.user, $0.receipt) })
            if learning == .feed { h.state.notificationDelay = 120 }
            let store = try #require(h.store as? any AnalyticsStore)
            var tally = Tally(seed: seed, backend: backend, learning: learning)
            // The runs' own moments come from the seed too: 1 to 12 hours apart, so some fall minutes after
            // an expiry or a grace period's end and some hours after.
            var random = SeededGenerator(seed: seed ^ 0x5EED)
            var moments: [LaterAnswers.Moment] = []
            try await h.withServerAPIClient { client in
                let router = SourceRouter(
                    mode: learning == .feed ? .auto : .verifyReceipt, verifyReceipt: h.client, serverAPI: client)
                var extensions = population.members.filter { $0.extension_ != nil }
                let end = origin.addingTimeInterval(Self.days * 86_400)
                while h.state.now < end {
                    try await Self.grantExtensions(&extensions, h: h, seed: seed, tally: &tally)
                    _ = try await h.run(.run, verifier: router) {
                        if learning == .feed { $0.feed = client }
                        $0.operatorActions = client
                    }
                    let now = h.state.now
                    let comparison = EntitlementComparison(
                        rows: try await StoredSubscription.all(h), ledgers: try await Self.ledgers(store), now: now)
                    tally.add(comparison, now: now)
                    moments.append(LaterAnswers.Moment(run: tally.runs - 1, at: now, agreed: comparison.agreed))
                    h.state.advance(by: Double.random(in: 1...12, using: &random) * Self.hour)
                }
            }
            // At the end, every earlier moment again, from the month's final ledger.
            tally.record(LaterAnswers(moments, final: try await Self.ledgers(store)))
            print(tally.summary)
            // The population exercises the property: entitlements come and go over the month.
            #expect(tally.flips > Self.subscribers / 4, "entitlement changes over the month: \(tally.flips)")
            #expect(tally.extensions > 0)
        }
    }

    /// Extensions Apple granted by now (an operator asked elsewhere): the job learns of them from the feed
    /// or its next check, as of any other change. Apple refuses a subscription no longer active.
    static func grantExtensions(
        _ pending: inout [TimelinePopulation.Member], h: JobHarness, seed: UInt64, tally: inout Tally
    ) async throws {
        let now = h.state.now
        for member in pending where (member.extension_?.at ?? .distantFuture) <= now {
            let granted = h.state.extendRenewalDate(
                originalTransactionID: member.receipt.originalTransactionID, days: member.extension_?.days ?? 1,
                requestIdentifier: "tp-\(seed)-\(member.user)")
            tally.extensions += granted ? 1 : 0
        }
        pending.removeAll { ($0.extension_?.at ?? .distantFuture) <= now }
    }

    /// Every subscription's ledger, read a page at a time through `ledgerPage`.
    static func ledgers(_ store: any AnalyticsStore) async throws -> [String: SubscriptionLedger] {
        var ledgers: [String: SubscriptionLedger] = [:]
        var after: String?
        while true {
            let page = try await store.ledgerPage(bundleID: nil, after: after, limit: 97)
            for ledger in page { ledgers[ledger.originalTransactionID] = ledger }
            guard page.count == 97, let last = page.last else { return ledgers }
            after = last.originalTransactionID
        }
    }
}
