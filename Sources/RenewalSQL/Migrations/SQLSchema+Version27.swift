extension SQLSchema {
    /// Version 27: the analytics summaries (issue 45), the contribution rows of every subscription summed
    /// per distinct key, so a window aligned to UTC days is answered from the rows it selects instead of
    /// the whole ledger (docs/analytics.md, "How a window is answered fast").
    ///
    /// - `analytics_summary_rows`: one row per (shape, unit index, corner bound, key) and its summed count.
    ///   `shape` is `event`, `step` or `corner`; `day` is the event's or step's unit index, or a corner's
    ///   `until` bound (y); `since_day` is a corner's `since` bound (x; the lowest BIGINT for "always") and
    ///   0 otherwise. `row_key` is the rest of the key (figure, app, environment, product, price, period,
    ///   factor) as canonical JSON; `environment` and `bundle_id` ('' for none) repeat two of its fields for
    ///   the query's filters. The unique index serves the upsert of `--rebuild` and the three range reads
    ///   of a window: events `s <= day < u`, steps `day <= u`, corners `s < day <= u AND since_day <= s`.
    /// - `analytics_summary_state`: one row (id 1) saying what the rows were built from: the definitions'
    ///   version, the schema, when, and the ledger's mark (`MAX(updated_at)` and `COUNT(*)` of
    ///   `transactions`, `MAX(id)` of `subscription_facts`) read before the build; a different mark now
    ///   means a write since, so the rows are stale until the next `--rebuild`.
    static func version27(_ dialect: SQLDialect) -> [String] {
        [
            """
            CREATE TABLE analytics_summary_rows (
                id \(dialect.identityPrimaryKey),
                shape TEXT NOT NULL,
                day BIGINT NOT NULL,
                since_day BIGINT NOT NULL,
                environment TEXT NOT NULL,
                bundle_id TEXT NOT NULL,
                row_key TEXT NOT NULL,
                count BIGINT NOT NULL
            )
            """,
            """
            CREATE UNIQUE INDEX analytics_summary_rows_key_idx ON analytics_summary_rows (shape, day, since_day,
                row_key)
            """,
            """
            CREATE TABLE analytics_summary_state (
                id INTEGER PRIMARY KEY,
                status TEXT NOT NULL,
                definition_version INTEGER NOT NULL,
                schema_version INTEGER NOT NULL,
                started_at BIGINT NOT NULL,
                built_at BIGINT,
                subscriptions BIGINT NOT NULL,
                row_count BIGINT NOT NULL,
                ledger_mark TEXT NOT NULL
            )
            """,
        ]
    }
}
