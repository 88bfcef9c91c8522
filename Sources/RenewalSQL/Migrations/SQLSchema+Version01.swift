extension SQLSchema {
    /// Version 1: receipts, their subscriptions, and what each run did (runs, entitlement changes,
    /// failures, ownership conflicts).
    static func version1(_ dialect: SQLDialect) -> [String] {
        receiptTables(dialect) + historyTables(dialect)
    }

    /// Receipts and the subscriptions they own.
    private static func receiptTables(_ dialect: SQLDialect) -> [String] {
        [
            """
            CREATE TABLE receipts (
                id \(dialect.identityPrimaryKey),
                user_id TEXT NOT NULL UNIQUE,
                latest_receipt TEXT NOT NULL,
                imported_product_id TEXT,
                status TEXT NOT NULL DEFAULT 'unverified' CHECK (status IN ('unverified', 'verified', 'invalid')),
                environment TEXT,
                next_check_at BIGINT NOT NULL,
                last_checked_at BIGINT,
                last_verified_at BIGINT,
                consecutive_failures INTEGER NOT NULL DEFAULT 0,
                consecutive_malformed INTEGER NOT NULL DEFAULT 0,
                last_failure_reason TEXT,
                lease_owner TEXT,
                lease_expires_at BIGINT,
                created_at BIGINT NOT NULL,
                updated_at BIGINT NOT NULL
            )
            """,
            "CREATE INDEX receipts_next_check_at_idx ON receipts (next_check_at, id)",
            """
            CREATE TABLE subscriptions (
                original_transaction_id TEXT PRIMARY KEY,
                receipt_id BIGINT NOT NULL REFERENCES receipts (id),
                user_id TEXT NOT NULL,
                product_id TEXT,
                state TEXT NOT NULL,
                entitled INTEGER NOT NULL,
                expires_at BIGINT,
                auto_renew INTEGER,
                auto_renew_product_id TEXT,
                grace_period_expires_at BIGINT,
                billing_retry INTEGER NOT NULL DEFAULT 0,
                cancelled_at BIGINT,
                expiration_intent TEXT,
                is_trial INTEGER NOT NULL DEFAULT 0,
                is_intro_offer INTEGER NOT NULL DEFAULT 0,
                ownership_type TEXT,
                environment TEXT,
                latest_transaction_id TEXT,
                subscription_group_id TEXT,
                last_verified_at BIGINT,
                next_check_at BIGINT NOT NULL,
                updated_at BIGINT NOT NULL
            )
            """,
            "CREATE INDEX subscriptions_receipt_id_idx ON subscriptions (receipt_id)",
            "CREATE INDEX subscriptions_user_id_idx ON subscriptions (user_id)",
        ]
    }

    /// What each run did: the runs, entitlement changes, failures and ownership conflicts.
    private static func historyTables(_ dialect: SQLDialect) -> [String] {
        [
            """
            CREATE TABLE runs (
                id TEXT PRIMARY KEY,
                command TEXT NOT NULL,
                started_at BIGINT NOT NULL,
                finished_at BIGINT,
                status TEXT NOT NULL,
                exit_code INTEGER,
                checked INTEGER NOT NULL DEFAULT 0,
                changed INTEGER NOT NULL DEFAULT 0,
                unchanged INTEGER NOT NULL DEFAULT 0,
                failed INTEGER NOT NULL DEFAULT 0,
                conflicts INTEGER NOT NULL DEFAULT 0,
                host TEXT NOT NULL,
                process_id BIGINT NOT NULL
            )
            """,
            """
            CREATE TABLE entitlement_changes (
                id \(dialect.identityPrimaryKey),
                run_id TEXT,
                user_id TEXT NOT NULL,
                original_transaction_id TEXT,
                product_id TEXT,
                kind TEXT NOT NULL,
                from_state TEXT NOT NULL,
                to_state TEXT NOT NULL,
                old_expires_at BIGINT,
                new_expires_at BIGINT,
                environment TEXT,
                ownership_type TEXT,
                occurred_at BIGINT NOT NULL
            )
            """,
            "CREATE INDEX entitlement_changes_run_id_idx ON entitlement_changes (run_id)",
            "CREATE INDEX entitlement_changes_occurred_at_idx ON entitlement_changes (occurred_at)",
            """
            CREATE TABLE run_failures (
                id \(dialect.identityPrimaryKey),
                run_id TEXT,
                receipt_id BIGINT NOT NULL,
                user_id TEXT NOT NULL,
                reason TEXT NOT NULL,
                message TEXT NOT NULL,
                occurred_at BIGINT NOT NULL
            )
            """,
            "CREATE INDEX run_failures_run_id_idx ON run_failures (run_id)",
            """
            CREATE TABLE ownership_conflicts (
                id \(dialect.identityPrimaryKey),
                run_id TEXT,
                original_transaction_id TEXT NOT NULL,
                owner_user_id TEXT NOT NULL,
                claimant_user_id TEXT NOT NULL,
                product_id TEXT,
                detected_at BIGINT NOT NULL
            )
            """,
            "CREATE INDEX ownership_conflicts_run_id_idx ON ownership_conflicts (run_id)",
        ]
    }
}
