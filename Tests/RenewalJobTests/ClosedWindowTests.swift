import AppStoreSimulator
import Foundation
import RenewalCore
import RenewalJob
import RenewalStorage
import Testing

/// A closed window's figures do not move afterwards: a subscriber in a grace period at the window's end
/// is counted active then, and still is when the window is asked again after the grace period ended and
/// later runs cleared the subscription row's grace end. Through the real job, against the simulator.
@Suite("Closed windows: figures of a window ending in a grace period stay as they were, on SQLite and PostgreSQL")
struct ClosedWindowTests {
    static let catalogue = ProductCatalogue(products: [
        "com.example.pro.monthly": ProductCatalogue.Product(
            period: .month, listPrices: ["USD": Decimal(string: "9.99")!])
    ])

    @Test(
        """
        a subscriber enters a 16-day grace period; a window ending inside it counts the subscriber active (MRR, \
        no churn); after the grace period ends and two more runs, the same window gives the same figures
        """,
        arguments: Backend.available)
    func windowInGraceStaysClosed(backend: Backend) async throws {
        try await JobHarness.with(backend) { h in
            // Period [now-35d, now-5d), then a grace period to now+11d, then billing retry.
            try await h.importReceipts([
                ("grace", h.receipt("grace", .gracePeriod, daysAgo: 35)),
                ("steady", h.receipt("steady", .renewal, daysAgo: 35)),
            ])
            _ = try await h.run()
            #expect(try await h.status(user: "grace").first?.state == .gracePeriod)
            let since = h.state.now.addingTimeInterval(-20 * 86_400)
            let until = h.state.now.addingTimeInterval(-3_600)
            let before = try await Self.figures(h, since: since, until: until)
            #expect(before.activeSubscriptions == 2 && before.activeAtSince == 2 && before.churned == 0)
            #expect(before.mrr.byCurrency["USD"] == Decimal(string: "19.98"))

            h.state.advance(by: 20 * 86_400)
            _ = try await h.run(.backfill(BackfillSelector(all: true)))
            h.state.advance(by: 86_400)
            _ = try await h.run(.backfill(BackfillSelector(all: true)))
            let row = try #require(try await h.status(user: "grace").first)
            #expect(row.state == .billingRetry)
            let after = try await Self.figures(h, since: since, until: until)
            #expect(after.activeSubscriptions == before.activeSubscriptions)
            #expect(after.mrr == before.mrr)
            #expect(after.churned == before.churned && after.activeAtSince == before.activeAtSince)
            // The window after the grace period ended does count the churn.
            let later = try await Self.figures(h, since: since, until: h.state.now)
            #expect(later.churned == 1)
        }
    }

    static func figures(_ h: JobHarness, since: Date, until: Date) async throws -> AnalyticsFigures {
        let store = try #require(h.store as? any AnalyticsStore)
        var analytics = SubscriptionAnalytics(since: since, until: until, catalogue: catalogue)
        try await store.forEachSubscriptionLedger(bundleID: nil) { analytics.add($0) }
        return analytics.total
    }
}
