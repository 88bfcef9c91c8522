extension SQLSchema {
    /// Version 8: polling less while the change feed is healthy. `receipts.polling_check_at` is when
    /// the polling schedule would have checked a receipt that the feed's schedule put later, so a
    /// feed turning unhealthy can move such receipts back (`fallBackToPolling`); the partial index
    /// keeps that move to the rows concerned. `feed_cursors.pulled_since` is where the first read of
    /// an unbroken run of reads began (a feed read for less than a day cannot be called silent);
    /// `runs.feed_fallback` names the environments a run polled on today's schedule, and why.
    static func version8(_ dialect: SQLDialect) -> [String] {
        [
            "ALTER TABLE receipts ADD COLUMN polling_check_at BIGINT",
            """
            CREATE INDEX receipts_polling_check_at_idx ON receipts (environment, polling_check_at)
            WHERE polling_check_at IS NOT NULL
            """,
            "ALTER TABLE feed_cursors ADD COLUMN pulled_since BIGINT",
            "ALTER TABLE runs ADD COLUMN feed_fallback TEXT",
        ]
    }
}
