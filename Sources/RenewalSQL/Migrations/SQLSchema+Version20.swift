extension SQLSchema {
    /// Version 20: renewal-date extensions. `renewal_extensions` holds one row per request sent (or about
    /// to be) to Extend a Subscription Renewal Date: its `request_identifier`, stored before it is sent,
    /// and `intent_key` (the operator's intent and the subscription), unique, so one intent is never sent
    /// twice; `state` `pending`, `sending`, `succeeded` or `rejected`; Apple's answer; and `confirmed_at`
    /// when Apple's `RENEWAL_EXTENDED` notification arrived.
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
        ]
    }
}
