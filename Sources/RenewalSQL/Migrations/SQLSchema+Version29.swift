extension SQLSchema {
    /// Version 29: the analytics summaries kept by the job's own writes (issue 45).
    ///
    /// - `analytics_summary_deltas`: what each write changed in the summed contribution rows (its
    ///   subscriptions' rows after the write less their rows before), appended in the writing transaction
    ///   (insert only, so concurrent workers never wait on each other's summary rows). A window reads
    ///   `analytics_summary_rows` and these together; the end of every run folds them into the rows
    ///   (`renewal migrate` too), one worker at a time.
    /// - `analytics_summary_rows_zero_idx`: the rows a fold brought to zero, which it then deletes.
    /// - `analytics_summary_state.rebuilt_through`: while `--rebuild` runs, the last subscription it has
    ///   summed. A write records its change only for subscriptions at or before it: a later one is read by
    ///   the rebuild after the write, so counting the change too would count it twice.
    static func version29(_ dialect: SQLDialect) -> [String] {
        [
            """
            CREATE TABLE analytics_summary_deltas (
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
            "CREATE INDEX analytics_summary_deltas_key_idx ON analytics_summary_deltas (shape, day, since_day)",
            "ALTER TABLE analytics_summary_state ADD COLUMN rebuilt_through TEXT",
            // The rows a fold leaves at zero, found without reading the others.
            "CREATE INDEX analytics_summary_rows_zero_idx ON analytics_summary_rows (id) WHERE count = 0",
        ]
    }
}
