import Foundation
import RenewalCore
import RenewalStorage

/// The analytics summaries in `analytics_summary_rows`, `analytics_summary_deltas` and
/// `analytics_summary_state` (schema 27 and 29). Writes append their changes (`AnalyticsSummaryUpkeep`);
/// a window reads the rows and the changes not folded yet together.
extension SQLSubscriptionStore: AnalyticsSummaryStore {
    public func beginAnalyticsSummaryRebuild(startedAt: Date) async throws -> Int {
        let dialect = database.dialect
        return try await inTransaction { connection in
            try Self.lockSummaries(exclusively: true, on: connection, dialect: dialect)
            let state = try connection.execute(
                "SELECT status, definition_version, subscriptions, daily_marks FROM analytics_summary_state WHERE id = 1",
                [])
            if let interrupted = state.first, try interrupted.text("status") == "building",
                try interrupted.int64("definition_version") == Int64(AnalyticsSummaryState.definitionVersion)
            {
                return Int(try interrupted.int64("subscriptions"))
            }
            // The count of marks goes on across the rebuild, so a refresh begun before it cannot clear a mark.
            let marked = try state.first?.optionalInt64("daily_marks") ?? 0
            _ = try connection.execute("DELETE FROM analytics_summary_rows", [])
            _ = try connection.execute("DELETE FROM analytics_summary_deltas", [])
            _ = try connection.execute("DELETE FROM analytics_summary_state", [])
            _ = try connection.execute(
                """
                INSERT INTO analytics_summary_state (id, status, definition_version, schema_version, started_at,
                    built_at, subscriptions, row_count, ledger_mark, rebuilt_through, daily_marks)
                VALUES (1, 'building', $1, $2, $3, NULL, 0, 0, '', NULL, $4)
                """,
                [
                    .int64(Int64(AnalyticsSummaryState.definitionVersion)), .int64(Int64(SQLSchema.currentVersion)),
                    Self.milliseconds(startedAt), .int64(marked + 1),
                ])
            return 0
        }
    }

    public func rebuildAnalyticsSummaryPage(limit: Int, heldRows: Int) async throws -> (count: Int, last: String?) {
        let dialect = database.dialect
        return try await inTransaction { connection in
            try Self.lockSummaries(exclusively: true, on: connection, dialect: dialect)
            let state = try connection.execute(
                "SELECT rebuilt_through FROM analytics_summary_state WHERE id = 1 AND status = 'building'", [])
            guard let building = state.first else { return (0, nil) }
            let ids = try connection.execute(
                """
                SELECT DISTINCT original_transaction_id FROM transactions WHERE original_transaction_id > $1
                ORDER BY original_transaction_id LIMIT $2
                """, [.text(try building.optionalText("rebuilt_through") ?? ""), .int64(Int64(limit))]
            ).map { try $0.text("original_transaction_id") }
            guard let last = ids.last else { return (0, nil) }
            try Self.appendSummedRows(of: ids, heldRows: heldRows, on: connection)
            _ = try connection.execute(
                """
                UPDATE analytics_summary_state SET rebuilt_through = $1, subscriptions = subscriptions + $2
                WHERE id = 1
                """, [.text(last), .int64(Int64(ids.count))])
            return (ids.count, last)
        }
    }

    /// Adds the contribution rows of the subscriptions `ids` to the table: their ledgers read a chunk at a
    /// time (a quarter of the page, at most 250), each chunk's rows worked out in four parts on the
    /// machine's cores while the next chunk is read (`summed(_:parts:whileRunning:_:)`) and the parts added
    /// to the page's `PackedSummaryRows`, which are upserted whenever they hold `heldRows` rows, and at the
    /// end. Memory holds two chunks of ledgers, one chunk's parts and at most `heldRows` summed rows,
    /// packed: bounded whatever the page size, and whatever the days, products and prices the ledger
    /// covers. Smaller chunks hold less (each part's sum repeats the keys the others hold); fewer parts
    /// per chunk add fewer of those repeated keys into the page's sum, which kept the time of 500 ledgers
    /// in eight parts.
    static func appendSummedRows(of ids: [String], heldRows: Int, on connection: any SQLConnection) throws {
        let chunk = min(250, max(1, ids.count / 4))
        var chunks = stride(from: 0, to: ids.count, by: chunk).map { Array(ids[$0..<min($0 + chunk, ids.count)]) }
            .makeIterator()
        let readChunk = { () throws -> [SubscriptionLedger]? in
            try chunks.next().map { try LedgerSQL.ledgers(of: $0, on: connection) }
        }
        let contributions = AnalyticsContributions()
        var held = PackedSummaryRows()
        var ledgers = try readChunk()
        while let current = ledgers {
            let summed = try Self.summed(current, parts: 4, whileRunning: readChunk) { sum, ledger in
                sum.add(contributions.rows(of: ledger))
            }
            for part in summed.parts { try held.add(part.counts) }
            if held.count >= max(heldRows, 1) { try held.upsert(into: "analytics_summary_rows", on: connection) }
            ledgers = summed.next
        }
        try held.upsert(into: "analytics_summary_rows", on: connection)
    }

    public func finishAnalyticsSummaryRebuild(builtAt: Date) async throws -> (subscriptions: Int, rows: Int) {
        let dialect = database.dialect
        return try await inTransaction { connection in
            try Self.lockSummaries(exclusively: true, on: connection, dialect: dialect)
            try Self.foldAnalyticsSummaryDeltas(on: connection, dialect: dialect)
            let counted = try connection.execute("SELECT COUNT(*) AS n FROM analytics_summary_rows", [])
            let rows = try counted.first?.optionalInt64("n") ?? 0
            let summed = try connection.execute("SELECT subscriptions FROM analytics_summary_state WHERE id = 1", [])
            let subscriptions = try summed.first?.optionalInt64("subscriptions") ?? 0
            _ = try connection.execute(
                """
                UPDATE analytics_summary_state SET status = 'built', built_at = $1, row_count = $2,
                    rebuilt_through = NULL
                WHERE id = 1
                """, [Self.milliseconds(builtAt), .int64(rows)])
            // Every day with data is read again from the rebuilt rows by the next refresh of the daily series.
            let first = try connection.execute(
                "SELECT \(Self.firstMarkedDay) FROM analytics_summary_rows WHERE shape <> 'corner'", [])
            try Self.markDaily(from: try first.first?.optionalInt64("first_day"), on: connection)
            return (Int(subscriptions), Int(rows))
        }
    }

    /// Folds the writes' changes into the rows, one worker at a time (another one folding does this one's
    /// share). Called at the end of every run (`compactSummaries`).
    func foldAnalyticsSummaryDeltas() async throws {
        let dialect = database.dialect
        _ = try await exclusively("analytics-summary-fold") {
            try await self.inTransaction { connection in
                try Self.lockSummaries(exclusively: false, on: connection, dialect: dialect)
                try Self.foldAnalyticsSummaryDeltas(on: connection, dialect: dialect)
            }
        }
    }

    /// Moves every change this transaction sees into the rows (added to the row of its key), then deletes
    /// the rows left at zero. On PostgreSQL the changes are deleted and summed in one statement, so a
    /// change committed meanwhile is neither lost nor counted twice: it stays for the next fold.
    static func foldAnalyticsSummaryDeltas(on connection: any SQLConnection, dialect: SQLDialect) throws {
        let columns = "shape, day, since_day, environment, bundle_id, row_key"
        let upsert = """
            ON CONFLICT (shape, day, since_day, row_key)
            DO UPDATE SET count = analytics_summary_rows.count + excluded.count
            """
        if dialect == .postgres {
            // A data-modifying WITH runs once whatever the outer query reads: the outer one names the days.
            let moved = try connection.execute(
                """
                WITH moved AS (DELETE FROM analytics_summary_deltas RETURNING \(columns), count),
                folded AS (
                    INSERT INTO analytics_summary_rows (\(columns), count)
                    SELECT \(columns), SUM(count) FROM moved GROUP BY \(columns) HAVING SUM(count) <> 0
                    \(upsert)
                )
                SELECT \(firstMarkedDay) FROM moved
                """, [])
            try markDaily(from: try moved.first?.optionalInt64("first_day"), on: connection)
        } else {
            let marked = try connection.execute(
                "SELECT \(firstMarkedDay) FROM analytics_summary_deltas", [])
            try markDaily(from: try marked.first?.optionalInt64("first_day"), on: connection)
            _ = try connection.execute(
                """
                INSERT INTO analytics_summary_rows (\(columns), count)
                SELECT \(columns), SUM(count) FROM analytics_summary_deltas WHERE true GROUP BY \(columns)
                HAVING SUM(count) <> 0
                \(upsert)
                """, [])
            _ = try connection.execute("DELETE FROM analytics_summary_deltas", [])
        }
        _ = try connection.execute("DELETE FROM analytics_summary_rows WHERE count = 0", [])
    }

    /// Takes the summaries' transaction lock on PostgreSQL: exclusively for a rebuild's steps, shared for a
    /// fold (as every write does, `AnalyticsSummaryUpkeep.begin`). SQLite's transactions exclude each other.
    static func lockSummaries(exclusively: Bool, on connection: any SQLConnection, dialect: SQLDialect) throws {
        guard dialect == .postgres else { return }
        _ = try connection.execute(
            """
            SELECT \(exclusively ? "pg_advisory_xact_lock" : "pg_advisory_xact_lock_shared")(
                hashtextextended(current_schema() || '/' || $1, 0))
            """, [.text(AnalyticsSummaryUpkeep.lockName)])
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
            rows: try row.int("row_count"))
    }

    /// The summed rows and the changes not folded yet that satisfy `filter`, as one relation with the
    /// rows' columns: what every read of the summaries selects from.
    static func summarySource(where filter: String) -> String {
        let columns = "shape, day, since_day, environment, bundle_id, row_key, count"
        return """
            (SELECT \(columns) FROM analytics_summary_rows WHERE \(filter)
            UNION ALL SELECT \(columns) FROM analytics_summary_deltas WHERE \(filter)) AS summary
            """
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
            SELECT row_key, SUM(count) AS n, 0 AS at_since
            FROM \(Self.summarySource(where: "shape = 'event' AND day >= $1 AND day < $2 AND \(filter)"))
            GROUP BY row_key
            """
        let steps = """
            SELECT row_key, SUM(count) AS n, SUM(CASE WHEN day <= $1 THEN count ELSE 0 END) AS at_since
            FROM \(Self.summarySource(where: "shape = 'step' AND day <= $2 AND \(filter)")) GROUP BY row_key
            """
        let corners = """
            SELECT row_key, SUM(count) AS n, 0 AS at_since
            FROM \(Self.summarySource(where: "shape = 'corner' AND day > $1 AND day <= $2 AND since_day <= $1 AND \(filter)"))
            GROUP BY row_key
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

    public func ledgers(of originalTransactionIDs: [String]) async throws -> [SubscriptionLedger] {
        var ledgers: [SubscriptionLedger] = []
        for chunk in Array(Set(originalTransactionIDs)).sorted().chunked(by: LedgerSQL.chunkSize) where !chunk.isEmpty {
            ledgers += try await onConnection { connection in try LedgerSQL.ledgers(of: chunk, on: connection) }
        }
        return ledgers
    }

    static func milliseconds(_ date: Date) -> SQLValue {
        .int64(Int64((date.timeIntervalSince1970 * 1000).rounded()))
    }
}
