extension SQLSchema {
    /// Version 20: renewal-date extensions. `renewal_extensions` holds one row per request sent (or about
    /// to be) to Extend a Subscription Renewal Date: its `request_identifier`, stored before it is sent,
    /// and `intent_key` (the operator's intent and the subscription), unique, so one intent is never sent
    /// twice; `state` `pending`, `sending`, `succeeded` or `rejected`; Apple's answer; and `confirmed_at`
    /// when Apple's `RENEWAL_EXTENDED` notification arrived. `renewal_mass_extensions` holds each request to
    /// extend every active subscriber of a product (Apple carries it out over hours): stored before it is
    /// sent, then followed by later runs (`next_status_at`, a partial index on those in progress) until
    /// Apple's status or its `RENEWAL_EXTENSION` summary says it is complete, with Apple's counts;
    /// `runs.mass_extensions_completed` counts those each run saw complete.
    static func version20(_ dialect: SQLDialect) -> [String] {
        [
            """
            CREATE TABLE renewal_extensions (
                request_identifier TEXT PRIMARY KEY,
                intent_key TEXT NOT NULL UNIQUE,
                intent TEXT NOT NULL,
                original_transaction_id TEXT NOT NULL,
                user_id TEXT NOT NULL,
                product_id TEXT,
                bundle_id TEXT,
                environment TEXT NOT NULL,
                days INTEGER NOT NULL,
                reason INTEGER NOT NULL,
                state TEXT NOT NULL,
                created_at BIGINT NOT NULL,
                sent_at BIGINT,
                answered_at BIGINT,
                effective_at BIGINT,
                confirmed_at BIGINT,
                apple_status INTEGER,
                apple_error_code INTEGER,
                last_error TEXT
            )
            """,
            "CREATE INDEX renewal_extensions_subscription_idx ON renewal_extensions (original_transaction_id)",
            """
            CREATE TABLE renewal_mass_extensions (
                request_identifier TEXT PRIMARY KEY,
                intent_key TEXT NOT NULL UNIQUE,
                intent TEXT NOT NULL,
                product_id TEXT NOT NULL,
                storefronts TEXT,
                bundle_id TEXT,
                environment TEXT NOT NULL,
                days INTEGER NOT NULL,
                reason INTEGER NOT NULL,
                state TEXT NOT NULL,
                created_at BIGINT NOT NULL,
                sent_at BIGINT,
                accepted_at BIGINT,
                next_status_at BIGINT,
                status_checks INTEGER NOT NULL DEFAULT 0,
                completed_at BIGINT,
                succeeded_count INTEGER,
                failed_count INTEGER,
                apple_status INTEGER,
                apple_error_code INTEGER,
                last_error TEXT
            )
            """,
            """
            CREATE INDEX renewal_mass_extensions_open_idx ON renewal_mass_extensions (next_status_at)
            WHERE state IN ('accepted', 'sending')
            """,
            "ALTER TABLE runs ADD COLUMN mass_extensions_completed INTEGER NOT NULL DEFAULT 0",
        ]
    }
}
