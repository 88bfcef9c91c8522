import Foundation
import RenewalCore
import RenewalStorage

/// The MRR movement's read of the analytics summaries: a day's movement needs its own day's change rows,
/// which the window read (`analyticsSummary(s:u:…)`) sums over the window.
extension SQLSubscriptionStore {
    /// The rows window `(s, u)` selects, as `analyticsSummary(s:u:bundleID:environment:)` gives them, with
    /// the MRR change events (`ContributionFigure.mrrChange`) on their own day instead of summed at `s`, so
    /// `SummaryQuery.movement(of:)` answers `mrr_movement_daily` from it as well as `figures(of:)` the rest.
    /// One more range read than the window's: the events of `[s, u)` whose key is a change, per day and key.
    /// The two reads are separate statements: a write committed between them can leave the days a write
    /// apart from the window until the next read.
    public func analyticsMovementSummary(s: Int, u: Int, bundleID: String?, environment: AppStoreEnvironment)
        async throws -> AnalyticsSummary
    {
        let window = try await analyticsSummary(s: s, u: u, bundleID: bundleID, environment: environment)
        var filter = "shape = 'event' AND day >= $1 AND day < $2 AND environment = $3 AND row_key LIKE $4"
        var binds: [SQLValue] = [
            .int64(Int64(s)), .int64(Int64(u)), .text(environment.rawValue),
            .text("%\"f\":\"\(ContributionFigure.mrrChange.rawValue)\"%"),
        ]
        if let bundleID {
            filter += " AND bundle_id = $5"
            binds.append(.text(bundleID))
        }
        let days = """
            SELECT day, row_key, SUM(count) AS n FROM \(Self.summarySource(where: filter)) GROUP BY day, row_key
            """
        let read = try await onConnection { connection in try connection.execute(days, binds) }
        var counts = window.counts.filter { $0.key.figure != .mrrChange }
        for row in read {
            let count = try row.int64("n")
            guard count != 0 else { continue }
            let day = Int(try row.int64("day"))
            let key = try AnalyticsSummaryRowKey.key(of: try row.text("row_key"), shape: .event(day))
            // `_` in the pattern matches any character: keep the changes only.
            guard key.figure == .mrrChange else { continue }
            counts[key, default: 0] += Int(count)
        }
        return AnalyticsSummary(counts)
    }
}
