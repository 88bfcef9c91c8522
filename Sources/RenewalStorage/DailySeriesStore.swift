import Foundation
import RenewalCore

/// The days of the daily series (`analytics_daily`) a fold of the writes' changes may have changed since
/// the series was last refreshed (schema 30).
public struct DailySeriesPending: Sendable, Hashable {
    /// The first unit (UTC day) marked; nil when no day is.
    public var from: Int?
    /// How many folds marked days so far: a refresh clears the mark only if it has not moved.
    public var marks: Int

    public init(from: Int?, marks: Int) {
        self.from = from
        self.marks = marks
    }
}

/// The daily series and the cohort table refreshed from the analytics summaries instead of the ledger:
/// what the job does at the end of every run for the days its writes changed (docs/analytics.md, "Daily
/// series for dashboards").
public protocol DailySeriesStore: AnalyticsSummaryStore {
    /// The days marked since the last refresh.
    func analyticsDailyPending() async throws -> DailySeriesPending

    /// The summary rows days `firstDay...lastDay` (unit indices) read, every app and environment: the steps
    /// at or before `firstDay` summed onto `step(firstDay)`, the later steps up to `lastDay + 1` on their
    /// unit, the events of the days, and the corners ending at `d + 1` that begin at or before `d` onto
    /// `corner(since: d, until: d + 1)`. `DailyAnalytics(summary:from:through:…)` reads them.
    func analyticsDailySummary(firstDay: Int, lastDay: Int) async throws -> AnalyticsSummary

    /// The apps the summaries hold rows of (the cohort table is per app).
    func analyticsSummaryBundles() async throws -> [String]

    /// Replaces the days' rows of every app and the whole cohort table and clears the mark, in one
    /// transaction, when `marks` is still the count of marks (no fold changed the summaries since they were
    /// read); false, writing nothing, when it is not.
    func replaceDailySeries(
        first: String, last: String, rows: [AnalyticsDayRow], cohorts: [String: [CohortRetention.Cohort]],
        computedAt: Date, clearingMarks marks: Int
    ) async throws -> Bool
}

/// What one refresh of the daily series from the summaries replaced.
public struct DailySeriesRefresh: Sendable, Hashable {
    public var firstDay: String
    public var lastDay: String
    public var rows: Int
    public var cohorts: Int
}

extension DailySeriesStore {
    /// Refreshes the days marked since the last refresh, and the days since the last one kept, through
    /// `now`'s day, from the summaries; with `from`, those days too. Nil when the summaries do not answer
    /// (not built, or built with other definitions) or nothing is due. The cohort table is replaced as of
    /// the first midnight at or after `now` (the end of its day). When a fold changes the summaries while
    /// the days are computed, nothing is written and the days are computed again (three tries; after
    /// them the mark stays for the next refresh).
    public func refreshDailySeries(
        catalogue: ProductCatalogue, rates: ExchangeRates, now: Date, from: Date? = nil
    ) async throws -> DailySeriesRefresh? {
        for _ in 0..<3 {
            guard let state = try await analyticsSummaryState(), state.staleReason == nil else { return nil }
            let pending = try await analyticsDailyPending()
            guard let start = try await firstDayDue(pending, from: from) else { return nil }
            let today = Self.unit(of: now)
            guard start <= today else {
                // Only days still to come were marked: they are computed when they come.
                _ = try await replaceDailySeries(
                    first: "9999-12-31", last: "0000-01-01", rows: [], cohorts: [:], computedAt: now,
                    clearingMarks: pending.marks)
                return nil
            }
            let summary = try await analyticsDailySummary(firstDay: start, lastDay: today)
            let rows = DailyAnalytics(
                summary: summary, from: Self.date(of: start), through: Self.date(of: today), catalogue: catalogue,
                reportingCurrency: rates.reportingCurrency
            ).rows(rates: rates)
            let cohorts = try await cohortTables(catalogue: catalogue, rates: rates, now: now)
            let refreshed = DailySeriesRefresh(
                firstDay: DailyAnalytics.name(of: Self.date(of: start)),
                lastDay: DailyAnalytics.name(of: Self.date(of: today)), rows: rows.count,
                cohorts: cohorts.values.map(\.count).reduce(0, +))
            if try await replaceDailySeries(
                first: refreshed.firstDay, last: refreshed.lastDay, rows: rows, cohorts: cohorts, computedAt: now,
                clearingMarks: pending.marks)
            {
                return refreshed
            }
        }
        return nil
    }

    /// The first day to refresh: the first marked, the day after the last one kept, or `from`'s, whichever
    /// is earliest; nil when none is.
    private func firstDayDue(_ pending: DailySeriesPending, from: Date?) async throws -> Int? {
        var first = pending.from
        if let kept = try await analyticsDaysKept(bundleID: nil),
            let lastKept = DailyAnalytics.dayStart(named: kept.last)
        {
            first = min(first ?? Int.max, Self.unit(of: lastKept) + 1)
        }
        if let from { first = min(first ?? Int.max, Self.unit(of: from)) }
        return first
    }

    /// Each app's retention cohorts from the cohort rows, as of the first midnight at or after `now` (the
    /// end of its day, or `now` itself on a midnight).
    private func cohortTables(catalogue: ProductCatalogue, rates: ExchangeRates, now: Date) async throws
        -> [String: [CohortRetention.Cohort]]
    {
        let asOf = Int((now.timeIntervalSince1970 / 86_400).rounded(.up))
        guard
            let query = SummaryQuery(
                since: Self.date(of: asOf - 1), until: Self.date(of: asOf), catalogue: catalogue,
                reportingCurrency: rates.reportingCurrency)
        else { return [:] }
        var cohorts: [String: [CohortRetention.Cohort]] = [:]
        for bundle in try await analyticsSummaryBundles() where !bundle.isEmpty {
            cohorts[bundle] =
                try await analyticsCohortFigures(query, window: AnalyticsSummary(), bundleID: bundle).retentionTable
        }
        return cohorts
    }

    static func unit(of date: Date) -> Int { Int((date.timeIntervalSince1970 / 86_400).rounded(.down)) }

    static func date(of unit: Int) -> Date { Date(timeIntervalSince1970: Double(unit) * 86_400) }
}
