extension SQLSchema {
    /// Version 12 (PostgreSQL; nothing on SQLite): new receipts counted once per statement, and the
    /// billing backlog listed longest first through an index.
    ///
    /// A bulk import copies hundreds of rows into `receipts` with one statement, and counting each
    /// with its own trigger call and delta row cost about a sixth of the copy. The insert trigger now
    /// runs once per statement and writes one delta row per group from the statement's new rows (a
    /// transition table). Updates and deletes are still counted row by row. The triggers are swapped
    /// in the migration's transaction, so every insert is counted by exactly one of them.
    ///
    /// A partial index on the backlog's expiries, built `CONCURRENTLY` in the prelude, lists the
    /// backlog in expiry order. "The 20 longest in the backlog" (the Grafana panel) asks for the 20
    /// earliest expiries and the rows without one separately, so it reads 20 index entries and the
    /// few undated rows instead of computing and sorting every row's `days_in_state`.
    static func version12Prelude(_ dialect: SQLDialect) -> [String] {
        guard dialect == .postgres else { return [] }
        return concurrentIndex(
            "subscriptions_backlog_expiry_idx",
            on: "subscriptions (expires_at) WHERE state IN ('billing_retry', 'grace_period')")
    }

    static func version12(_ dialect: SQLDialect) -> [String] {
        guard dialect == .postgres else { return [] }
        return [
            """
            CREATE OR REPLACE FUNCTION renewal_count_new_receipts() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
                INSERT INTO receipt_counts
                SELECT bundle_id, COALESCE(source, 'unchecked'), environment, status, COUNT(*),
                       COUNT(original_transaction_id), COUNT(migrated_at)
                FROM new_receipts
                GROUP BY bundle_id, COALESCE(source, 'unchecked'), environment, status;
                RETURN NULL;
            END
            $$
            """,
            "DROP TRIGGER receipts_counted ON receipts",
            """
            CREATE TRIGGER receipts_counted AFTER DELETE ON receipts FOR EACH ROW
            EXECUTE FUNCTION renewal_count_receipt()
            """,
            """
            CREATE TRIGGER receipts_counted_new AFTER INSERT ON receipts REFERENCING NEW TABLE AS new_receipts
            FOR EACH STATEMENT EXECUTE FUNCTION renewal_count_new_receipts()
            """,
        ]
    }
}
