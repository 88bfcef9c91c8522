import Foundation

extension SQLSchema {
    /// Version 16: the analytics' daily series. `renewal analytics --refresh-daily` computes each day's
    /// figures from the transaction ledger (one definition, in RenewalCore) and replaces those days' rows,
    /// so a dashboard reads a few rows per day and product however large the ledger is. Amounts are
    /// cents; the row of the reporting currency (`converted` 1) holds the counts, and an amount in a
    /// currency without a rate has a row of its own (`converted` 0). `analytics_daily_series` is what
    /// dashboards read: the reporting currency's rows, amounts in units. `analytics_cohorts` holds the
    /// retention of each month's cohort after each of 12 periods, as of the refresh, read through
    /// `analytics_cohort_retention`.
    static func version16(_ dialect: SQLDialect) -> [String] {
        [
            """
            CREATE TABLE analytics_daily (
                day TEXT NOT NULL,
                bundle_id TEXT NOT NULL,
                product_id TEXT NOT NULL,
                environment TEXT NOT NULL,
                currency TEXT NOT NULL,
                converted INTEGER NOT NULL,
                active_subscriptions BIGINT NOT NULL,
                active_trials BIGINT NOT NULL,
                new_subscriptions BIGINT NOT NULL,
                new_trials BIGINT NOT NULL,
                trial_conversions BIGINT NOT NULL,
                churned BIGINT NOT NULL,
                reactivations BIGINT NOT NULL,
                mrr_cents BIGINT NOT NULL,
                revenue_cents BIGINT NOT NULL,
                refunds_cents BIGINT NOT NULL,
                computed_at BIGINT NOT NULL,
                PRIMARY KEY (day, bundle_id, product_id, environment, currency)
            )
            """,
            """
            CREATE VIEW analytics_daily_series AS
            SELECT day, bundle_id, product_id, environment, currency, active_subscriptions, active_trials,
                new_subscriptions, new_trials, trial_conversions, churned, reactivations,
                mrr_cents / 100.0 AS mrr, revenue_cents / 100.0 AS revenue, refunds_cents / 100.0 AS refunds,
                (revenue_cents - refunds_cents) / 100.0 AS net_revenue
            FROM analytics_daily
            WHERE converted = 1
            """,
            """
            CREATE TABLE analytics_cohorts (
                cohort_month TEXT NOT NULL,
                bundle_id TEXT NOT NULL,
                period INTEGER NOT NULL,
                subscriptions BIGINT NOT NULL,
                observed BIGINT NOT NULL,
                retained BIGINT NOT NULL,
                computed_at BIGINT NOT NULL,
                PRIMARY KEY (cohort_month, bundle_id, period)
            )
            """,
            """
            CREATE VIEW analytics_cohort_retention AS
            SELECT cohort_month, bundle_id, period, subscriptions, observed, retained,
                CASE WHEN observed = 0 THEN NULL ELSE retained * 1.0 / observed END AS retention
            FROM analytics_cohorts
            """,
        ]
    }
}
