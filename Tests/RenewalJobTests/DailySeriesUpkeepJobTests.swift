import AppStoreSimulator
import Foundation
import RenewalAppleAPI
import RenewalCore
import RenewalSQL
import RenewalStorage
import RenewalTesting
import Testing

/// Issue 45: the daily series (`analytics_daily`) and the cohort table are current after every run, read
/// from the analytics summaries, with no `renewal analytics --refresh-daily` and no pass over the ledger.
@Suite("The daily series kept by every run from the summaries, on both databases")
struct DailySeriesUpkeepJobTests {
    static let day: TimeInterval = 86_400

    @Test(
        """
        ten days of runs (first checks, renewals, the feed, a backfill revealing a late refund) leave every day's \
        rows equal to the ledger's DailyAnalytics, and a refund recorded outside a run for an old day is in the \
        series after the next run's end
        """,
        arguments: Backend.available)
    func keptByRuns(backend: Backend) async throws {
        try await JobHarness.with(backend) { h in
            let store = try #require(h.store as? any DailySeriesStore)
            _ = try await store.rebuildAnalyticsSummaries()
            let origin = h.state.now
            var plan = ClosedWindowPlan(origin: origin)
            h.state.notificationDelay = 120
            try await h.withServerAPIClient { client in
                let router = SourceRouter(mode: .auto, verifyReceipt: h.client, serverAPI: client)
                try await ClosedWindowMonthTests.runs(
                    h, plan: &plan, through: origin.addingTimeInterval(10 * Self.day), router, client)
            }
            try await ClosedWindowMonthTests.revealLateRefund(
                h, plan.late, at: origin.addingTimeInterval(8 * Self.day))
            try await Self.expectSeries(h, store, from: origin, label: "after the runs")
            #expect(try await store.analyticsDailyPending().from == nil, "the runs' ends refreshed every marked day")

            let before = try await store.analyticsDailyPending()
            try await SummaryUpkeepJobTests.refundOutsideARun(h, store)
            try await store.compactSummaries()
            let pending = try await store.analyticsDailyPending()
            #expect(pending.from != nil && pending.marks > before.marks, "the fold marks the refund's days")
            // A refresh that read the summaries before that fold writes nothing and leaves the mark.
            let stale = try await store.replaceDailySeries(
                first: "2000-01-01", last: "2100-01-01", rows: [], cohorts: [:], computedAt: h.state.now,
                clearingMarks: before.marks)
            let after = try await store.analyticsDailyPending()
            let kept = try await store.analyticsDays(first: "2000-01-01", last: "2100-01-01", bundleID: nil)
            #expect(!stale && after == pending && !kept.isEmpty)
            let refreshed = try await store.refreshDailySeries(
                catalogue: ProductCatalogue(), rates: ExchangeRates(), now: h.state.now)
            #expect(refreshed != nil)
            #expect(try await store.analyticsDailyPending().from == nil)
            try await Self.expectSeries(h, store, from: origin, label: "after a refund outside a run")
        }
    }

    /// Every day from `origin`'s through today: the stored rows are those the ledger gives (the reference,
    /// `renewal analytics --refresh-daily --recompute`), and the cohort table the ledger's as of today's end.
    static func expectSeries(
        _ h: JobHarness, _ store: any DailySeriesStore, from origin: Date, label: String
    ) async throws {
        var reference = DailyAnalytics(
            from: origin.addingTimeInterval(-day), through: h.state.now, catalogue: ProductCatalogue(),
            reportingCurrency: "USD")
        let end = Date(timeIntervalSince1970: (h.state.now.timeIntervalSince1970 / day).rounded(.up) * day)
        var cohorts: [String: CohortRetention] = [:]
        try await store.forEachSubscriptionLedger(bundleID: nil) { ledger in
            reference.add(ledger)
            cohorts[ledger.bundleID ?? "", default: CohortRetention(asOf: end, catalogue: ProductCatalogue())].add(
                ledger)
        }
        let range = try #require(reference.range)
        let expected = reference.rows(rates: ExchangeRates())
        let stored = try await store.analyticsDays(first: range.first, last: range.last, bundleID: nil)
        #expect(expected.count > 20 && expected.contains { !$0.movementCents.isEmpty }, "\(label): a real series")
        let missing = Set(expected).subtracting(stored).sorted { $0.key < $1.key }
        let extra = Set(stored).subtracting(expected).sorted { $0.key < $1.key }
        #expect(
            missing.isEmpty && extra.isEmpty,
            "\(label): ledger only \(missing.prefix(3)), stored only \(extra.prefix(3))")
        let table = try await DashboardViewsTests.query(
            h, "SELECT cohort_month, bundle_id, period, subscriptions, observed, retained FROM analytics_cohorts")
        var storedCohorts: [String: Int] = [:]
        for row in table {
            let text = { DashboardViewsTests.text(row, $0) ?? "" }
            let key = "\(text("cohort_month")) \(text("bundle_id")) \(DashboardViewsTests.int(row, "period") ?? 0)"
            storedCohorts[key] = DashboardViewsTests.int(row, "retained")
        }
        var expectedCohorts: [String: Int] = [:]
        for (bundle, retention) in cohorts where !bundle.isEmpty {
            for cohort in retention.table {
                for period in 1...CohortRetention.periods {
                    expectedCohorts["\(cohort.month) \(bundle) \(period)"] = cohort.retained[period - 1]
                }
            }
        }
        #expect(!expectedCohorts.isEmpty && storedCohorts == expectedCohorts, "\(label): cohort table")
    }
}
