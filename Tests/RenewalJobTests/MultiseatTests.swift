import AppStoreSimulator
import Foundation
import RenewalAppleAPI
import RenewalCore
import RenewalJob
import RenewalSQL
import RenewalStorage
import Testing

/// Multiseat subscriptions and the kinds of revocation, on SQLite and PostgreSQL against the simulator: a
/// seat refund is not a refund of the purchase, a member is entitled by its own transaction, and a
/// prorated refund is reported as one.
@Suite("Multiseat subscriptions and revocation types")
struct MultiseatTests {
    static let day: TimeInterval = 86_400

    @Test(
        """
        A seat refund (REFUND, subtype SEATS) leaves the purchaser entitled, keeps the seats bought and the seats \
        refunded in the ledger, and counts only the refunded seats as a refund; an ASSIGNED member is entitled by \
        its own transaction and not counted as a purchase; a prorated refund is reported as REFUND_PRORATED with \
        its share
        """,
        arguments: Backend.available)
    func seatRefundMemberAndProratedRefund(backend: Backend) async throws {
        try await JobHarness.with(backend) { h in
            // Forty days in: the second monthly period; the seat refund and the refund come at day 45.
            var prorated = h.receipt("ms-prorated", .refund, daysAgo: 40)
            prorated.refundPercentage = 50_000
            try await h.importReceipts([
                ("org", h.receipt("ms-org", .multiseat, daysAgo: 40)),
                ("member", h.receipt("ms-member", .assignedSeat, daysAgo: 40)), ("prorated", prorated),
            ])
            let since = h.state.now
            try await h.withServerAPIClient { client in
                let router = SourceRouter(mode: .auto, verifyReceipt: h.client, serverAPI: client)
                _ = try await h.run(.run, verifier: router) { $0.feed = client }
                #expect(try await h.status().allSatisfy { $0.entitled }, "all three entitled at first")

                h.state.advance(by: 5 * Self.day + 3_600)
                let outcome = try await h.run(.run, verifier: router) {
                    $0.feed = client
                    $0.configuration.reportPath = h.directory + "/seats.json"
                }
                #expect(outcome.counts.notificationsApplied >= 2, "\(outcome.counts)")

                let org = try #require(try await h.status(user: "org").first)
                #expect(org.entitled && org.state == .active, "a seat refund never revokes the purchaser: \(org)")
                let member = try #require(try await h.status(user: "member").first)
                #expect(member.entitled && member.ownershipType == "ASSIGNED", "\(member)")
                let refunded = try #require(try await h.status(user: "prorated").first)
                #expect(!refunded.entitled && refunded.state == .revoked)

                // The ledger keeps the seats bought and those refunded, on the period refunded.
                let seats = try await DashboardViewsTests.query(
                    h,
                    """
                    SELECT quantity, revoked_seat_quantity, seats_revoked_at, revoked_at FROM transactions
                    WHERE user_id = 'org' ORDER BY purchased_at
                    """)
                let current = try #require(seats.last)
                #expect(DashboardViewsTests.int(current, "quantity") == 5)
                #expect(DashboardViewsTests.int(current, "revoked_seat_quantity") == 2)
                #expect(DashboardViewsTests.int(current, "seats_revoked_at") != nil)
                #expect(DashboardViewsTests.int(current, "revoked_at") == nil)

                // The report names the prorated refund as one, with its share; the seat refund changes no
                // entitlement.
                let report = try h.report(outcome)
                let changes = try #require(report["changes"] as? [[String: Any]])
                let refund = try #require(changes.first { $0["kind"] as? String == "refunded" }, "\(changes)")
                #expect(refund["revocation_type"] as? String == "REFUND_PRORATED")
                #expect((refund["revocation_percentage"] as? NSNumber)?.intValue == 50_000)
                #expect(!changes.contains { ($0["user_id"] as? String) == "org" }, "\(changes)")

                // Analytics: the purchaser's three seats left are its MRR; the two seats refunded and half the
                // prorated refund are the refunds; the member is no purchase.
                let store = try #require(h.store as? any AnalyticsStore)
                var analytics = SubscriptionAnalytics(since: since, until: h.state.now)
                try await store.forEachSubscriptionLedger(bundleID: SimulatedReceipt.bundleID) { analytics.add($0) }
                let total = analytics.total
                #expect(total.activeSubscriptions == 1, "the purchaser only: \(total)")
                #expect(total.mrr.byCurrency["USD"] == Decimal(string: "29.97"), "\(total.mrr)")
                #expect(total.refunds.byCurrency["USD"] == Decimal(string: "24.975"), "\(total.refunds)")
            }
        }
    }
}
