extension SQLSchema {
    /// Version 23: purchases the app's server never stored (issue 44, docs/design.md §7).
    ///
    /// `adopted_purchases` holds one row per subscription the change feed adopted: a verified notification
    /// about an original transaction id no receipts row held. Its receipts row is keyed by a reserved user id
    /// (`adopted:` and the id, which import refuses) because `receipts.user_id` is NOT NULL and UNIQUE, and
    /// SQLite cannot drop either without rebuilding a table of millions of rows. The row is unclaimed while
    /// `claimed_at` is NULL. `app_account_tokens` maps each `appAccountToken` the app registered to its user,
    /// so an adopted purchase carrying it is claimed for that user. `receipts.owner_user_id` names the user of
    /// a claimed row that keeps its reserved key because that user already holds a receipts row of their own.
    /// Adding nullable columns and two small tables is cheap on both databases.
    static func version23(_ dialect: SQLDialect) -> [String] {
        [
            """
            CREATE TABLE adopted_purchases (
                original_transaction_id TEXT PRIMARY KEY,
                receipt_id BIGINT NOT NULL,
                bundle_id TEXT,
                environment TEXT NOT NULL,
                product_id TEXT,
                app_account_token TEXT,
                notification_uuid TEXT NOT NULL,
                adopted_at BIGINT NOT NULL,
                run_id TEXT,
                claimed_user_id TEXT,
                claimed_at BIGINT,
                claimed_by TEXT CHECK (claimed_by IN ('token', 'import', 'hand'))
            )
            """,
            "CREATE INDEX adopted_purchases_token_idx ON adopted_purchases (app_account_token)",
            "CREATE INDEX adopted_purchases_adopted_at_idx ON adopted_purchases (adopted_at)",
            """
            CREATE TABLE app_account_tokens (
                app_account_token TEXT PRIMARY KEY,
                user_id TEXT NOT NULL,
                recorded_at BIGINT NOT NULL
            )
            """,
            "ALTER TABLE receipts ADD COLUMN owner_user_id TEXT",
        ]
    }
}
