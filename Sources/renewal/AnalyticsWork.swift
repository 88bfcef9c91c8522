import Foundation
import RenewalCore
import RenewalReports
import RenewalStorage

/// What `renewal analytics` does with a database, for the command and the demo: the figures of a window,
/// the daily series' refresh, and the HTML page.
struct AnalyticsWork {
    let store: any RenewalStore
    /// Only this app's subscriptions; nil for every app.
    let app: String?
    let catalogue: ProductCatalogue
    let rates: ExchangeRates
    /// Recompute from the ledger even when the summaries answer the window (`--recompute`).
    var recompute = false

    /// The figures of `[since, until)` and the cohorts as of `until`: from the analytics summaries when
    /// they answer the window (built and current; any window, corrected when off midnights), else one pass over the
    /// ledger. Both give the same report.
    func report(since: Date, until: Date) async throws -> AnalyticsReport {
        if !recompute, let summaries = store as? any AnalyticsSummaryStore {
            let work = AnalyticsSummaryWork(store: summaries, app: app, catalogue: catalogue, rates: rates)
            if let report = try await work.report(since: since, until: until, unclaimedIDs: try await unclaimedIDs()) {
                return report
            }
        }
        return try await recomputed(since: since, until: until)
    }

    /// The reference: every figure from one pass over the ledger.
    func recomputed(since: Date, until: Date) async throws -> AnalyticsReport {
        var analytics = SubscriptionAnalytics(
            since: since, until: until, catalogue: catalogue, reportingCurrency: rates.reportingCurrency)
        var cohorts = CohortRetention(asOf: until, catalogue: catalogue)
        // The adopted purchases no user has claimed count like any other, and again apart.
        let unclaimedIDs = try await unclaimedIDs()
        var unclaimed = SubscriptionAnalytics(
            since: since, until: until, catalogue: catalogue, reportingCurrency: rates.reportingCurrency)
        try await store.forEachSubscriptionLedger(bundleID: app) { ledger in
            analytics.add(ledger)
            cohorts.add(ledger)
            if unclaimedIDs?.contains(ledger.originalTransactionID) == true { unclaimed.add(ledger) }
        }
        var report = AnalyticsReport(analytics, cohorts: cohorts, rates: rates, bundleID: app)
        report.unclaimed = unclaimedIDs.map { AnalyticsReport.Unclaimed(purchases: $0.count, unclaimed, rates: rates) }
        return report
    }

    /// The original transaction ids of the app's unclaimed adopted purchases (a small table, read in pages);
    /// nil for a store without adoption.
    func unclaimedIDs() async throws -> Set<String>? {
        guard let source = store as? any UnclaimedPurchaseStore else { return nil }
        var ids = Set<String>()
        var after: String?
        while true {
            let page = try await source.unclaimedPage(after: after, limit: 500)
            for purchase in page where app == nil || purchase.bundleID == app {
                ids.insert(purchase.originalTransactionID)
            }
            guard page.count == 500, let last = page.last else { return ids }
            after = last.originalTransactionID
        }
    }

    /// What a refresh replaced.
    struct Refreshed {
        var firstDay: String
        var lastDay: String
        var rows: Int
        /// The subscriptions read from the ledger: none when the summaries answered.
        var subscriptions: Int
        var app: String?
        /// `summaries` or `ledger`.
        var source = "ledger"

        var json: String {
            #"{"first_day":"\#(firstDay)","last_day":"\#(lastDay)","rows":\#(rows),"source":"\#(source)","subscriptions":\#(subscriptions)}"#
        }

        var text: String {
            "analytics_daily: \(rows) rows for \(firstDay) to \(lastDay)" + (app.map { " (\($0))" } ?? "")
                + (source == "ledger"
                    ? " from \(subscriptions) subscriptions in the ledger" : " from the analytics summaries")
        }
    }

    /// `--refresh-daily`: from the analytics summaries when they answer (every app; from `start`'s day
    /// through `end`'s or today, whichever is later, so no day the job marked is left behind), else, and
    /// with `--recompute` or `--app`, from the ledger (`recomputedRefresh`).
    func refresh(from start: Date, through end: Date) async throws -> Refreshed? {
        if !recompute, app == nil, let series = store as? any DailySeriesStore,
            let state = try await series.analyticsSummaryState(), state.staleReason == nil
        {
            // Changes written outside a run are folded (and their days marked) first.
            try await series.compactSummaries()
            if let refreshed = try await series.refreshDailySeries(
                catalogue: catalogue, rates: rates, now: max(end, Date()), from: start)
            {
                return Refreshed(
                    firstDay: refreshed.firstDay, lastDay: refreshed.lastDay, rows: refreshed.rows, subscriptions: 0,
                    app: nil, source: "summaries")
            }
        }
        return try await recomputedRefresh(from: start, through: end)
    }

    /// One pass over the ledger computes every day from `start`'s through `end`'s, then the days' rows, and
    /// the cohort table as of `end`, are replaced in one transaction each.
    func recomputedRefresh(from start: Date, through end: Date) async throws -> Refreshed? {
        var daily = DailyAnalytics(
            from: start, through: end, catalogue: catalogue, reportingCurrency: rates.reportingCurrency)
        var cohorts: [String: CohortRetention] = [:]
        var subscriptions = 0
        try await store.forEachSubscriptionLedger(bundleID: app) { ledger in
            subscriptions += 1
            daily.add(ledger)
            cohorts[ledger.bundleID ?? "", default: CohortRetention(asOf: end, catalogue: catalogue)].add(ledger)
        }
        guard let range = daily.range else { return nil }
        let rows = daily.rows(rates: rates)
        try await store.replaceAnalyticsDays(
            first: range.first, last: range.last, bundleID: app, rows: rows, computedAt: Date())
        try await store.replaceAnalyticsCohorts(
            bundleID: app, cohorts: cohorts.mapValues(\.table), computedAt: Date())
        return Refreshed(
            firstDay: range.first, lastDay: range.last, rows: rows.count, subscriptions: subscriptions, app: app)
    }

    /// The HTML page of `report` at `path`, its charts from the daily series' rows of the window's days;
    /// the page names the command that fills the days the series lacks. `flag` names the path in errors.
    func writePage(_ report: AnalyticsReport, to path: String, flag: String) async throws {
        let names = DailyAnalytics.dayNames(from: report.since, until: report.until)
        guard let first = names.first, let last = names.last else { return }
        let rows = try await store.analyticsDays(first: first, last: last, bundleID: app)
        let kept = try await store.analyticsDaysKept(bundleID: app)
        let missing = names.filter { day in kept.map { !($0.first...$0.last).contains(day) } ?? true }
        var refresh: String?
        if let firstMissing = missing.first, let lastMissing = missing.last,
            let end = DailyAnalytics.dayStart(named: lastMissing)?.addingTimeInterval(86_400)
        {
            refresh =
                "renewal analytics --refresh-daily --since \(firstMissing) --until \(DailyAnalytics.name(of: end))"
                + (app.map { " --app \($0)" } ?? "")
        }
        let page = report.html(days: AnalyticsReport.daySeries(rows, names: names), missing: missing, refresh: refresh)
        // Owner-only like every file the job writes, and replaced whole: a temporary file renamed into place.
        var output: ReportOutput?
        do {
            let file = try ReportOutput(path: path)
            output = file
            try await file.write(page)
            try await file.finish()
        } catch {
            await output?.discard()
            let detail = (error as? ReportFileError)?.detail ?? "\(error)"
            throw ConfigurationError("\(flag) \(path) cannot be written (\(detail)); give a writable path.")
        }
    }
}
