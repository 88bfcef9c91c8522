extension SQLSchema {
    /// Version 31: the ledger's dates indexed, so a window off UTC midnights finds the few subscriptions it
    /// corrects (`OffUnitWindow`, docs/analytics.md "A window off midnights") by range reads: each
    /// transaction's expiry, revocation and seat refund (its purchase has had an index since version 15),
    /// each fact's start, end and statement. Sparse columns get partial indexes. On PostgreSQL they are built
    /// `CONCURRENTLY` in the prelude, so writers go on during the build on a large ledger.
    static func version31Prelude(_ dialect: SQLDialect) -> [String] {
        guard dialect == .postgres else { return [] }
        return version31Indexes.flatMap { concurrentIndex($0.name, on: $0.definition) }
    }

    static func version31(_ dialect: SQLDialect) -> [String] {
        // Already built by the prelude on PostgreSQL.
        guard dialect == .sqlite else { return [] }
        return version31Indexes.map { "CREATE INDEX IF NOT EXISTS \($0.name) ON \($0.definition)" }
    }

    private static var version31Indexes: [(name: String, definition: String)] {
        [
            ("transactions_expires_at_idx", "transactions (expires_at)"),
            ("transactions_revoked_at_idx", "transactions (revoked_at) WHERE revoked_at IS NOT NULL"),
            (
                "transactions_seats_revoked_at_idx",
                "transactions (seats_revoked_at) WHERE seats_revoked_at IS NOT NULL"
            ),
            ("subscription_facts_starts_at_idx", "subscription_facts (starts_at)"),
            ("subscription_facts_ends_at_idx", "subscription_facts (ends_at) WHERE ends_at IS NOT NULL"),
            ("subscription_facts_stated_at_idx", "subscription_facts (stated_at)"),
        ]
    }
}
