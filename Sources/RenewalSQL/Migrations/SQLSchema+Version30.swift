extension SQLSchema {
    /// Version 30: the daily series kept from the analytics summaries after every run (issue 45).
    ///
    /// `analytics_summary_state.daily_from` is the first unit (UTC day) whose daily rows a fold of the
    /// writes' changes may have changed since the series was last refreshed; NULL when none. Each fold
    /// that marks days lowers it and adds one to `daily_marks`, so a refresh clears the mark only if no
    /// fold marked days while it computed. Summaries already built mark every day that has data, so the
    /// first run after the upgrade fills the whole series.
    static func version30(_ dialect: SQLDialect) -> [String] {
        [
            "ALTER TABLE analytics_summary_state ADD COLUMN daily_from BIGINT",
            "ALTER TABLE analytics_summary_state ADD COLUMN daily_marks BIGINT NOT NULL DEFAULT 0",
            """
            UPDATE analytics_summary_state
            SET daily_from = (SELECT MIN(day) - 1 FROM analytics_summary_rows WHERE shape <> 'corner'),
                daily_marks = 1
            WHERE status = 'built'
            """,
        ]
    }
}
