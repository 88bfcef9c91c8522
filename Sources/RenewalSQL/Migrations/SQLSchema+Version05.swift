extension SQLSchema {
    /// Version 5: the App Store Server API. Each receipt keeps the source that read it last, the
    /// original transaction id the Server API is asked by, and when it moved to that API; each change
    /// names its source; each run counts its migrations; one row per rate-limited request stream
    /// holds the fleet's next free slot; one view shows where the migration stands.
    static func version5(_ dialect: SQLDialect) -> [String] {
        [
            "ALTER TABLE receipts ADD COLUMN source TEXT CHECK (source IN ('verify_receipt', 'server_api'))",
            "ALTER TABLE receipts ADD COLUMN original_transaction_id TEXT",
            "ALTER TABLE receipts ADD COLUMN migrated_at BIGINT",
            "ALTER TABLE entitlement_changes ADD COLUMN source TEXT",
            "ALTER TABLE runs ADD COLUMN migrated INTEGER NOT NULL DEFAULT 0",
            """
            CREATE TABLE api_request_budget (
                bucket TEXT PRIMARY KEY,
                next_slot_at_us BIGINT NOT NULL
            )
            """,
            """
            CREATE VIEW receipts_by_source AS
            SELECT COALESCE(source, 'unchecked') AS source, environment, status, COUNT(*) AS receipts,
                   SUM(CASE WHEN original_transaction_id IS NOT NULL THEN 1 ELSE 0 END) AS with_transaction_id,
                   SUM(CASE WHEN migrated_at IS NOT NULL THEN 1 ELSE 0 END) AS migrated,
                   MAX(migrated_at) AS last_migrated_at_ms
            FROM receipts
            GROUP BY COALESCE(source, 'unchecked'), environment, status
            """,
        ]
    }
}
