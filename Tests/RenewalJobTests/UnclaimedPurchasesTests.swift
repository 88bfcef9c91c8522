import AppStoreSimulator
import Foundation
import RenewalAppleAPI
import RenewalCore
import RenewalJob
import RenewalObservability
import RenewalSQL
import RenewalStorage
import Testing

/// Issue 44's report side: the purchases the feed adopted and nobody claimed are listed with their state and
/// revenue, counted by the view `unclaimed_purchases` and the metrics, and stay in the ledger the analytics
/// read; a claim takes one off every list. On SQLite and PostgreSQL.
@Suite("Unclaimed purchases: the view, the listing, the metrics and the ledger")
struct UnclaimedPurchasesTests {
    @Test(
        """
        Three adopted purchases without a user (one of four has its token registered): the view counts three \
        with the ledger's revenue, pages of two list all three with Apple's state, the gauges say three and \
        the oldest's age, the ledger holds their transactions; a claim by hand leaves two everywhere
        """,
        arguments: Backend.available)
    func unclaimedPurchasesAreReported(backend: Backend) async throws {
        try await JobHarness.with(backend) { h in
            try await h.importReceipts([("steady", h.receipt("up-steady", .renewal, daysAgo: 3))])
            try await h.withServerAPIClient { client in
                let router = SourceRouter(mode: .auto, verifyReceipt: h.client, serverAPI: client)
                _ = try await h.run(.run, verifier: router) { $0.feed = client }
                let lost =
                    h.state.makeLostPurchases(count: 3, prefix: "up-token", spacing: 600)
                    + h.state.makeLostPurchases(count: 1, prefix: "up-bare", spacing: 600, withToken: false)
                let token0 = try #require(lost[0].accountToken)
                _ = try await h.store.importReceipts(
                    [ReceiptImport(userID: "u-zero", latestReceipt: nil, appAccountToken: token0)], now: h.state.now)
                h.state.advance(by: 2 * 3_600)
                _ = try await h.run(.run, verifier: router) { $0.feed = client }

                let waiting = Set(lost.dropFirst().map(\.originalTransactionID))
                try await Self.expectReported(waiting, h)

                let claims = try #require(h.store as? any PurchaseClaiming)
                let first = try #require(waiting.sorted().first)
                _ = try await claims.claim(
                    originalTransactionID: first, user: "u-hand", reassign: false, method: .hand, runID: nil,
                    queueWebhooks: false, now: h.state.now)
                try await Self.expectReported(waiting.subtracting([first]), h)
            }
        }
    }

    /// The view, the pages, the summary and the gauges all name exactly `waiting`.
    static func expectReported(_ waiting: Set<String>, _ h: JobHarness) async throws {
        let source = try #require(h.store as? any UnclaimedPurchaseStore)
        var listed: [UnclaimedPurchase] = []
        var after: String?
        while true {
            let page = try await source.unclaimedPage(after: after, limit: 2)
            listed += page
            guard page.count == 2, let last = page.last else { break }
            after = last.originalTransactionID
        }
        #expect(listed.map(\.originalTransactionID) == waiting.sorted())
        for purchase in listed {
            #expect(purchase.state == .active, "\(purchase.originalTransactionID)")
            #expect(purchase.expiresAt != nil && purchase.productID != nil && purchase.bundleID != nil)
            #expect(!purchase.revenue.isEmpty && purchase.revenue.values.allSatisfy { $0 > 0 }, "\(purchase.revenue)")
        }
        // The view: counts and revenue per day and currency match the listing.
        let rows = try await DashboardViewsTests.query(
            h, "SELECT currency, purchases, revenue_milliunits, oldest_adopted_at_ms FROM unclaimed_purchases")
        let viewCount = rows.compactMap { DashboardViewsTests.int($0, "purchases") }.reduce(0, +)
        #expect(viewCount == waiting.count, "\(rows)")
        let viewRevenue = rows.compactMap { DashboardViewsTests.int($0, "revenue_milliunits") }.reduce(0, +)
        let listedRevenue = listed.flatMap(\.revenue.values).reduce(0, +)
        #expect(Int64(viewRevenue) == listedRevenue && listedRevenue > 0)

        let viewOldest = rows.compactMap { DashboardViewsTests.int($0, "oldest_adopted_at_ms") }.min()
        #expect(viewOldest == listed.map { Int(($0.adoptedAt.timeIntervalSince1970 * 1000).rounded()) }.min())
        let summary = try await source.unclaimedSummary()
        #expect(summary.map(\.count).reduce(0, +) == waiting.count, "\(summary)")
        let oldest = try #require(listed.map(\.adoptedAt).min())
        #expect(summary.map(\.oldestAdoptedAt).min() == oldest)
        let metrics = RunMetrics(command: "run")
        metrics.unclaimedPurchases(summary, now: oldest.addingTimeInterval(90_000))
        let text = metrics.text()
        #expect(Self.sum("renewal_unclaimed_purchases{", in: text) == Double(waiting.count), "\(text)")
        #expect(Self.sum("renewal_unclaimed_purchases_oldest_age_seconds{", in: text) == 90_000, "\(text)")

        // The ledger (what the analytics read) holds every adopted purchase's transactions, claimed or not.
        let analytics = try #require(h.store as? any AnalyticsStore)
        var ledgers = Set<String>()
        try await analytics.forEachSubscriptionLedger(bundleID: nil) { ledger in
            if !ledger.transactions.isEmpty { ledgers.insert(ledger.originalTransactionID) }
        }
        #expect(waiting.isSubset(of: ledgers), "\(ledgers)")
    }

    /// The sum of the samples whose line starts with `prefix` in Prometheus text.
    static func sum(_ prefix: String, in text: String) -> Double {
        text.split(separator: "\n").filter { $0.hasPrefix(prefix) }.compactMap { line in
            line.split(separator: " ").last.flatMap { Double(String($0)) }
        }.reduce(0, +)
    }
}
