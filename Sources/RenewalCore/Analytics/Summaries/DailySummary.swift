import Foundation

/// The daily series from the analytics summaries instead of the ledger: the same rows `DailyAnalytics`
/// computes from every subscription's ledger, read from a summary that holds the days' rows (the job
/// refreshes the days its writes changed this way after every run, docs/analytics.md "Daily series").
///
/// A day `n` is the window of units `[3n, 3n + 3)`, so it reads what `SummaryQuery` reads for that window:
/// the paid and trial steps up to `3n` (at its start) and up to `3n + 3` (at its end), the events of its
/// units, the corners ending after `3n` and at or before `3n + 3` that begin at or before `3n`, and the MRR
/// change events of its units. One sweep over the days keeps the steps' running sums, so a day costs the
/// rows that hold at it, not a read of its own.
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
        let first = AnalyticsContributions.day(ofUnit: query.s)
        var rows = DayRows(summary, from: first)
        for (offset, day) in days.enumerated() {
            rows.advance(to: first + offset) { key, role, count in
                add(key, role, count, day: day.name, query: query)
            }
            var changes: [Key: [MovementEnds: Int]] = [:]
            for (key, count) in rows.window[first + offset] ?? [:] where count != 0 {
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
    /// Steps by the unit they begin at, shapes dropped; those at or before the first day's start are in
    /// `running`.
    var steps: [Int: [ContributionKey: Int]] = [:]
    var running: [ContributionKey: Int] = [:]
    /// Per day: its events, and the corners that count for its one-day window, shapes dropped, change
    /// rows as a read of the whole day sees them (`MovementEnds.read(onDay:from:)`).
    var window: [Int: [ContributionKey: Int]] = [:]

    init(_ summary: AnalyticsSummary, from first: Int) {
        let firstUnit = AnalyticsContributions.unit(ofDay: first)
        for (key, count) in summary.counts {
            var bare = key
            bare.shape = .event(0)
            switch key.shape {
            case .step(let index) where index <= firstUnit: running[bare, default: 0] += count
            case .step(let index): steps[index, default: [:]][bare, default: 0] += count
            case .event(let unit):
                let day = AnalyticsContributions.day(ofUnit: unit)
                if let ends = key.movement, ends.paidAt != nil || ends.joined {
                    bare.movement = ends.read(onDay: day, from: AnalyticsContributions.unit(ofDay: day))
                }
                window[day, default: [:]][bare, default: 0] += count
            case .corner(let since, let until) where since < until:
                let day = AnalyticsContributions.day(ofUnit: until - 1)
                guard since <= AnalyticsContributions.unit(ofDay: day) else { continue }
                window[day, default: [:]][bare, default: 0] += count
            case .corner: continue
            }
        }
    }

    /// Gives day `d`'s standings: the steps held at its start, then those held at its end (adding the
    /// steps of its units after its midnight and of the next midnight). `running` holds the steps up to
    /// its midnight on entry.
    mutating func advance(to d: Int, _ take: (ContributionKey, SummaryQuery.Role, Int) -> Void) {
        for (key, count) in running where count != 0 { take(key, .atSince, count) }
        let start = AnalyticsContributions.unit(ofDay: d)
        for unit in (start + 1)...(start + AnalyticsContributions.unitsPerDay) {
            for (key, count) in steps[unit] ?? [:] { running[key, default: 0] += count }
        }
        for (key, count) in running where count != 0 { take(key, .atUntil, count) }
    }
}
