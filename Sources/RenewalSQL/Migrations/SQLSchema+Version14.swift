extension SQLSchema {
    /// Version 14: the change feed applies Apple's signed notification data.
    /// `subscriptions.apple_signed_at` is when Apple signed the data a subscription was last derived
    /// from (a status answer or a notification), so a notification signed at or before it changes
    /// nothing and asks nothing. `receipts.outage_check_at` is when a feed outage must check a receipt
    /// the feed's schedule put later (a renewal due, a grace period or billing retry ending): while
    /// the feed is down only those rows are polled; the partial index keeps that to the rows due.
    /// `runs.notifications_applied` counts a run's notifications applied that way. Columns only: no
    /// table is rewritten.
    static func version14(_ dialect: SQLDialect) -> [String] {
        [
            "ALTER TABLE subscriptions ADD COLUMN apple_signed_at BIGINT",
            "ALTER TABLE runs ADD COLUMN notifications_applied INTEGER NOT NULL DEFAULT 0",
            "ALTER TABLE receipts ADD COLUMN outage_check_at BIGINT",
            """
            CREATE INDEX receipts_outage_check_at_idx ON receipts (environment, outage_check_at)
            WHERE outage_check_at IS NOT NULL
            """,
        ]
    }
}
