extension SQLSchema {
    /// Version 15: the transaction ledger. One row per Apple transaction (a billing period or the
    /// purchase) the job has seen, with the money fields Apple gives, written in the same transaction
    /// as the answer or notification that revealed it and keyed by `transaction_id`, so a replayed
    /// answer or a notification listed twice counts once. Indexed by subscription and by purchase time
    /// for the analytics read over it.
    static func version15(_ dialect: SQLDialect) -> [String] {
        [
            """
            CREATE TABLE transactions (
                transaction_id TEXT PRIMARY KEY,
                original_transaction_id TEXT NOT NULL,
                user_id TEXT NOT NULL,
                bundle_id TEXT,
                product_id TEXT,
                environment TEXT,
                ownership_type TEXT,
                purchased_at BIGINT,
                expires_at BIGINT,
                price_milliunits BIGINT,
                currency TEXT,
                storefront TEXT,
                offer_type INTEGER,
                offer_discount_type TEXT,
                is_trial INTEGER NOT NULL,
                quantity INTEGER NOT NULL,
                revoked_at BIGINT,
                revocation_reason INTEGER,
                revocation_type TEXT,
                revocation_percentage INTEGER,
                transaction_reason TEXT,
                upgraded INTEGER NOT NULL,
                origin TEXT NOT NULL,
                signed_at BIGINT,
                recorded_at BIGINT NOT NULL,
                updated_at BIGINT NOT NULL
            )
            """,
            "CREATE INDEX transactions_subscription_idx ON transactions (original_transaction_id, purchased_at)",
            "CREATE INDEX transactions_purchased_at_idx ON transactions (purchased_at)",
        ]
    }
}
