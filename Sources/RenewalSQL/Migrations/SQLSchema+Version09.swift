extension SQLSchema {
    /// Version 9: the webhook outbox. One row per entitlement change to deliver, written in the
    /// transaction that records the change (when a webhook URL is configured): its attempts, when
    /// the next is due, the last error, and when it was delivered or given up; claimed with a lease
    /// like receipts. `webhook_endpoints` remembers a URL that answered 410 Gone; `runs` keeps each run's
    /// delivery counts; the view `webhook_deliveries` is the outbox by state for dashboards.
    static func version9(_ dialect: SQLDialect) -> [String] {
        [
            """
            CREATE TABLE webhook_outbox (
                change_id BIGINT PRIMARY KEY,
                user_id TEXT NOT NULL,
                created_at BIGINT NOT NULL,
                attempts INTEGER NOT NULL DEFAULT 0,
                next_attempt_at BIGINT NOT NULL,
                last_error TEXT,
                last_attempt_at BIGINT,
                delivered_at BIGINT,
                failed_at BIGINT,
                lease_owner TEXT,
                lease_expires_at BIGINT
            )
            """,
            """
            CREATE INDEX webhook_outbox_pending_idx ON webhook_outbox (user_id, change_id)
            WHERE delivered_at IS NULL AND failed_at IS NULL
            """,
            """
            CREATE INDEX webhook_outbox_due_idx ON webhook_outbox (next_attempt_at)
            WHERE delivered_at IS NULL AND failed_at IS NULL
            """,
            "ALTER TABLE runs ADD COLUMN webhooks_delivered INTEGER",
            "ALTER TABLE runs ADD COLUMN webhooks_failed INTEGER",
            "ALTER TABLE runs ADD COLUMN webhook_oldest_undelivered_ms BIGINT",
            """
            CREATE TABLE webhook_endpoints (
                url_digest TEXT PRIMARY KEY,
                url TEXT NOT NULL,
                gone_at BIGINT NOT NULL
            )
            """,
            // `queued`: never tried; `retrying`: tried, waiting for its next attempt; `delivered`;
            // `failed`: given up. Ages and delays only where they mean something.
            """
            CREATE VIEW webhook_deliveries AS
            SELECT state, COUNT(*) AS changes, MIN(created_at) AS oldest_queued_at_ms,
                   CASE WHEN state IN ('queued', 'retrying')
                        THEN (\(dialect.nowMilliseconds) - MIN(created_at)) / 1000.0 END AS oldest_age_seconds,
                   MAX(attempts) AS max_attempts, MAX(last_attempt_at) AS last_attempt_at_ms,
                   CASE WHEN state = 'delivered' THEN AVG(delivered_at - created_at) / 1000.0 END
                       AS avg_delivery_seconds,
                   CASE WHEN state = 'delivered' THEN MAX(delivered_at - created_at) / 1000.0 END
                       AS max_delivery_seconds
            FROM (
                SELECT CASE WHEN delivered_at IS NOT NULL THEN 'delivered'
                            WHEN failed_at IS NOT NULL THEN 'failed'
                            WHEN attempts = 0 THEN 'queued'
                            ELSE 'retrying' END AS state,
                       created_at, attempts, last_attempt_at, delivered_at
                FROM webhook_outbox
            ) o
            GROUP BY state
            """,
        ]
    }
}
