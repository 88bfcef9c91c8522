import Foundation
import RenewalCore
import RenewalStorage

/// The analytics summaries in `analytics_summary_rows` and `analytics_summary_state` (schema 27).
extension SQLSubscriptionStore: AnalyticsSummaryStore {
    /// `MAX(updated_at)` and `COUNT(*)` of `transactions` (every save of a transaction sets its
    /// `updated_at`) and `MAX(id)` of `subscription_facts` (facts are only inserted). One aggregate over
    /// the ledger, no rows returned; not an index read, so it grows with the ledger (docs/analytics.md).
    public func analyticsLedgerMark() async throws -> String {
        try await onConnection { connection in
            let ledger = try connection.execute(
                "SELECT MAX(updated_at) AS latest, COUNT(*) AS n FROM transactions", [])
            let facts = try connection.execute("SELECT MAX(id) AS latest FROM subscription_facts", [])
            let latest = try ledger.first?.optionalInt64("latest").map(String.init) ?? "none"
            let count = try ledger.first?.optionalInt64("n") ?? 0
            let fact = try facts.first?.optionalInt64("latest").map(String.init) ?? "none"
            return "transactions \(latest)/\(count), facts \(fact)"
        }
    }

    public func beginAnalyticsSummaryRebuild(mark: String, startedAt: Date) async throws {
        try await inTransaction { connection in
            _ = try connection.execute("DELETE FROM analytics_summary_rows", [])
            _ = try connection.execute("DELETE FROM analytics_summary_state", [])
            _ = try connection.execute(
                """
                INSERT INTO analytics_summary_state (id, status, definition_version, schema_version, started_at,
                    built_at, subscriptions, row_count, ledger_mark)
                VALUES (1, 'building', $1, $2, $3, NULL, 0, 0, $4)
                """,
                [
                    .int64(Int64(AnalyticsSummaryState.definitionVersion)), .int64(Int64(SQLSchema.currentVersion)),
                    Self.milliseconds(startedAt), .text(mark),
                ])
        }
    }

    public func addAnalyticsSummaryRows(_ rows: [ContributionKey: Int]) async throws {
        var values: [[SQLValue]] = []
        values.reserveCapacity(rows.count)
        for (key, count) in rows where count != 0 {
            let (shape, day, sinceDay) = Self.columns(of: key.shape)
            values.append([
                .text(shape), .int64(day), .int64(sinceDay), .text(key.environment.rawValue),
                .text(key.bundleID ?? ""), .text(try AnalyticsSummaryRowKey.text(of: key)), .int64(Int64(count)),
            ])
        }
        let batch = 200
        try await inTransaction { connection in
            var start = 0
            while start < values.count {
                let chunk = values[start..<min(start + batch, values.count)]
                let tuples = (0..<chunk.count).map { row in
                    "(" + (1...7).map { "$\(row * 7 + $0)" }.joined(separator: ", ") + ")"
                }
                _ = try connection.execute(
                    """
                    INSERT INTO analytics_summary_rows (shape, day, since_day, environment, bundle_id, row_key, count)
                    VALUES \(tuples.joined(separator: ", "))
                    ON CONFLICT (shape, day, since_day, row_key)
                    DO UPDATE SET count = analytics_summary_rows.count + excluded.count
                    """, chunk.flatMap { $0 })
                start += batch
            }
        }
    }

    public func finishAnalyticsSummaryRebuild(subscriptions: Int, builtAt: Date) async throws -> Int {
        try await inTransaction { connection in
            _ = try connection.execute("DELETE FROM analytics_summary_rows WHERE count = 0", [])
            let counted = try connection.execute("SELECT COUNT(*) AS n FROM analytics_summary_rows", [])
            let rows = try counted.first?.optionalInt64("n") ?? 0
            _ = try connection.execute(
                """
                UPDATE analytics_summary_state SET status = 'built', built_at = $1, subscriptions = $2, row_count = $3
                WHERE id = 1
                """, [Self.milliseconds(builtAt), .int64(Int64(subscriptions)), .int64(rows)])
            return Int(rows)
        }
    }

    public func analyticsSummaryState() async throws -> AnalyticsSummaryState? {
        let rows = try await onConnection { connection in
            try connection.execute("SELECT * FROM analytics_summary_state WHERE id = 1", [])
        }
        guard let row = rows.first else { return nil }
        return AnalyticsSummaryState(
            status: try row.text("status"), definitionVersion: try row.int("definition_version"),
            schemaVersion: try row.int("schema_version"), startedAt: try row.date("started_at"),
            builtAt: try row.optionalDate("built_at"), subscriptions: try row.int("subscriptions"),
            rows: try row.int("row_count"), ledgerMark: try row.text("ledger_mark"))
    }

    public func analyticsSummary(s: Int, u: Int, bundleID: String?, environment: AppStoreEnvironment) async throws
        -> AnalyticsSummary
    {
        var filter = "environment = $3"
        var binds: [SQLValue] = [.int64(Int64(s)), .int64(Int64(u)), .text(environment.rawValue)]
        if let bundleID {
            filter += " AND bundle_id = $4"
            binds.append(.text(bundleID))
        }
        // Three range reads on the unique index (shape, day, since_day, row_key), each summed per key.
        let events = """
            SELECT row_key, SUM(count) AS n, 0 AS at_since FROM analytics_summary_rows
            WHERE shape = 'event' AND day >= $1 AND day < $2 AND \(filter) GROUP BY row_key
            """
        let steps = """
            SELECT row_key, SUM(count) AS n, SUM(CASE WHEN day <= $1 THEN count ELSE 0 END) AS at_since
            FROM analytics_summary_rows WHERE shape = 'step' AND day <= $2 AND \(filter) GROUP BY row_key
            """
        let corners = """
            SELECT row_key, SUM(count) AS n, 0 AS at_since FROM analytics_summary_rows
            WHERE shape = 'corner' AND day > $1 AND day <= $2 AND since_day <= $1 AND \(filter) GROUP BY row_key
            """
        let read = try await onConnection { connection in
            (
                try connection.execute(events, binds), try connection.execute(steps, binds),
                try connection.execute(corners, binds)
            )
        }
        var summary = AnalyticsSummary()
        func add(_ text: String, _ shape: ContributionShape, _ count: Int64) throws {
            guard count != 0 else { return }
            summary.add([try AnalyticsSummaryRowKey.key(of: text, shape: shape): Int(count)])
        }
        for row in read.0 { try add(try row.text("row_key"), .event(s), try row.int64("n")) }
        for row in read.1 {
            // Steps up to s count at both bounds; those after s, up to u, at until only.
            let atSince = try row.int64("at_since")
            try add(try row.text("row_key"), .step(s), atSince)
            try add(try row.text("row_key"), .step(u), try row.int64("n") - atSince)
        }
        for row in read.2 { try add(try row.text("row_key"), .corner(since: s, until: u), try row.int64("n")) }
        return summary
    }

    /// A shape as the table's (shape, day, since_day) columns.
    static func columns(of shape: ContributionShape) -> (String, Int64, Int64) {
        switch shape {
        case .event(let index): return ("event", Int64(index), 0)
        case .step(let index): return ("step", Int64(index), 0)
        case .corner(let since, let until): return ("corner", Int64(until), Int64(since))
        }
    }

    static func milliseconds(_ date: Date) -> SQLValue {
        .int64(Int64((date.timeIntervalSince1970 * 1000).rounded()))
    }
}
