import Foundation
import RenewalCore
import RenewalStorage

/// The daily series refreshed from the analytics summaries (schema 30): the marked days, the rows the days
/// read, and the replacement with the mark cleared in one transaction.
extension SQLSubscriptionStore: DailySeriesStore {
    public func analyticsDailyPending() async throws -> DailySeriesPending {
        let rows = try await onConnection { connection in
            try connection.execute("SELECT daily_from, daily_marks FROM analytics_summary_state WHERE id = 1", [])
        }
        guard let row = rows.first else { return DailySeriesPending(from: nil, marks: 0) }
        return DailySeriesPending(
            from: try row.optionalInt64("daily_from").map { Int($0) }, marks: try row.int("daily_marks"))
    }

    public func analyticsDailySummary(firstDay: Int, lastDay: Int) async throws -> AnalyticsSummary {
        // The units of the first day's midnight and of the midnight after the last day (three a day).
        let first = AnalyticsContributions.unit(ofDay: firstDay)
        let binds: [SQLValue] = [.int64(Int64(first)), .int64(Int64(AnalyticsContributions.unit(ofDay: lastDay + 1)))]
        // The steps held at the first day's start, summed once per key (a read of every earlier step).
        let base = """
            SELECT CAST($1 AS BIGINT) AS day, row_key, SUM(count) AS n
            FROM \(Self.summarySource(where: "shape = 'step' AND day <= $1")) GROUP BY row_key
            """
        // Per unit and key: the later steps, the days' events, and the corners of a day's window: ending
        // after a midnight and at or before the next, beginning at or before the first.
        let steps = "shape = 'step' AND day > $1 AND day <= $2"
        let events = "shape = 'event' AND day >= $1 AND day < $2"
        let corners = "shape = 'corner' AND day > $1 AND day <= $2 AND since_day <= \(Self.midnightUnit("day - 1"))"
        func perDay(_ filter: String) -> String {
            "SELECT day, row_key, SUM(count) AS n FROM \(Self.summarySource(where: filter)) GROUP BY day, row_key"
        }
        let read = try await onConnection { connection in
            (
                try connection.execute(base, [binds[0]]), try connection.execute(perDay(steps), binds),
                try connection.execute(perDay(events), binds), try connection.execute(perDay(corners), binds)
            )
        }
        var summary = AnalyticsSummary()
        func add(_ row: SQLRow, _ shape: (Int) -> ContributionShape) throws {
            let count = try row.int64("n")
            guard count != 0 else { return }
            let day = Int(try row.int64("day"))
            summary.add([try AnalyticsSummaryRowKey.key(of: try row.text("row_key"), shape: shape(day)): Int(count)])
        }
        for row in read.0 { try add(row) { _ in .step(first) } }
        for row in read.1 { try add(row) { .step($0) } }
        for row in read.2 { try add(row) { .event($0) } }
        for row in read.3 {
            try add(row) {
                .corner(
                    since: AnalyticsContributions.unit(ofDay: AnalyticsContributions.day(ofUnit: $0 - 1)), until: $0)
            }
        }
        return summary
    }

    public func analyticsSummaryBundles() async throws -> [String] {
        let rows = try await onConnection { connection in
            try connection.execute(
                """
                SELECT bundle_id FROM analytics_summary_rows UNION SELECT bundle_id FROM analytics_summary_deltas
                ORDER BY bundle_id
                """, [])
        }
        return try rows.map { try $0.text("bundle_id") }
    }

    public func replaceDailySeries(
        first: String, last: String, rows: [AnalyticsDayRow], cohorts: [String: [CohortRetention.Cohort]],
        computedAt: Date, clearingMarks marks: Int
    ) async throws -> Bool {
        let dialect = database.dialect
        return try await inTransaction { connection in
            // One refresh writes at a time; one that read before a fold since writes nothing (its rows could
            // be older than another refresh's), and the mark stays for the next.
            if dialect == .postgres {
                _ = try connection.execute(
                    "SELECT pg_advisory_xact_lock(hashtextextended(current_schema() || '/renewal.analytics-daily', 0))",
                    [])
            }
            let found = try connection.execute("SELECT daily_marks FROM analytics_summary_state WHERE id = 1", [])
            guard try found.first?.optionalInt64("daily_marks") == Int64(marks) else { return false }
            if first <= last {
                try Self.replaceDays(
                    first: first, last: last, bundleID: nil, rows: rows, at: computedAt, on: connection)
                try Self.replaceCohorts(bundleID: nil, cohorts: cohorts, at: computedAt, on: connection)
            }
            _ = try connection.execute("UPDATE analytics_summary_state SET daily_from = NULL WHERE id = 1", [])
            return true
        }
    }

    /// Marks the days from `unit` (the first a fold changed) for the next refresh, in the fold's transaction.
    static func markDaily(from unit: Int64?, on connection: any SQLConnection) throws {
        guard let unit else { return }
        _ = try connection.execute(
            """
            UPDATE analytics_summary_state
            SET daily_from = CASE WHEN daily_from IS NULL OR daily_from > $1 THEN $1 ELSE daily_from END,
                daily_marks = daily_marks + 1
            WHERE id = 1
            """, [.int64(unit)])
    }

    /// The first day whose daily rows the changes in `relation` touch: the day holding the unit before a
    /// step's (a step on a midnight changes the day before's end), an event's or a window corner's end
    /// (one day early for an event on a midnight, which costs a day's refresh). Cohort rows (corners
    /// beginning after they end) are read by no day.
    static var firstMarkedDay: String {
        "MIN(CASE WHEN shape <> 'corner' OR since_day < day THEN \(dayOfUnit("day - 1")) END) AS first_day"
    }

    /// SQL for the day holding unit `unit` (an integer expression): `⌊unit / 3⌋` whatever its sign.
    static func dayOfUnit(_ unit: String) -> String {
        "\(midnightUnit(unit)) / \(AnalyticsContributions.unitsPerDay)"
    }

    /// SQL for the unit of the midnight that begins the day holding unit `unit`.
    static func midnightUnit(_ unit: String) -> String {
        let per = AnalyticsContributions.unitsPerDay
        return "((\(unit)) - (((\(unit)) % \(per)) + \(per)) % \(per))"
    }
}
