import AppStoreSimulator
import Foundation
import RenewalCore
import RenewalJob
import RenewalPostgres
import RenewalSQL
import RenewalSQLite
import RenewalStorage
import Testing

/// The entitlement spans the save transaction keeps (`entitlement_spans`) are Core's timeline of each
/// subscription after every run: a grace period that ended, a recovery after billing retry and a refund,
/// through the real job and the simulator, on SQLite and PostgreSQL.
@Suite("Entitlement spans: kept by the save transaction, equal to Core's timeline, on SQLite and PostgreSQL")
struct EntitlementSpansJobTests {
    @Test(
        """
        after every run the stored spans equal EntitlementTimeline.spans of the ledger, a span holds now exactly \
        when the row is entitled; the grace span stays after the grace period ends, a recovery leaves a gap, a \
        refund ends its span at the revocation
        """,
        arguments: Backend.available)
    func spansFollowTheLedger(backend: Backend) async throws {
        try await JobHarness.with(backend) { h in
            try await h.importReceipts([
                ("grace", h.receipt("grace", .gracePeriod, daysAgo: 35)),
                ("recovery", h.receipt("recovery", .billingRecovery, daysAgo: 32)),
                ("refund", h.receipt("refund", .refund, daysAgo: 50)),
                ("trial", h.receipt("trial", .trial, daysAgo: 5)),
                ("upgrade", h.receipt("upgrade", .upgrade, daysAgo: 50)),
                ("family", h.receipt("family", .familyShared, daysAgo: 10)),
                ("sandbox", h.receipt("sandbox", .sandbox, daysAgo: 10)),
                ("multiseat", h.receipt("multiseat", .multiseat, daysAgo: 50)),
            ])
            _ = try await h.run()
            try await Self.expectSpansAreCoresTimeline(h)
            let graceEnd = try #require(try await h.status(user: "grace").first?.gracePeriodExpiresAt)
            let grace = try await Self.spans(h, "grace")
            #expect(grace.map(\.byGrace) == [false, true] && grace.last?.endsAt == graceEnd, "\(grace)")

            // The grace period ends and later runs clear the row's grace end: its span is kept.
            h.state.advance(by: 20 * 86_400)
            _ = try await h.run(.backfill(BackfillSelector(all: true)))
            #expect(try await h.status(user: "grace").first?.state == .billingRetry)
            try await Self.expectSpansAreCoresTimeline(h)
            #expect(try await Self.spans(h, "grace") == grace)

            let recovery = try await Self.spans(h, "recovery")
            // In billing retry at the first run, recovered before the second: two spans with the retry between.
            #expect(
                recovery.count == 2 && recovery[0].endsAt.map { $0 < recovery[1].startsAt } == true, "\(recovery)")
            let refund = try await Self.spans(h, "refund")
            let refunded = try #require(
                try await ClosedWindowTests.ledger(h, "refund").transactions.first { $0.revokedAt != nil })
            #expect(refund.last?.endsAt == refunded.revokedAt && refund.last?.transactionID == refunded.transactionID)
            #expect(try await Self.spans(h, "trial").first?.kind == .trial)
            // What the analytics do not count has no spans: a family-shared copy (its row is entitled).
            #expect(try await Self.spans(h, "family").isEmpty)
            #expect(try await h.status(user: "family").first?.entitled == true)
            #expect(try await !Self.spans(h, "sandbox").isEmpty)
        }
    }

    /// Every subscription's stored spans are what Core computes from its ledger now, and one holds now
    /// exactly when its row is entitled.
    static func expectSpansAreCoresTimeline(_ h: JobHarness) async throws {
        let store = try #require(h.store as? any AnalyticsStore)
        var ledgers: [SubscriptionLedger] = []
        try await store.forEachSubscriptionLedger(bundleID: nil) { ledgers.append($0) }
        #expect(ledgers.count >= 8)
        for ledger in ledgers {
            let stored = try await spans(h, id: ledger.originalTransactionID)
            #expect(stored == ledger.timeline(in: ledger.environment ?? .production).spans, "\(ledger)")
            let row = try await h.status().first { $0.originalTransactionID == ledger.originalTransactionID }
            // Only what the analytics count has spans; a family-shared copy's row alone says it is entitled.
            guard let environment = ledger.environment, !ledger.countedTransactions(in: environment).isEmpty else {
                #expect(stored.isEmpty)
                continue
            }
            let entitledNow = EntitlementTimeline.span(at: h.state.now, in: stored) != nil
            #expect(row?.entitled == entitledNow, "\(ledger.originalTransactionID): \(stored)")
        }
    }

    static func spans(_ h: JobHarness, _ user: String) async throws -> [EntitlementSpan] {
        try await spans(h, id: try #require(try await h.status(user: user).first?.originalTransactionID))
    }

    static func spans(_ h: JobHarness, id: String) async throws -> [EntitlementSpan] {
        if let store = h.store as? SQLiteSubscriptionStore { return try await store.entitlementSpans(of: id) }
        let store = try #require(h.store as? PostgresSubscriptionStore)
        return try await store.entitlementSpans(of: id)
    }
}
