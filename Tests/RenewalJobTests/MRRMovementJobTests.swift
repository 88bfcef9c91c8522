import AppStoreSimulator
import Foundation
import RenewalCore
import RenewalReports
import RenewalStorage
import Testing

/// MRR movement and the figures that explain it, through the real job against the simulator: the ledger
/// the job wrote answers `renewal analytics --json` (`AnalyticsReport.json()`, what the command prints)
/// with the new keys beside every existing one, and the movement adds up to the MRR it reports.
@Suite("MRR movement in --json: the job's ledger, on SQLite and PostgreSQL")
struct MRRMovementJobTests {
    static let catalogue = ProductCatalogue(products: [
        "com.example.pro.monthly": .init(period: .month, listPrices: ["USD": Decimal(string: "9.99")!]),
        "com.example.pro.monthly.premium": .init(period: .month, listPrices: ["USD": Decimal(string: "19.99")!]),
    ])

    static let existingKeys = [
        "since", "until", "currency", "bundle_id", "active_subscriptions", "active_trials", "mrr", "new_subscriptions",
        "new_trials", "trial_conversions", "trial_funnel", "churned", "churn_rate", "reactivations", "revenue",
        "refunds", "net_revenue", "unconverted", "unpriced_transactions", "by_product", "cohorts",
    ]
    static let newKeys = [
        "mrr_movement", "mrr_movement_daily", "arpu", "refund_rate_by_period", "trial_conversion_by_cohort",
        "ltv_by_cohort",
    ]

    /// One run of six subscribers whose MRR moves in each way over the last 20 days: bought in them
    /// (new), a trial converted (new), an upgrade (expansion), a voluntary expiry and a refund (churned),
    /// and a steady renewal (nothing). Returns the store the run wrote, to read its ledger.
    static func runMovingSubscribers(_ h: JobHarness) async throws -> any AnalyticsStore {
        try await h.importReceipts([
            ("steady", h.receipt("steady", .renewal, daysAgo: 35)),
            ("new", h.receipt("new", .renewal, daysAgo: 10)),
            ("trial", h.receipt("trial", .trial, daysAgo: 40)),
            ("up", h.receipt("up", .upgrade, daysAgo: 55)),
            ("gone", h.receipt("gone", .voluntaryExpiry, daysAgo: 40)),
            ("refunded", h.receipt("refunded", .refund, daysAgo: 50)),
        ])
        _ = try await h.run()
        return try #require(h.store as? any AnalyticsStore)
    }

    static func cents(_ value: Any?) -> Int? {
        (value as? NSNumber).map { Int(($0.doubleValue * 100).rounded()) }
    }

    @Test(
        """
        a subscriber bought in the window (new), a trial converted in it (new), an upgrade (expansion), a \
        voluntary expiry and a refund (churned), a steady renewal (nothing): --json carries mrr_movement, \
        its days, ARPU, refund rate, trial conversion and LTV, and the movement adds up to MRR at --until \
        minus MRR at --since
        """,
        arguments: Backend.available)
    func jsonCarriesMovement(backend: Backend) async throws {
        try await JobHarness.with(backend) { h in
            let store = try await Self.runMovingSubscribers(h)
            let since = h.state.now.addingTimeInterval(-20 * 86_400)
            let until = h.state.now.addingTimeInterval(-3_600)
            var analytics = SubscriptionAnalytics(since: since, until: until, catalogue: Self.catalogue)
            try await store.forEachSubscriptionLedger(bundleID: nil) { analytics.add($0) }
            let report = AnalyticsReport(analytics, rates: ExchangeRates(), bundleID: nil)
            let json = try #require(
                try JSONSerialization.jsonObject(with: Data(report.json().utf8)) as? [String: Any])
            for key in Self.existingKeys + Self.newKeys { #expect(json[key] != nil, "\(key) missing") }
            let movement = try #require(json["mrr_movement"] as? [String: Any])
            let buckets = ["new", "expansion", "contraction", "churned", "reactivation"].map {
                Self.cents(movement[$0]) ?? -1
            }
            print("figures[mrr movement job, \(backend)]: \(movement)")
            #expect(buckets == [1998, 1000, 0, -1998, 0], "\(movement)")
            #expect(Self.cents(movement["net"]) == buckets.reduce(0, +))
            #expect(Self.cents(movement["mrr_until"]) == Self.cents(json["mrr"]))
            #expect(
                Self.cents(movement["net"])
                    == (Self.cents(movement["mrr_until"]) ?? 0) - (Self.cents(movement["mrr_since"]) ?? 0))
            let days = try #require(json["mrr_movement_daily"] as? [[String: Any]])
            #expect(days.count == 20 || days.count == 21)
            #expect(days.compactMap { Self.cents($0["net"]) }.reduce(0, +) == Self.cents(movement["net"]))
            let arpu = try #require(json["arpu"] as? [String: Any])
            #expect(arpu["subscriptions"] as? Int == json["active_subscriptions"] as? Int)
            let refunds = try #require(json["refund_rate_by_period"] as? [[String: Any]])
            #expect(refunds.compactMap { $0["refunded"] as? Int }.reduce(0, +) == 1)
            let trials = try #require(json["trial_conversion_by_cohort"] as? [[String: Any]])
            #expect(trials.compactMap { $0["converted"] as? Int }.reduce(0, +) == 1)
            let ltv = try #require(json["ltv_by_cohort"] as? [[String: Any]])
            #expect(ltv.compactMap { $0["paying_customers"] as? Int }.reduce(0, +) == 6)
        }
    }
}
