extension SQLSchema {
    /// Version 10: several apps in one database. `receipts.bundle_id` is the app a receipt belongs
    /// to: given at import, or learnt from Apple's first valid answer and kept from then on (NULL
    /// until then). Each change and failure records the app of its receipt at the time, so reports
    /// and dashboards split by app without a join; `runs.apps_stopped` names the apps whose
    /// credentials Apple rejected in that run (comma-separated), whose rows it left untouched.
    /// Apple's change feed is per app: with several apps `feed_cursors.environment` holds
    /// `bundle_id/Environment` (one cursor per app and environment) and `feed_notifications.bundle_id`
    /// the app whose feed listed a notification.
    /// The dashboard views that count receipts, subscriptions, changes or failures gain a first
    /// column `bundle_id` (NULL for rows whose app is not known yet) and are split by it; each is
    /// dropped and made again, as a view cannot gain a column in the middle.
    /// Columns only: no table is rewritten, so the migration is quick on a large table.
    static func version10(_ dialect: SQLDialect) -> [String] {
        let entitledStates = "('active', 'grace_period')"
        let views = [
            "entitlements_by_product", "changes_per_day", "billing_backlog", "refunds_per_day", "failures_by_reason",
            "receipts_by_source",
        ]
        return [
            "ALTER TABLE receipts ADD COLUMN bundle_id TEXT",
            "ALTER TABLE entitlement_changes ADD COLUMN bundle_id TEXT",
            "ALTER TABLE run_failures ADD COLUMN bundle_id TEXT",
            "ALTER TABLE runs ADD COLUMN apps_stopped TEXT",
            "ALTER TABLE feed_notifications ADD COLUMN bundle_id TEXT",
        ] + views.map { "DROP VIEW \($0)" } + [
            """
            CREATE VIEW entitlements_by_product AS
            SELECT r.bundle_id, s.product_id, s.environment, COALESCE(s.ownership_type, 'PURCHASED') AS ownership_type,
                   s.state, CASE WHEN s.state IN \(entitledStates) THEN 1 ELSE 0 END AS entitled,
                   COUNT(*) AS subscribers
            FROM subscriptions s JOIN receipts r ON r.id = s.receipt_id
            GROUP BY r.bundle_id, s.product_id, s.environment, COALESCE(s.ownership_type, 'PURCHASED'), s.state
            """,
            """
            CREATE VIEW changes_per_day AS
            SELECT bundle_id, \(dialect.utcDay("occurred_at")) AS day, kind, product_id, environment, COUNT(*) AS changes
            FROM entitlement_changes
            GROUP BY bundle_id, \(dialect.utcDay("occurred_at")), kind, product_id, environment
            """,
            """
            CREATE VIEW billing_backlog AS
            SELECT b.bundle_id, b.user_id, b.original_transaction_id, b.product_id, b.environment, b.state, b.since_ms,
                   (\(dialect.nowMilliseconds) - b.since_ms) / 86400000.0 AS days_in_state,
                   b.expires_at_ms, b.grace_period_expires_at_ms
            FROM (
                SELECT r.bundle_id, s.user_id, s.original_transaction_id, s.product_id, s.environment, s.state,
                       COALESCE(s.expires_at, (
                           SELECT MAX(c.occurred_at) FROM entitlement_changes c
                           WHERE c.original_transaction_id = s.original_transaction_id AND c.to_state = s.state
                       )) AS since_ms,
                       s.expires_at AS expires_at_ms, s.grace_period_expires_at AS grace_period_expires_at_ms
                FROM subscriptions s JOIN receipts r ON r.id = s.receipt_id
                WHERE s.state IN ('billing_retry', 'grace_period')
            ) b
            """,
            """
            CREATE VIEW refunds_per_day AS
            SELECT bundle_id, \(dialect.utcDay("occurred_at")) AS day, product_id, environment, COUNT(*) AS refunds
            FROM entitlement_changes
            WHERE kind = 'refunded'
            GROUP BY bundle_id, \(dialect.utcDay("occurred_at")), product_id, environment
            """,
            """
            CREATE VIEW failures_by_reason AS
            SELECT bundle_id, \(dialect.utcDay("occurred_at")) AS day, reason, COUNT(*) AS failures,
                   COUNT(DISTINCT receipt_id) AS receipts
            FROM run_failures
            GROUP BY bundle_id, \(dialect.utcDay("occurred_at")), reason
            """,
            """
            CREATE VIEW receipts_by_source AS
            SELECT bundle_id, COALESCE(source, 'unchecked') AS source, environment, status, COUNT(*) AS receipts,
                   SUM(CASE WHEN original_transaction_id IS NOT NULL THEN 1 ELSE 0 END) AS with_transaction_id,
                   SUM(CASE WHEN migrated_at IS NOT NULL THEN 1 ELSE 0 END) AS migrated,
                   MAX(migrated_at) AS last_migrated_at_ms
            FROM receipts
            GROUP BY bundle_id, COALESCE(source, 'unchecked'), environment, status
            """,
        ]
    }
}
