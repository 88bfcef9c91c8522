extension SQLSchema {
    /// Version 26: `billing_backlog` says whether each subscriber in billing trouble is still entitled
    /// from the decision, not from its state's name (issue 43).
    ///
    /// The view keeps its rows (the subscriptions in `billing_retry` or `grace_period`: a billing list,
    /// not an entitlement one) and its columns, and gains two read from what the decision's transaction
    /// keeps:
    /// - `entitled`: the decision stored on the row (`subscriptions.entitled`, Core's), so a dashboard
    ///   never infers access from `state = 'grace_period'`;
    /// - `entitled_until_ms`: the end of the subscription's latest span in `entitlement_spans` (Core's
    ///   timeline): when its access ends or ended. It outlives the row's `grace_period_expires_at`, which
    ///   is cleared once a grace period is over; NULL while the latest span is open, or when the
    ///   subscription has no span of its own (a family-shared copy).
    /// The spans are read through their unique index, only for the rows a query returns; the counting
    /// example and the Grafana panel's plan are unchanged on PostgreSQL (`DashboardSummaryTests`).
    static func version26(_ dialect: SQLDialect) -> [String] {
        // PostgreSQL reads the clock once per query and lets a query skip the receipts (schema 11);
        // SQLite keeps its form of schema 10.
        let postgres = dialect == .postgres
        let days =
            postgres
            ? "((SELECT \(dialect.nowMilliseconds)) - b.since_ms) / CAST(86400000 AS DOUBLE PRECISION)"
            : "(CAST(strftime('%s', 'now') AS INTEGER) * 1000 - b.since_ms) / 86400000.0"
        return [
            "DROP VIEW billing_backlog",
            """
            CREATE VIEW billing_backlog AS
            SELECT b.bundle_id, b.user_id, b.original_transaction_id, b.product_id, b.environment, b.state, b.since_ms,
                   \(days) AS days_in_state,
                   b.expires_at_ms, b.grace_period_expires_at_ms, b.entitled, b.entitled_until_ms
            FROM (
                SELECT r.bundle_id, s.user_id, s.original_transaction_id, s.product_id, s.environment, s.state,
                       COALESCE(s.expires_at, (
                           SELECT MAX(c.occurred_at) FROM entitlement_changes c
                           WHERE c.original_transaction_id = s.original_transaction_id AND c.to_state = s.state
                       )) AS since_ms,
                       s.expires_at AS expires_at_ms, s.grace_period_expires_at AS grace_period_expires_at_ms,
                       s.entitled,
                       (SELECT sp.ends_at FROM entitlement_spans sp
                        WHERE sp.original_transaction_id = s.original_transaction_id
                        ORDER BY sp.starts_at DESC LIMIT 1) AS entitled_until_ms
                FROM subscriptions s \(postgres ? "LEFT JOIN" : "JOIN") receipts r ON r.id = s.receipt_id
                WHERE s.state IN ('billing_retry', 'grace_period')
            ) b
            """,
        ]
    }
}
