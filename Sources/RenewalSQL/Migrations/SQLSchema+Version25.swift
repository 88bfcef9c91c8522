extension SQLSchema {
    /// Version 25: the view `unclaimed_purchases` (issue 44): the adopted purchases no user has claimed,
    /// per UTC day adopted, app, product, environment and currency, with the ledger's revenue of their
    /// transactions not revoked. It reads `adopted_purchases` (small) and the transactions of those
    /// subscriptions through their index, so a dashboard can show every day without a summary table.
    /// A purchase without a transaction in the ledger yet is counted under a NULL currency. A partial index
    /// keeps the unclaimed ones apart, so the listing's pages and the run's summary never read the claimed.
    static func version25(_ dialect: SQLDialect) -> [String] {
        [
            """
            CREATE VIEW unclaimed_purchases AS
            SELECT \(dialect.utcDay("a.adopted_at")) AS day, a.bundle_id, a.product_id, a.environment,
                t.currency, COUNT(DISTINCT a.original_transaction_id) AS purchases,
                COALESCE(SUM(CASE WHEN t.revoked_at IS NULL THEN t.price_milliunits ELSE 0 END), 0)
                    AS revenue_milliunits,
                MIN(a.adopted_at) AS oldest_adopted_at_ms
            FROM adopted_purchases a
            LEFT JOIN transactions t ON t.original_transaction_id = a.original_transaction_id
            WHERE a.claimed_at IS NULL
            GROUP BY \(dialect.utcDay("a.adopted_at")), a.bundle_id, a.product_id, a.environment, t.currency
            """,
            """
            CREATE INDEX adopted_purchases_unclaimed_idx ON adopted_purchases (original_transaction_id)
            WHERE claimed_at IS NULL
            """,
        ]
    }
}
