import Foundation

/// The daily series from the analytics summaries instead of the ledger: the same rows `DailyAnalytics`
/// computes from every subscription's ledger, read from a summary that holds the days' rows (the job
/// refreshes the days its writes changed this way after every run, docs/analytics.md "Daily series").
///
/// A day `d` is the window `[d, d + 1)`, so it reads what `SummaryQuery` reads for that window: the paid and
/// trial steps up to `d` (at its start) and up to `d + 1` (at its end), the events of day `d`, the corners
/// ending at `d + 1` that begin at or before `d`, and the MRR change events of day `d`. One sweep over the
/// days keeps the steps' running sums, so a day costs the rows that hold at it, not a read of its own.
extension DailyAnalytics {
    /// The days from `first`'s through `last`'s from `summary`, every app and environment. `summary` may be
    /// whole, or read for these days only (`AnalyticsSummaryStore.analyticsDailySummary`): steps at or
    /// before the first day counted once, steps after it, and the events and corners of the days.
    public init(
        summary: AnalyticsSummary, from first: Date, through last: Date, catalogue: ProductCatalogue,
        reportingCurrency: String
    ) {
        self.init(from: first, through: last, catalogue: catalogue, reportingCurrency: reportingCurrency)
        guard let firstDay = days.first,
            let query = SummaryQuery(
                since: firstDay.start, until: firstDay.start.addingTimeInterval(86_400), catalogue: catalogue,
                reportingCurrency: reportingCurrency)
        else { return }
        var rows = DayRows(summary, from: query.s)
        for (offset, day) in days.enumerated() {
            rows.advance(to: query.s + offset) { key, role, count in
                add(key, role, count, day: day.name, query: query)
            }
            var changes: [Key: [MovementEnds: Int]] = [:]
            for (key, count) in rows.window[query.s + offset] ?? [:] where count != 0 {
                guard key.figure == .mrrChange else {
                    add(key, .window, count, day: day.name, query: query)
                    continue
                }
                guard let ends = key.movement, let dayKey = Self.changeKey(key, ends, day: day.name),
                    query.point(ends.start, times: 1) != query.point(ends.end, times: 1)
                else { continue }
                changes[dayKey, default: [:]][ends, default: 0] += count
            }
            for (dayKey, ends) in changes {
                var movement = movements[dayKey] ?? MRRMovement()
                _ = query.add(ends, to: &movement)
                movements[dayKey] = movement
            }
        }
    }

    /// Adds a row's count to its day, app, product and environment, listing the product only when the
    /// row counts for something (as the recomputation lists it).
    private mutating func add(
        _ row: ContributionKey, _ role: SummaryQuery.Role, _ count: Int, day: String, query: SummaryQuery
    ) {
        guard row.environment == .production || row.environment == .sandbox else { return }
        let key = Key(
            day: day, bundleID: row.bundleID ?? "", productID: row.productID ?? "unknown",
            environment: row.environment.rawValue)
        var figures = self.figures[key] ?? AnalyticsFigures()
        if query.apply(row, role, count, to: &figures) { self.figures[key] = figures }
    }

    /// A day's change counts under the product paid at the day's end, or at its start when the
    /// subscription churned that day (`addMovement`).
    private static func changeKey(_ row: ContributionKey, _ ends: MovementEnds, day: String) -> Key? {
        guard row.environment == .production || row.environment == .sandbox else { return nil }
        let product = ends.end.map { $0.productID } ?? ends.start?.productID
        return Key(
            day: day, bundleID: row.bundleID ?? "", productID: product ?? "unknown",
            environment: row.environment.rawValue)
    }
}

/// A summary's rows sorted for a sweep over days: the steps' running sums, and each day's window rows.
private struct DayRows {
    /// Steps by the unit they begin at, shapes dropped; those at or before the first day are in `running`.
    var steps: [Int: [ContributionKey: Int]] = [:]
    var running: [ContributionKey: Int] = [:]
    /// Per day: its events, and the corners that count for its one-day window, shapes dropped.
    var window: [Int: [ContributionKey: Int]] = [:]

    init(_ summary: AnalyticsSummary, from first: Int) {
        for (key, count) in summary.counts {
            var bare = key
            bare.shape = .event(0)
            switch key.shape {
            case .step(let index) where index <= first: running[bare, default: 0] += count
            case .step(let index): steps[index, default: [:]][bare, default: 0] += count
            case .event(let day): window[day, default: [:]][bare, default: 0] += count
            case .corner(let since, let until) where since < until:
                window[until - 1, default: [:]][bare, default: 0] += count
            case .corner: continue
            }
        }
    }

    /// Gives day `d`'s standings: the steps held at its start, then those held at its end (adding the
    /// steps of unit `d + 1`). `running` holds the steps up to `d` on entry.
    mutating func advance(to d: Int, _ take: (ContributionKey, SummaryQuery.Role, Int) -> Void) {
        for (key, count) in running where count != 0 { take(key, .atSince, count) }
        for (key, count) in steps[d + 1] ?? [:] { running[key, default: 0] += count }
        for (key, count) in running where count != 0 { take(key, .atUntil, count) }
    }
}
