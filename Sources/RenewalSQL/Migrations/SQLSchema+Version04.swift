extension SQLSchema {
    /// Version 4: dashboards. The run counts the report has and the table lacked, and seven views
    /// written once for both databases (stable names and columns, documented in docs/dashboards.md).
    static func version4(_ dialect: SQLDialect) -> [String] {
        let entitledStates = "('active', 'grace_period')"
        return [
            "ALTER TABLE runs ADD COLUMN receipts_changed INTEGER NOT NULL DEFAULT 0",
            "ALTER TABLE runs ADD COLUMN invalid INTEGER NOT NULL DEFAULT 0",
            "ALTER TABLE runs ADD COLUMN skipped INTEGER NOT NULL DEFAULT 0",
            "ALTER TABLE runs ADD COLUMN recovered_leases INTEGER NOT NULL DEFAULT 0",
            "ALTER TABLE runs ADD COLUMN due_at_start INTEGER",
            "ALTER TABLE runs ADD COLUMN due_left INTEGER NOT NULL DEFAULT 0",
            "CREATE INDEX runs_started_at_idx ON runs (started_at)",
            "CREATE INDEX run_failures_occurred_at_idx ON run_failures (occurred_at)",
            """
            CREATE VIEW entitlements_by_product AS
            SELECT product_id, environment, COALESCE(ownership_type, 'PURCHASED') AS ownership_type, state,
                   CASE WHEN state IN \(entitledStates) THEN 1 ELSE 0 END AS entitled, COUNT(*) AS subscribers
            FROM subscriptions
            GROUP BY product_id, environment, COALESCE(ownership_type, 'PURCHASED'), state
            """,
            """
            CREATE VIEW changes_per_day AS
            SELECT \(dialect.utcDay("occurred_at")) AS day, kind, product_id, environment, COUNT(*) AS changes
            FROM entitlement_changes
            GROUP BY \(dialect.utcDay("occurred_at")), kind, product_id, environment
            """,
            // A subscription enters billing retry or its grace period when its paid period ends, so
            // its expiry is when the backlog entry began; the change that moved it there stands in
            // when Apple gave no expiry.
            """
            CREATE VIEW billing_backlog AS
            SELECT b.user_id, b.original_transaction_id, b.product_id, b.environment, b.state, b.since_ms,
                   (\(dialect.nowMilliseconds) - b.since_ms) / 86400000.0 AS days_in_state,
                   b.expires_at_ms, b.grace_period_expires_at_ms
            FROM (
                SELECT s.user_id, s.original_transaction_id, s.product_id, s.environment, s.state,
                       COALESCE(s.expires_at, (
                           SELECT MAX(c.occurred_at) FROM entitlement_changes c
                           WHERE c.original_transaction_id = s.original_transaction_id AND c.to_state = s.state
                       )) AS since_ms,
                       s.expires_at AS expires_at_ms, s.grace_period_expires_at AS grace_period_expires_at_ms
                FROM subscriptions s
                WHERE s.state IN ('billing_retry', 'grace_period')
            ) b
            """,
            """
            CREATE VIEW refunds_per_day AS
            SELECT \(dialect.utcDay("occurred_at")) AS day, product_id, environment, COUNT(*) AS refunds
            FROM entitlement_changes
            WHERE kind = 'refunded'
            GROUP BY \(dialect.utcDay("occurred_at")), product_id, environment
            """,
            """
            CREATE VIEW run_history AS
            SELECT id AS run_id, command, status, exit_code, started_at AS started_at_ms, finished_at AS finished_at_ms,
                   (finished_at - started_at) / 1000.0 AS duration_seconds, checked, changed, failed, conflicts,
                   lease_lost, host, worker_id
            FROM runs
            """,
            """
            CREATE VIEW failures_by_reason AS
            SELECT \(dialect.utcDay("occurred_at")) AS day, reason, COUNT(*) AS failures, COUNT(DISTINCT receipt_id) AS receipts
            FROM run_failures
            GROUP BY \(dialect.utcDay("occurred_at")), reason
            """,
            """
            CREATE VIEW shared_apple_id_conflicts AS
            SELECT detected_at AS detected_at_ms, \(dialect.utcDay("detected_at")) AS day, original_transaction_id,
                   product_id, owner_user_id, claimant_user_id, run_id
            FROM ownership_conflicts
            """,
        ]
    }
}
