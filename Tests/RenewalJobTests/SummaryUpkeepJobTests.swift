import AppStoreSimulator
import Foundation
import RenewalAppleAPI
import RenewalCore
import RenewalSQL
import RenewalStorage
import RenewalTesting
import Testing

/// Issue 45: the analytics summaries stay current through the job's own writes. Built once on an empty
/// database, then kept by every run of a month of subscribers (`ClosedWindowPlan`: renewals in four
/// currencies, trials, grace periods, billing retry, refunds, upgrades, extensions, new purchases) through
/// verifyReceipt, the change feed and the Server API, and by a backfill that reveals a late refund: every
/// UTC-day window from the summaries equals the recomputation, before the end-of-run fold and after it, and
/// so does every window off midnights once corrected (`analyticsCorrection`, also read two subscriptions a
/// page); and a `--rebuild` that pages while the job writes ends current too.
@Suite("Analytics summaries kept by the job's writes: equal to the recomputation after every run, on both databases")
struct SummaryUpkeepJobTests {
    static let day: TimeInterval = 86_400

    @Test(
        """
        summaries built on an empty database and kept by three weeks of runs (first checks, re-checks, the feed, \
        extensions, a backfill revealing a refund) answer random UTC-day windows, and windows off midnights \
        corrected, exactly as the recomputation, with the runs' changes not folded yet and after folding them
        """,
        arguments: Backend.available)
    func keptByRuns(backend: Backend) async throws {
        try await JobHarness.with(backend) { h in
            h.state.notificationDelay = 120
            let (store, origin, plan) = try await Self.builtThenKeptByRuns(h, days: 21)
            try await ClosedWindowMonthTests.revealLateRefund(
                h, plan.late, at: origin.addingTimeInterval(18 * Self.day))
            #expect(try await Self.unfolded(h) == 0, "every run folds the changes at its end")
            try await Self.refundOutsideARun(h, store)
            #expect(try await Self.unfolded(h) > 0, "a history page's change waits for the next fold")
            try await Self.expectEqual(h, store, from: origin, label: "before the fold")
            try await store.compactSummaries()
            #expect(try await Self.unfolded(h) == 0)
            try await Self.expectEqual(h, store, from: origin, label: "after the fold")
        }
    }

    @Test(
        """
        a --rebuild killed after its first page, with runs writing before it is started again: the runs keep \
        what it had summed, the second --rebuild goes on after that page, and the finished summaries equal \
        the recomputation
        """,
        arguments: Backend.available)
    func rebuildBesideRuns(backend: Backend) async throws {
        try await JobHarness.with(backend) { h in
            var (store, origin, plan) = try await Self.sixDaysOfRuns(h)
            #expect(try await store.beginAnalyticsSummaryRebuild(startedAt: h.state.now) == 0)
            let first = try await store.rebuildAnalyticsSummaryPage(limit: 10)
            #expect(first.count == 10)
            let building = try await store.analyticsSummaryState()
            #expect(building?.staleReason?.contains("interrupted (10 subscriptions summed so far)") == true)
            try await Self.runs(h, plan: &plan, from: origin, through: 12)
            let built = try await store.rebuildAnalyticsSummaries(pageSize: 10)
            #expect(built.continued == 10, "the second --rebuild goes on after the first one's page")
            // A subscription first bought during the build below its page is kept by the runs, not read.
            #expect(built.subscriptions <= (try await Self.subscriptions(store)))
            try await Self.runs(h, plan: &plan, from: origin, through: 14)
            try await Self.expectEqual(h, store, from: origin, label: "after a rebuild beside runs")
            let again = try await store.rebuildAnalyticsSummaries(pageSize: 10)
            #expect(again.continued == 0, "a finished build is not gone on from: the next one starts over")
            #expect(again.subscriptions == (try await Self.subscriptions(store)))
        }
    }

    @Test(
        "two --rebuild side by side share the pages: each subscription is summed once",
        arguments: Backend.available)
    func rebuildsSideBySide(backend: Backend) async throws {
        try await JobHarness.with(backend) { h in
            let (store, origin, _) = try await Self.sixDaysOfRuns(h)
            async let one = store.rebuildAnalyticsSummaries(pageSize: 3)
            async let other = store.rebuildAnalyticsSummaries(pageSize: 3)
            let (a, b) = try await (one, other)
            let total = try await Self.subscriptions(store)
            #expect(a.subscriptions == total && b.subscriptions == total, "\(a), \(b), \(total) subscriptions")
            try await Self.expectEqual(h, store, from: origin, label: "after two rebuilds side by side")
        }
    }

    @Test(
        """
        a --rebuild that adds its page's sum to the table every 5 keys (the memory bound, tiny here) keeps \
        the same rows as one holding the whole page, and answers every window as the recomputation
        """,
        arguments: Backend.available)
    func rebuildHoldingFewRows(backend: Backend) async throws {
        try await JobHarness.with(backend) { h in
            let (store, origin, _) = try await Self.sixDaysOfRuns(h)
            let whole = try await store.rebuildAnalyticsSummaries(pageSize: 50, heldRows: 1_000_000)
            let bounded = try await store.rebuildAnalyticsSummaries(pageSize: 50, heldRows: 5)
            #expect(bounded.subscriptions == whole.subscriptions)
            #expect(bounded.rows == whole.rows, "the same keys kept, added to the table in many parts")
            #expect(whole.rows > 5 * 10, "pages of 50 subscriptions sum to many more keys than 5")
            try await Self.expectEqual(h, store, from: origin, label: "after a rebuild holding 5 rows")
        }
    }

    /// `ClosedWindowPlan`'s runs (verifyReceipt, the change feed and the Server API) through `days` days
    /// after `origin`, the plan's.
    static func runs(_ h: JobHarness, plan: inout ClosedWindowPlan, from origin: Date, through days: Double)
        async throws
    {
        let through = origin.addingTimeInterval(days * day)
        var kept = plan
        try await h.withServerAPIClient { client in
            let router = SourceRouter(mode: .auto, verifyReceipt: h.client, serverAPI: client)
            try await ClosedWindowMonthTests.runs(h, plan: &kept, through: through, router, client)
        }
        plan = kept
    }

    /// Six days of `ClosedWindowPlan`'s runs from now on `h`'s database, no summaries built: its store, the
    /// runs' first instant and the plan, for a test to go on with.
    static func sixDaysOfRuns(_ h: JobHarness) async throws -> (
        store: any AnalyticsSummaryStore, origin: Date, plan: ClosedWindowPlan
    ) {
        let store = try #require(h.store as? any AnalyticsSummaryStore)
        let origin = h.state.now
        var plan = ClosedWindowPlan(origin: origin)
        try await runs(h, plan: &plan, from: origin, through: 6)
        return (store, origin, plan)
    }

    /// The subscriptions the ledger holds.
    static func subscriptions(_ store: any AnalyticsSummaryStore) async throws -> Int {
        var count = 0
        try await store.forEachSubscriptionLedger(bundleID: nil) { _ in count += 1 }
        return count
    }

    /// Summaries built on `h`'s empty database, then kept by `days` of runs of `ClosedWindowPlan`'s subscribers
    /// (verifyReceipt, the change feed and the Server API) from now on; the runs' first instant and plan.
    static func builtThenKeptByRuns(
        _ h: JobHarness, days: Int
    ) async throws -> (store: any AnalyticsSummaryStore, origin: Date, plan: ClosedWindowPlan) {
        let store = try #require(h.store as? any AnalyticsSummaryStore)
        _ = try await store.rebuildAnalyticsSummaries()
        let origin = h.state.now
        var plan = ClosedWindowPlan(origin: origin)
        try await h.withServerAPIClient { client in
            let router = SourceRouter(mode: .auto, verifyReceipt: h.client, serverAPI: client)
            try await ClosedWindowMonthTests.runs(
                h, plan: &plan, through: origin.addingTimeInterval(Double(days) * day), router, client)
        }
        return (store, origin, plan)
    }

    /// A history page written outside a run (as `renewal backfill` pages are): the first paid, unrevoked
    /// transaction of the ledger is refunded two days after its purchase.
    static func refundOutsideARun(_ h: JobHarness, _ store: any AnalyticsSummaryStore) async throws {
        var found: (ledger: SubscriptionLedger, transaction: LedgerTransaction)?
        try await store.forEachSubscriptionLedger(bundleID: nil) { ledger in
            guard found == nil, ledger.environment == .production,
                let paid = ledger.transactions.first(where: { !$0.isTrial && $0.revokedAt == nil })
            else { return }
            found = (ledger, paid)
        }
        let (ledger, paid) = try #require(found)
        var refunded = paid
        refunded.revokedAt = paid.purchasedAt?.addingTimeInterval(2 * day)
        refunded.revocationReason = 0
        let candidate = HistoryCandidate(
            originalTransactionID: ledger.originalTransactionID, userID: "history", bundleID: ledger.bundleID,
            environment: ledger.environment, revision: nil)
        try await store.recordHistoryPage(
            of: candidate, transactions: [refunded], environment: ledger.environment, revision: nil, completedAt: nil,
            recordedAt: h.state.now)
    }

    /// Changes appended by writes and not folded yet.
    static func unfolded(_ h: JobHarness) async throws -> Int {
        let rows = try await DashboardViewsTests.query(h, "SELECT COUNT(*) AS n FROM analytics_summary_deltas")
        return try #require(rows.first.flatMap { DashboardViewsTests.int($0, "n") })
    }

    /// Windows of 1 to 21 UTC days inside the runs' span and the whole span: the summaries' figures (total
    /// and per product) are exactly the recomputation's.
    static func expectEqual(
        _ h: JobHarness, _ store: any AnalyticsSummaryStore, from origin: Date, label: String
    ) async throws {
        let state = try #require(try await store.analyticsSummaryState())
        #expect(state.staleReason == nil, "\(label): \(state)")
        // Windows on midnights, then off them: the rows read for the days around a window, corrected by the
        // subscriptions dated in its part-days (facts too: grace periods, extensions, the refund written
        // outside a run); the correction is empty on midnights.
        let days = try RandomDayWindows.windows(from: origin, to: h.state.now, seed: 45, random: 8).map(\.query)
        let offMidnight = try RandomDayWindows.offMidnight(from: origin, to: h.state.now, seed: 46, count: 6)
        // Each window off midnights also read from the other midnight on each side, and as the store
        // chooses (the side whose part-day dates fewer rows): the same answer every way.
        var variants: [SummaryQuery] = []
        for query in offMidnight {
            let window = try #require(query.offUnit)
            for (after, before) in [(true, false), (false, true), (true, true)] {
                if let other = window.reading(sinceAfter: after, untilBefore: before) {
                    variants.append(SummaryQuery(other))
                }
            }
            variants.append(SummaryQuery(try await store.analyticsReading(of: window)))
        }
        #expect(variants.count > offMidnight.count)
        var corrected = 0
        for query in days + offMidnight + variants {
            var summary = query.relabeled(
                try await store.analyticsSummary(
                    s: query.sinceUnit, u: query.untilUnit, bundleID: nil, environment: .production))
            let correction = try await store.analyticsCorrection(query)
            corrected += correction.subscriptions
            // Read two subscriptions at a time, the same correction: the pages neither skip nor repeat one.
            let paged = try await store.analyticsCorrection(query, pageSize: 2)
            #expect(paged.subscriptions == correction.subscriptions && paged.rows == correction.rows)
            summary.add(correction.rows.counts)
            let answered = query.figures(of: summary)
            let recomputed = try await ClosedWindowMonthTests.figures(h, since: query.since, until: query.until)
            let named = "\(label), [\(Timestamp.string(query.since)), \(Timestamp.string(query.until)))"
            #expect(
                ClosedWindowMonthTests.differences(answered.total, recomputed.total).isEmpty,
                "\(named): \(ClosedWindowMonthTests.describe(answered.total)) against \(ClosedWindowMonthTests.describe(recomputed.total))"
            )
            #expect(answered.byProduct == recomputed.byProduct, "\(named): by product")
        }
        #expect(corrected > 0, "\(label): no window off midnights corrected a subscription")
    }
}
