extension SQLSchema {
    /// Version 28: the daily series carries each day's MRR movement (issue 45), so dashboards and the HTML
    /// page draw how MRR moved from a few rows per day instead of a pass over the ledger.
    ///
    /// `analytics_daily` gains one column per bucket of `MRRMovement`, in cents like the other amounts
    /// (`contraction` and `churned` negative): the row of the reporting currency holds the converted
    /// movement, a currency without a rate its own row. Rows refreshed before this version read 0 until
    /// the next `renewal analytics --refresh-daily` of their days fills them.
    ///
    /// `analytics_daily_series` keeps its columns in their order and adds the buckets in units and
    /// `net_new_mrr`, their sum. A view's columns cannot be changed in place on either database, so it is
    /// dropped and created again (nothing else depends on it).
    static func version28(_ dialect: SQLDialect) -> [String] {
        let buckets = ["new", "expansion", "contraction", "churned", "reactivation"]
        return buckets.map { "ALTER TABLE analytics_daily ADD COLUMN \($0)_mrr_cents BIGINT NOT NULL DEFAULT 0" } + [
            "DROP VIEW analytics_daily_series",
            """
            CREATE VIEW analytics_daily_series AS
            SELECT day, bundle_id, product_id, environment, currency, active_subscriptions, active_trials,
                new_subscriptions, new_trials, trial_conversions, churned, reactivations,
                mrr_cents / 100.0 AS mrr, revenue_cents / 100.0 AS revenue, refunds_cents / 100.0 AS refunds,
                (revenue_cents - refunds_cents) / 100.0 AS net_revenue,
                new_mrr_cents / 100.0 AS new_mrr, expansion_mrr_cents / 100.0 AS expansion_mrr,
                contraction_mrr_cents / 100.0 AS contraction_mrr, churned_mrr_cents / 100.0 AS churned_mrr,
                reactivation_mrr_cents / 100.0 AS reactivation_mrr,
                (new_mrr_cents + expansion_mrr_cents + contraction_mrr_cents + churned_mrr_cents
                    + reactivation_mrr_cents) / 100.0 AS net_new_mrr
            FROM analytics_daily
            WHERE converted = 1
            """,
        ]
    }
}
