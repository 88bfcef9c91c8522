extension SQLSchema {
    /// Version 24: `renewal discover` (issue 44), a read of Apple's Notification History over a window the
    /// operator chooses, adopting every purchase the database lacks.
    ///
    /// `discover_cursors` holds one row per feed stream (`FeedStream.key`, as `feed_cursors` does) with the
    /// window being read and the token of the next page, so a discover killed half way resumes where it
    /// stopped. It is a table of its own so the regular feed's cursor is never moved by a discover.
    /// `completed_at` is set when the window was read to its end; a later discover starts a new window.
    /// A small new table: cheap on both databases.
    static func version24(_ dialect: SQLDialect) -> [String] {
        [
            """
            CREATE TABLE discover_cursors (
                stream TEXT PRIMARY KEY,
                window_start BIGINT NOT NULL,
                window_end BIGINT NOT NULL,
                page_token TEXT,
                pages INTEGER NOT NULL,
                notifications INTEGER NOT NULL,
                started_at BIGINT NOT NULL,
                updated_at BIGINT NOT NULL,
                completed_at BIGINT
            )
            """
        ]
    }
}
