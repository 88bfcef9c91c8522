import Foundation
import RenewalCore
import RenewalStorage

/// The cohort rows of the analytics summaries (docs/analytics.md, "Cohort rows"): the monthly figures as
/// of a window's `until` read a few months' rows, not the ledger.
extension SQLSubscriptionStore {
    /// A cohort row is `corner(since: from, until: its month's first unit)` with `from` after that unit
    /// (stored as `day` = the month's first unit, `since_day` = `from`): one index range per month on
    /// `(shape, day, since_day)`, `since_day <= u`, summed per month and key in the database. The other
    /// corners of that day (`since_day <= day`) are left out by the filter.
    public func analyticsCohortSummary(
        cohortUnits: [Int], u: Int, bundleID: String?, environment: AppStoreEnvironment
    ) async throws -> AnalyticsSummary {
        guard !cohortUnits.isEmpty else { return AnalyticsSummary() }
        var binds: [SQLValue] = [.int64(Int64(u)), .text(environment.rawValue)]
        var filter = "environment = $2"
        if let bundleID {
            binds.append(.text(bundleID))
            filter += " AND bundle_id = $3"
        }
        let months = cohortUnits.map { unit -> String in
            binds.append(.int64(Int64(unit)))
            return "$\(binds.count)"
        }
        let where_ = """
            shape = 'corner' AND day IN (\(months.joined(separator: ", "))) AND since_day <= $1 \
            AND since_day > day AND \(filter)
            """
        let sql = """
            SELECT day, row_key, SUM(count) AS n FROM \(Self.summarySource(where: where_)) GROUP BY day, row_key
            """
        let rows = try await onConnection { connection in try connection.execute(sql, binds) }
        var summary = AnalyticsSummary()
        for row in rows {
            let count = try row.int64("n")
            guard count != 0 else { continue }
            let shape = ContributionShape.corner(since: u, until: Int(try row.int64("day")))
            summary.add([try AnalyticsSummaryRowKey.key(of: try row.text("row_key"), shape: shape): Int(count)])
        }
        return summary
    }
}
