import RenewalSQL
import RenewalStorage

/// What the PostgreSQL dashboard summaries must equal: the schema 10 views, which aggregate the
/// tables themselves (`entitlements_by_product`'s `entitled` is the decision stored on each row since
/// schema 22). Tests compare each summarized view with these queries.
public enum DashboardAggregates {
    /// Each view schema 11 summarizes on PostgreSQL and the aggregate over the tables it replaces (the schema 10 view).
    public static let views: [(view: String, query: String)] = [
        (
            "entitlements_by_product",
            """
            SELECT r.bundle_id, s.product_id, s.environment, COALESCE(s.ownership_type, 'PURCHASED') AS ownership_type,
                   s.state, s.entitled, COUNT(*) AS subscribers
            FROM subscriptions s JOIN receipts r ON r.id = s.receipt_id
            GROUP BY r.bundle_id, s.product_id, s.environment, COALESCE(s.ownership_type, 'PURCHASED'), s.state,
                     s.entitled
            """
        ),
        (
            "receipts_by_source",
            """
            SELECT bundle_id, COALESCE(source, 'unchecked') AS source, environment, status, COUNT(*) AS receipts,
                   SUM(CASE WHEN original_transaction_id IS NOT NULL THEN 1 ELSE 0 END) AS with_transaction_id,
                   SUM(CASE WHEN migrated_at IS NOT NULL THEN 1 ELSE 0 END) AS migrated,
                   MAX(migrated_at) AS last_migrated_at_ms
            FROM receipts
            GROUP BY bundle_id, COALESCE(source, 'unchecked'), environment, status
            """
        ),
        (
            "changes_per_day",
            """
            SELECT bundle_id, \(day("occurred_at")) AS day, kind, product_id, environment, COUNT(*) AS changes
            FROM entitlement_changes
            GROUP BY bundle_id, \(day("occurred_at")), kind, product_id, environment
            """
        ),
        (
            "refunds_per_day",
            """
            SELECT bundle_id, \(day("occurred_at")) AS day, product_id, environment, COUNT(*) AS refunds
            FROM entitlement_changes WHERE kind = 'refunded'
            GROUP BY bundle_id, \(day("occurred_at")), product_id, environment
            """
        ),
        (
            "failures_by_reason",
            """
            SELECT bundle_id, \(day("occurred_at")) AS day, reason, COUNT(*) AS failures,
                   COUNT(DISTINCT receipt_id) AS receipts
            FROM run_failures
            GROUP BY bundle_id, \(day("occurred_at")), reason
            """
        ),
        (
            "notifications_per_day",
            """
            SELECT \(day("signed_at")) AS day, environment, notification_type, subtype, COUNT(*) AS notifications,
                   SUM(CASE WHEN original_transaction_id IS NOT NULL AND receipt_id IS NULL THEN 1 ELSE 0 END)
                       AS unmatched
            FROM feed_notifications
            GROUP BY \(day("signed_at")), environment, notification_type, subtype
            """
        ),
    ]

    /// The schema 9 `webhook_deliveries`, without the age that moves with the clock.
    public static let webhookDeliveries = """
        SELECT state, COUNT(*) AS changes, MIN(created_at) AS oldest_queued_at_ms, MAX(attempts) AS max_attempts,
               MAX(last_attempt_at) AS last_attempt_at_ms,
               CASE WHEN state = 'delivered' THEN AVG(delivered_at - created_at) / 1000.0 END AS avg_delivery_seconds,
               CASE WHEN state = 'delivered' THEN MAX(delivered_at - created_at) / 1000.0 END AS max_delivery_seconds
        FROM (
            SELECT CASE WHEN delivered_at IS NOT NULL THEN 'delivered' WHEN failed_at IS NOT NULL THEN 'failed'
                        WHEN attempts = 0 THEN 'queued' ELSE 'retrying' END AS state,
                   created_at, attempts, last_attempt_at, delivered_at
            FROM webhook_outbox
        ) o
        GROUP BY state
        """

    static func day(_ column: String) -> String { SQLDialect.postgres.utcDay(column) }

    /// A query's rows as sorted text, each column named, so two row sets compare as a whole.
    public static func rows(_ database: some SQLDatabase, _ sql: String) async throws -> [String] {
        try await database.withConnection { try $0.execute(sql, []) }.map { row in
            row.columns.sorted().map { "\($0)=\(row[$0].map { "\($0)" } ?? "nil")" }.joined(separator: " ")
        }.sorted()
    }

    /// Rows as numbers where they are numbers (averages differ only in how many decimals they carry).
    static func numericRows(_ database: some SQLDatabase, _ sql: String) async throws -> [String] {
        try await database.withConnection { try $0.execute(sql, []) }.map { row in
            row.columns.sorted().map { column -> String in
                switch row[column] {
                case .int64(let value): return "\(column)=\(value)"
                case .double(let value): return "\(column)=\((value * 1000).rounded() / 1000)"
                case .text(let text):
                    return "\(column)=\(Double(text).map { "\(($0 * 1000).rounded() / 1000)" } ?? text)"
                default: return "\(column)=nil"
                }
            }.joined(separator: " ")
        }.sorted()
    }

    /// Each summarized view's rows next to its aggregate's, read now.
    public static func compare(_ database: some SQLDatabase) async throws -> [(
        view: String, summarized: [String], counted: [String]
    )] {
        var comparisons: [(view: String, summarized: [String], counted: [String])] = []
        for (view, aggregate) in views {
            comparisons.append(
                (view, try await rows(database, "SELECT * FROM \(view)"), try await rows(database, aggregate)))
        }
        let columns = """
            state, changes, oldest_queued_at_ms, max_attempts, last_attempt_at_ms, avg_delivery_seconds, \
            max_delivery_seconds
            """
        comparisons.append(
            (
                "webhook_deliveries", try await numericRows(database, "SELECT \(columns) FROM webhook_deliveries"),
                try await numericRows(database, webhookDeliveries)
            ))
        return comparisons
    }
}
