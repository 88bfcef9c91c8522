import Foundation
import RenewalStorage

/// The building blocks of PostgreSQL's dashboard summaries (schema 11 and 12), shared by those
/// migrations and by `DatabaseCopy`, which rebuilds the summaries after a bulk load.
extension SQLSchema {
    /// A row trigger made so that making it again replaces it.
    static func trigger(
        _ name: String, on table: String, _ events: String, _ function: String, when condition: String? = nil
    ) -> [String] {
        [
            "DROP TRIGGER IF EXISTS \(name) ON \(table)",
            """
            CREATE TRIGGER \(name) \(events) ON \(table) FOR EACH ROW \
            \(condition.map { "WHEN (\($0)) " } ?? "")EXECUTE FUNCTION \(function)()
            """,
        ]
    }

    /// An index built without holding off writers. A build that was interrupted leaves an invalid
    /// index behind, which is dropped first so the build can run again.
    static func concurrentIndex(_ name: String, on definition: String) -> [String] {
        [
            """
            DO $$
            BEGIN
                IF EXISTS (
                    SELECT 1 FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
                    WHERE c.relname = '\(name)' AND c.relnamespace = current_schema()::regnamespace
                      AND NOT i.indisvalid
                ) THEN
                    DROP INDEX \(name);
                END IF;
            END
            $$
            """,
            "CREATE INDEX CONCURRENTLY IF NOT EXISTS \(name) ON \(definition)",
        ]
    }

    /// The statement that brings a summary to what the tables hold: `aggregate` (the summary's
    /// columns, in order, counted from the tables) minus the deltas already in the summary, as one
    /// more delta row per group. Minimums and maximums are taken over both.
    static func fill(_ summary: DashboardSummary, from aggregate: String) -> String {
        let groups = summary.groups.joined(separator: ", ")
        let columns = summary.folds.map(\.column).joined(separator: ", ")
        let negated = summary.folds.map { $0.function == "SUM" ? "-\($0.column) AS \($0.column)" : $0.column }
            .joined(separator: ", ")
        let folded = summary.folds.map { "\($0.function)(\($0.column))" }.joined(separator: ", ")
        return """
            INSERT INTO \(summary.table) (\(groups), \(columns))
            SELECT \(groups), \(folded)
            FROM (
                SELECT \(groups), \(negated) FROM \(summary.table)
                UNION ALL
                \(aggregate)
            ) counted
            GROUP BY \(groups)
            HAVING SUM(\(summary.folds[0].column)) <> 0
            """
    }

    /// The statements that bring every summary to what the tables hold (see `fill`): version 11 runs
    /// them once, and `DatabaseCopy` runs them on emptied summaries after loading a database.
    /// `schemaVersion`: the schema the fills write to (version 11 passes 11, before `subscription_counts`
    /// had `entitled`).
    static func summaryFills(_ dialect: SQLDialect, schemaVersion: Int = currentVersion) -> [String] {
        guard dialect == .postgres else { return [] }
        let day = { (column: String) in dialect.utcDay(column) }
        return [
            subscriptionsFill(schemaVersion: schemaVersion),
            fill(
                .receipts,
                from: """
                    SELECT bundle_id, COALESCE(source, 'unchecked'), environment, status, COUNT(*),
                           COUNT(original_transaction_id), COUNT(migrated_at)
                    FROM receipts
                    GROUP BY bundle_id, COALESCE(source, 'unchecked'), environment, status
                    """),
            fill(
                .changes,
                from: """
                    SELECT bundle_id, \(day("occurred_at")), kind, product_id, environment, COUNT(*)
                    FROM entitlement_changes
                    GROUP BY bundle_id, \(day("occurred_at")), kind, product_id, environment
                    """),
            fill(
                .failures,
                from: """
                    SELECT bundle_id, \(day("occurred_at")), reason, COUNT(*), COUNT(DISTINCT receipt_id)
                    FROM run_failures
                    GROUP BY bundle_id, \(day("occurred_at")), reason
                    """),
            fill(
                .notifications,
                from: """
                    SELECT \(day("signed_at")), environment, notification_type, subtype, COUNT(*),
                           COUNT(*) FILTER (WHERE original_transaction_id IS NOT NULL AND receipt_id IS NULL)
                    FROM feed_notifications
                    GROUP BY \(day("signed_at")), environment, notification_type, subtype
                    """),
            fill(
                .webhookOutcomes,
                from: """
                    SELECT CASE WHEN delivered_at IS NOT NULL THEN 'delivered' ELSE 'failed' END, COUNT(*),
                           SUM(delivered_at - created_at), MIN(created_at), MAX(attempts), MAX(last_attempt_at),
                           MAX(delivered_at - created_at)
                    FROM webhook_outbox
                    WHERE delivered_at IS NOT NULL OR failed_at IS NOT NULL
                    GROUP BY CASE WHEN delivered_at IS NOT NULL THEN 'delivered' ELSE 'failed' END
                    """),
        ]
    }

    /// The fill of `subscription_counts`; from schema 22 grouped by the stored decision (`entitled`) too.
    static func subscriptionsFill(schemaVersion: Int) -> String {
        let key = "r.bundle_id, s.product_id, s.environment, COALESCE(s.ownership_type, 'PURCHASED'), s.state"
        guard schemaVersion >= 22 else {
            return fill(
                .subscriptionsByState,
                from: """
                    SELECT \(key), COUNT(*)
                    FROM subscriptions s JOIN receipts r ON r.id = s.receipt_id
                    GROUP BY \(key)
                    """)
        }
        return fill(
            .subscriptions,
            from: """
                SELECT \(key), s.entitled, COUNT(*)
                FROM subscriptions s JOIN receipts r ON r.id = s.receipt_id
                GROUP BY \(key), s.entitled
                """)
    }

    /// Empties every summary and fills it again from the tables, one row per group (PostgreSQL;
    /// nothing on SQLite). For a database loaded in bulk, whose triggers counted as rows arrived.
    static func summaryRebuild(_ dialect: SQLDialect) -> [String] {
        guard dialect == .postgres else { return [] }
        return DashboardSummary.all.map { "DELETE FROM \($0.table)" } + summaryFills(dialect)
    }
}
