extension SQLSchema {
    /// Version 7: Apple's change feed (Notification History). Per environment, where the last
    /// completed pull ended; each notification acted on, once (its `notificationUUID` is the key, so
    /// overlapping windows and repeated pages never act twice), with the receipt it made due (NULL
    /// when the database does not know the subscription); the run's feed counts; the
    /// `notifications_per_day` view.
    static func version7(_ dialect: SQLDialect) -> [String] {
        [
            """
            CREATE TABLE feed_cursors (
                environment TEXT PRIMARY KEY,
                pulled_until BIGINT NOT NULL,
                updated_at BIGINT NOT NULL
            )
            """,
            """
            CREATE TABLE feed_notifications (
                notification_uuid TEXT PRIMARY KEY,
                environment TEXT NOT NULL,
                notification_type TEXT NOT NULL,
                subtype TEXT,
                original_transaction_id TEXT,
                receipt_id BIGINT,
                signed_at BIGINT NOT NULL,
                received_at BIGINT NOT NULL,
                run_id TEXT
            )
            """,
            "CREATE INDEX feed_notifications_signed_at_idx ON feed_notifications (signed_at)",
            """
            CREATE INDEX feed_notifications_original_transaction_id_idx
            ON feed_notifications (original_transaction_id, signed_at)
            """,
            "CREATE INDEX feed_notifications_receipt_id_idx ON feed_notifications (receipt_id, signed_at)",
            "CREATE INDEX receipts_original_transaction_id_idx ON receipts (original_transaction_id)",
            """
            CREATE VIEW notifications_per_day AS
            SELECT \(dialect.utcDay("signed_at")) AS day, environment, notification_type, subtype,
                   COUNT(*) AS notifications,
                   SUM(CASE WHEN original_transaction_id IS NOT NULL AND receipt_id IS NULL THEN 1 ELSE 0 END)
                       AS unmatched
            FROM feed_notifications
            GROUP BY \(dialect.utcDay("signed_at")), environment, notification_type, subtype
            """,
            "ALTER TABLE runs ADD COLUMN notifications INTEGER NOT NULL DEFAULT 0",
            "ALTER TABLE runs ADD COLUMN notifications_unmatched INTEGER NOT NULL DEFAULT 0",
            "ALTER TABLE runs ADD COLUMN feed_lag_ms BIGINT",
        ]
    }
}
