import AppStoreSimulator
import Foundation
import RenewalAppleAPI
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

            // Stated again by a later check in the grace period: still one fact, with Apple's grace end.
            let graceEnd = try #require(try await h.status(user: "grace").first?.gracePeriodExpiresAt)
            h.state.advance(by: 86_400)
            _ = try await h.run(.backfill(BackfillSelector(all: true)))
            let facts = try await Self.ledger(h, "grace").facts.filter { $0.kind == .gracePeriod }
            #expect(facts.count == 1 && facts.first?.endsAt == graceEnd, "\(facts)")

            h.state.advance(by: 19 * 86_400)
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

    @Test(
        """
        a renewal date Apple extends moves the stored period's expiry; the move is kept as an extension fact \
        (old expiry to new), so the ledger row's new expiry does not erase the old one
        """,
        arguments: Backend.available)
    func extensionIsKept(backend: Backend) async throws {
        try await JobHarness.with(backend) { h in
            try await h.importReceipts([("ext", h.receipt("ext", .renewal, daysAgo: 10))])
            _ = try await h.run()
            let row = try #require(try await h.status(user: "ext").first)
            let id = try #require(row.originalTransactionID)
            let expires = try #require(row.expiresAt)
            #expect(h.state.extendRenewalDate(originalTransactionID: id, days: 5, requestIdentifier: UUID().uuidString))
            h.state.advance(by: 3_600)
            try await h.withServerAPIClient { client in
                let router = SourceRouter(mode: .auto, verifyReceipt: h.client, serverAPI: client)
                _ = try await h.run(.backfill(BackfillSelector(all: true)), verifier: router)
            }
            #expect(try await h.status(user: "ext").first?.expiresAt == expires.addingTimeInterval(5 * 86_400))
            let facts = try await Self.ledger(h, "ext").facts.filter { $0.kind == .renewalExtension }
            #expect(facts.count == 1, "\(facts)")
            #expect(facts.first?.startsAt == expires && facts.first?.endsAt == expires.addingTimeInterval(5 * 86_400))
        }
    }

    static func ledger(_ h: JobHarness, _ user: String) async throws -> SubscriptionLedger {
        let store = try #require(h.store as? any AnalyticsStore)
        let id = try #require(try await h.status(user: user).first?.originalTransactionID)
        var found: SubscriptionLedger?
        try await store.forEachSubscriptionLedger(bundleID: nil) { ledger in
            if ledger.originalTransactionID == id { found = ledger }
        }
        return try #require(found)
    }

    static func figures(_ h: JobHarness, since: Date, until: Date) async throws -> AnalyticsFigures {
        let store = try #require(h.store as? any AnalyticsStore)
        var analytics = SubscriptionAnalytics(since: since, until: until, catalogue: catalogue)
        try await store.forEachSubscriptionLedger(bundleID: nil) { analytics.add($0) }
        return analytics.total
    }
}
