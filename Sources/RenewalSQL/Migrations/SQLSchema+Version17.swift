extension SQLSchema {
    /// Version 17: completing the ledger with Get Transaction History. `subscriptions.history_revision`
    /// is the revision Apple gave with the last page recorded (the next request resumes from it),
    /// `history_completed_at` when Apple said there was no more, and `history_claimed_until` the end of
    /// the claim of the worker reading it (workers never read one history at once); a partial index lists
    /// the subscriptions still to complete, so finding them stays cheap as the table grows. `runs` keeps how many
    /// transactions each run added that way and how many subscriptions it completed. Columns and an
    /// index only: no row is rewritten.
    static func version17(_ dialect: SQLDialect) -> [String] {
        [
            "ALTER TABLE subscriptions ADD COLUMN history_revision TEXT",
            "ALTER TABLE subscriptions ADD COLUMN history_completed_at BIGINT",
            "ALTER TABLE subscriptions ADD COLUMN history_claimed_until BIGINT",
            """
            CREATE INDEX subscriptions_history_due_idx ON subscriptions (original_transaction_id)
            WHERE history_completed_at IS NULL
            """,
            "ALTER TABLE runs ADD COLUMN history_transactions INTEGER NOT NULL DEFAULT 0",
            "ALTER TABLE runs ADD COLUMN history_completed INTEGER NOT NULL DEFAULT 0",
        ]
    }
}
