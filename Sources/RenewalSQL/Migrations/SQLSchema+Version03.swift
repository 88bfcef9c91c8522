extension SQLSchema {
    /// Version 3: crash recovery. Each run row names the worker that leases rows for it (a dead
    /// worker's leases are taken back and its run marked `abandoned`), counts the results it could
    /// not write because its lease was gone, and two small partial indexes find leased rows and
    /// running runs without scanning the tables.
    static func version3(_ dialect: SQLDialect) -> [String] {
        [
            "ALTER TABLE runs ADD COLUMN worker_id TEXT",
            "ALTER TABLE runs ADD COLUMN lease_lost INTEGER NOT NULL DEFAULT 0",
            "CREATE INDEX receipts_lease_owner_idx ON receipts (lease_owner) WHERE lease_owner IS NOT NULL",
            "CREATE INDEX runs_running_idx ON runs (worker_id) WHERE status = 'running'",
        ]
    }
}
