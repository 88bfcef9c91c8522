import AppStoreSimulator
import Foundation
import RenewalCore
import RenewalSQL
import RenewalStorage
import Testing

/// The Grafana Revenue row's "MRR movement per day" panel: its SQL, read from the dashboard file, on the
/// daily series refreshed from the ledger a real run wrote, on both databases.
extension DashboardViewsTests {
    /// The SQL of the dashboard panel titled `title`.
    static func panelSQL(titled title: String) throws -> String {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        let data = try Data(contentsOf: root.appendingPathComponent("Deploy/grafana/renewal-dashboard.json"))
        let dashboard = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        let panels = try #require(dashboard["panels"] as? [[String: Any]])
        let panel = try #require(panels.first { ($0["title"] as? String)?.hasPrefix(title) == true }, "no \(title)")
        let targets = try #require(panel["targets"] as? [[String: Any]])
        return try #require(targets.first?["rawSql"] as? String)
    }

    /// An amount the database returned (a double on SQLite, a numeric as text on PostgreSQL) in cents.
    static func cents(_ row: SQLRow, _ column: String) -> Int? {
        double(row, column).map { Int(($0 * 100).rounded()) }
    }

    static let movementColumns = [
        "new_mrr", "expansion_mrr", "reactivation_mrr", "contraction_mrr", "churned_mrr", "net_new_mrr",
    ]

    @Test(
        """
        MRR movement per day: the panel's SQL gives each day's buckets and net as Core's movement of that day, \
        and over the days a subscriber bought (new), a trial converted (new), an upgrade (expansion), an \
        expiry and a refund (churned)
        """,
        arguments: Backend.available)
    func movementPanel(backend: Backend) async throws {
        try await JobHarness.with(backend) { h in
            let store = try await MRRMovementJobTests.runMovingSubscribers(h)
            let catalogue = MRRMovementJobTests.catalogue
            // `renewal analytics --refresh-daily --since 20d`: the days from 20 days ago through today.
            let first = h.state.now.addingTimeInterval(-20 * 86_400)
            var daily = DailyAnalytics(
                from: first, through: h.state.now, catalogue: catalogue, reportingCurrency: "USD")
            try await store.forEachSubscriptionLedger(bundleID: nil) { daily.add($0) }
            let range = try #require(daily.range)
            try await store.replaceAnalyticsDays(
                first: range.first, last: range.last, bundleID: nil, rows: daily.rows(rates: ExchangeRates()),
                computedAt: Date())

            // Core's movement of each of those days, in cents: the reference.
            let start = try #require(DailyAnalytics.dayStart(named: range.first))
            let end = try #require(DailyAnalytics.dayStart(named: range.last)).addingTimeInterval(86_400)
            var analytics = SubscriptionAnalytics(since: start, until: end, catalogue: catalogue)
            try await store.forEachSubscriptionLedger(bundleID: nil) { analytics.add($0) }
            var expected: [String: [Int]] = [:]
            for (name, day) in zip(analytics.movement.dayNames, analytics.movement.days) {
                let buckets: [MRRMovement.Bucket] = [.new, .expansion, .reactivation, .contraction, .churned]
                let cents = buckets.map {
                    Int(truncating: (ExchangeRates().convert(day[$0]).converted * 100) as NSNumber)
                }
                if cents.contains(where: { $0 != 0 }) { expected[name] = cents + [cents.reduce(0, +)] }
            }

            var panel: [String: [Int]] = [:]
            for row in try await Self.query(h, try Self.panelSQL(titled: "MRR movement per day")) {
                let values = Self.movementColumns.map { Self.cents(row, $0) ?? -1 }
                if values.contains(where: { $0 != 0 }) { panel[Self.text(row, "day") ?? "?"] = values }
            }
            print("figures[mrr movement panel, \(backend)]: \(panel.sorted { $0.key < $1.key })")
            #expect(panel == expected)
            let totals = (0..<6).map { column in panel.values.map { $0[column] }.reduce(0, +) }
            // new: the subscriber who bought 10 days ago, the trial converted then, and the refunded subscriber,
            // whose ledger starts with the renewal verifyReceipt gave (14:13 on the first day, so the day sees it
            // begin; MRRMovementJobTests' window starts at that very moment and does not); expansion: 9.99 ->
            // 19.99; churned: the voluntary expiry and the refund, 9.99 each. MRR went from 29.97 (steady, up and
            // gone) to 49.96 (steady, trial, up at 19.99, new).
            #expect(totals == [2_997, 1_000, 0, 0, -1_998, 1_999], "\(totals)")
            let mrr = try await Self.query(
                h,
                """
                SELECT day, SUM(mrr) AS mrr FROM analytics_daily_series WHERE environment = 'Production'
                AND day IN ('\(range.first)', '\(range.last)') GROUP BY day ORDER BY day
                """)
            let mrrs = mrr.compactMap { Self.cents($0, "mrr") }
            let startMRR = Int(
                truncating: (ExchangeRates().convert(analytics.movement.window.atStart).converted * 100) as NSNumber)
            #expect(mrrs.count == 2 && (mrrs.last ?? 0) - startMRR == totals[5], "\(mrrs), at the start \(startMRR)")
        }
    }
}
