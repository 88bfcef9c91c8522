extension SQLSchema {
    /// Apple's longest billing grace period (28 days), in milliseconds: the bound of a grace period rebuilt
    /// from `entitlement_changes`, whose end no change recorded.
    static let longestGracePeriodMilliseconds: Int64 = 28 * 86_400_000

    /// Version 21: dated facts. `subscription_facts` keeps each fact Apple stated about a subscription (a
    /// grace period, billing retry beginning, auto-renew turned on or off, a revocation gained or reversed,
    /// an expiry moved by an extension, seats refunded) with its own dates, never overwritten, so the
    /// analytics answer "entitled at T" for a past moment as it was (`SubscriptionFact`,
    /// `EntitlementTimeline`). A unique index makes one fact stated twice one row.
    ///
    /// Existing databases get the grace periods they can still show: each subscription now in a grace
    /// period (its row's `grace_period_expires_at`, after its latest transaction), and each past grace
    /// period a change to `grace_period` recorded: from the change's `new_expires_at` (the expiry of the
    /// period it follows) to the subscription's next change, at most 28 days after the expiry, or, without
    /// a later change, to the row's grace end when the row is still in that grace period.
    static func version21(_ dialect: SQLDialect) -> [String] {
        let cap = "(o.grace_from + \(longestGracePeriodMilliseconds))"
        let bound = "COALESCE(o.next_at, s.grace_period_expires_at, \(cap))"
        return [
            """
            CREATE TABLE subscription_facts (
                id \(dialect.identityPrimaryKey),
                original_transaction_id TEXT NOT NULL,
                kind TEXT NOT NULL,
                transaction_id TEXT,
                starts_at BIGINT NOT NULL,
                ends_at BIGINT,
                value TEXT,
                stated_at BIGINT NOT NULL,
                recorded_at BIGINT NOT NULL,
                source TEXT NOT NULL,
                run_id TEXT
            )
            """,
            """
            CREATE UNIQUE INDEX subscription_facts_fact_idx ON subscription_facts (original_transaction_id, kind,
                COALESCE(transaction_id, ''), starts_at, COALESCE(ends_at, -1), COALESCE(value, ''))
            """,
            "CREATE INDEX subscription_facts_subscription_idx ON subscription_facts (original_transaction_id)",
            """
            INSERT INTO subscription_facts (original_transaction_id, kind, transaction_id, starts_at, ends_at,
                stated_at, recorded_at, source)
            SELECT s.original_transaction_id, 'grace_period', s.latest_transaction_id, s.expires_at,
                s.grace_period_expires_at, COALESCE(s.apple_signed_at, s.last_verified_at, s.updated_at),
                \(dialect.nowMilliseconds), 'migration'
            FROM subscriptions s
            WHERE s.grace_period_expires_at IS NOT NULL AND s.expires_at IS NOT NULL
                AND s.grace_period_expires_at > s.expires_at
            ON CONFLICT DO NOTHING
            """,
            """
            INSERT INTO subscription_facts (original_transaction_id, kind, transaction_id, starts_at, ends_at,
                stated_at, recorded_at, source)
            SELECT o.original_transaction_id, 'grace_period',
                (SELECT t.transaction_id FROM transactions t
                    WHERE t.original_transaction_id = o.original_transaction_id AND t.expires_at = o.grace_from
                    ORDER BY t.purchased_at DESC LIMIT 1),
                o.grace_from, CASE WHEN \(bound) < \(cap) THEN \(bound) ELSE \(cap) END,
                o.occurred_at, \(dialect.nowMilliseconds), 'migration'
            FROM (
                SELECT m.original_transaction_id, m.occurred_at, m.grace_from,
                    LEAD(m.occurred_at) OVER (PARTITION BY m.original_transaction_id ORDER BY m.occurred_at) AS next_at
                FROM (
                    SELECT original_transaction_id, occurred_at,
                        MAX(CASE WHEN to_state = 'grace_period' THEN new_expires_at END) AS grace_from
                    FROM entitlement_changes WHERE original_transaction_id IS NOT NULL
                    GROUP BY original_transaction_id, occurred_at
                ) m
            ) o
            LEFT JOIN subscriptions s ON s.original_transaction_id = o.original_transaction_id
                AND s.expires_at = o.grace_from AND s.grace_period_expires_at > s.expires_at
            WHERE o.grace_from IS NOT NULL AND \(bound) > o.grace_from
            ON CONFLICT DO NOTHING
            """,
        ]
    }
}
