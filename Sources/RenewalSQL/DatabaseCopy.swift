import Foundation
import Logging
import RenewalStorage

/// Copies every table of one database into another, empty, one (SQLite to PostgreSQL, PostgreSQL to
/// SQLite, or the same kind): `renewal copy-database`.
///
/// One code path serves every direction: each table is read through `SQLDatabase` a batch at a time,
/// in primary-key order (keyset pages, never `OFFSET`, never a whole table in memory), and written
/// through it: PostgreSQL's `COPY` where the target loads in bulk, one prepared `INSERT` per row on
/// SQLite (in-process, no round trip). The source is read in one snapshot; the target is written in
/// one transaction, so a copy that fails leaves it as it was (migrated, without receipts) and can be
/// run again.
///
/// Rows keep their ids, leases, due times and cursors, so the next run on the target continues where
/// the source stopped. PostgreSQL's identity sequences are moved past the copied ids, and its
/// dashboard summaries (kept by triggers, absent on SQLite) are rebuilt from the copied tables.
public struct DatabaseCopy: Sendable {
    /// A table the copy carries over, and the primary key it is read in order of.
    public struct Table: Sendable, Hashable {
        public var name: String
        public var key: String
        /// Whether `key` is numbered by the database (an identity column on PostgreSQL, whose sequence
        /// is moved past the copied ids).
        public var numbered: Bool

        init(_ name: String, key: String, numbered: Bool = false) {
            self.name = name
            self.key = key
            self.numbered = numbered
        }
    }

    /// Every table that holds data, in an order that satisfies the foreign keys (`subscriptions`
    /// references `receipts`).
    public static let tables: [Table] = [
        Table("receipts", key: "id", numbered: true),
        Table("subscriptions", key: "original_transaction_id"),
        Table("runs", key: "id"),
        Table("entitlement_changes", key: "id", numbered: true),
        Table("run_failures", key: "id", numbered: true),
        Table("ownership_conflicts", key: "id", numbered: true),
        Table("feed_cursors", key: "environment"),
        Table("feed_notifications", key: "notification_uuid"),
        Table("webhook_outbox", key: "change_id"),
        Table("webhook_endpoints", key: "url_digest"),
        Table("api_request_budget", key: "bucket"),
        Table("transactions", key: "transaction_id"),
        Table("consumption_consents", key: "user_id"),
        Table("refund_requests", key: "notification_uuid"),
        Table("renewal_extensions", key: "request_identifier"),
        Table("renewal_mass_extensions", key: "request_identifier"),
        Table("subscription_facts", key: "id", numbered: true),
        Table("adopted_purchases", key: "original_transaction_id"),
        Table("app_account_tokens", key: "app_account_token"),
        Table("discover_cursors", key: "stream"),
        Table("entitlement_spans", key: "id", numbered: true),
    ]

    /// Tables that are not copied: the target's migrations write its own `schema_migrations`, and
    /// PostgreSQL's dashboard summaries are rebuilt from the copied tables. The analytics' daily series
    /// is computed again by `renewal analytics --refresh-daily` on the target, and its summaries by
    /// `renewal analytics --rebuild` (until then the target recomputes every window).
    public static let tablesNotCopied: Set<String> = Set(
        [
            "schema_migrations", "analytics_daily", "analytics_cohorts", "analytics_summary_rows",
            "analytics_summary_state", "analytics_summary_deltas",
        ] + DashboardSummary.all.map(\.table))

    /// Rows read and written per batch unless the caller says otherwise: a few megabytes of receipts.
    public static let defaultBatchSize = 1000

    public let source: any SQLDatabase
    public let target: any SQLDatabase
    public let batchSize: Int
    public let logger: Logger

    public init(source: any SQLDatabase, target: any SQLDatabase, batchSize: Int = defaultBatchSize, logger: Logger) {
        self.source = source
        self.target = target
        self.batchSize = max(1, batchSize)
        self.logger = logger
    }

    /// What a copy did.
    public struct Outcome: Sendable, Equatable {
        /// The migrations applied to the target before copying.
        public var migrated: [Int]
        /// Rows copied per table, in copy order.
        public var rows: [Copied]
    }

    /// The rows copied into one table.
    public struct Copied: Sendable, Equatable {
        public var table: String
        public var count: Int
    }

    /// Checks both databases, migrates the target, and copies every table in one target transaction,
    /// holding both databases' copy locks (no command that writes starts on either meanwhile, and the
    /// copy is refused while one runs) and run locks.
    ///
    /// - Throws: `DatabaseCopyError` for a source that is not at this build's schema, a target
    ///   that already holds rows, or a transaction lost on the way; `SubscriptionStoreError` from the
    ///   databases.
    public func run() async throws -> Outcome {
        let owner = "copy-database-" + UUID().uuidString.lowercased()
        try await Self.checkSource(source)
        try await refuseTargetWithReceipts()
        return try await source.withCopyLock(owner: owner) {
            try await target.withCopyLock(owner: owner) {
                try await source.withRunLock(owner: owner) {
                    try await target.withRunLock(owner: owner) {
                        let migrated = try await migrateTarget()
                        let rows = try await copyEverything()
                        return Outcome(migrated: migrated, rows: rows)
                    }
                }
            }
        }
    }

    // MARK: - Checks

    /// The source must be at this build's schema: its tables and columns are then the ones this
    /// build knows, and the target's migrations make the same. Callers check it before opening the
    /// target too, so a refused copy creates nothing.
    public static func checkSource(_ source: any SQLDatabase) async throws {
        let dialect = source.dialect
        let found = try await source.withConnection { try SQLSchema.appliedVersion(on: $0, dialect: dialect) }
        guard found == SQLSchema.currentVersion else {
            throw DatabaseCopyError.sourceSchema(found: found, expected: SQLSchema.currentVersion)
        }
    }

    /// Before anything is written to the target (migrations included): a target holding receipts is
    /// refused. The copy checks every table again, in its transaction.
    private func refuseTargetWithReceipts() async throws {
        let dialect = target.dialect
        let holds = try await target.withConnection { connection -> Bool in
            guard try !connection.execute(dialect.tableExistsQuery, [.text("receipts")]).isEmpty else { return false }
            return try !connection.execute("SELECT 1 AS present FROM receipts LIMIT 1", []).isEmpty
        }
        if holds { throw DatabaseCopyError.targetNotEmpty(table: "receipts") }
    }

    /// Applies the target's missing migrations (none when it is at this build's schema already).
    private func migrateTarget() async throws -> [Int] {
        let dialect = target.dialect
        let now = Date()
        return try await target.withMigrationLock { connection in
            let found = try SQLSchema.appliedVersion(on: connection, dialect: dialect)
            if found > SQLSchema.currentVersion {
                throw SubscriptionStoreError.schemaTooNew(found: found, expected: SQLSchema.currentVersion)
            }
            return try SQLSchema.migrate(on: connection, dialect: dialect, now: now)
        }
    }

    // MARK: - Copy

    /// Opens the source snapshot and the target transaction, copies each table, and commits the
    /// target; rolls both back on any failure.
    private func copyEverything() async throws -> [Copied] {
        let sourceDialect = source.dialect
        let targetDialect = target.dialect
        try await source.withConnection { connection in
            // A deferred SQLite transaction reads one snapshot without taking the write lock;
            // PostgreSQL's repeatable read does the same for every statement of the copy.
            _ = try connection.execute(
                sourceDialect == .postgres ? "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY" : "BEGIN", [])
        }
        do {
            try await target.withConnection { connection in
                try connection.beginTransaction()
                if targetDialect == .postgres {
                    // Rebuilding the summaries of a large database takes longer than the session's
                    // default statement timeout; this lifts it for this transaction only.
                    _ = try connection.execute("SET LOCAL statement_timeout = 0", [])
                }
            }
            let counts = try await copyTables()
            // Every row is read: end the source's snapshot now rather than hold it (and, on PostgreSQL,
            // an idle transaction the server may end) while the target rebuilds its summaries.
            _ = try? await source.withConnection { try $0.rollbackTransaction() }
            try await onTarget { connection in
                if targetDialect == .postgres {
                    for table in Self.tables where table.numbered {
                        _ = try connection.execute(
                            """
                            SELECT setval(pg_get_serial_sequence('\(table.name)', '\(table.key)'), MAX(\(table.key)))
                            FROM \(table.name)
                            """, [])
                    }
                }
                for statement in SQLSchema.summaryRebuild(targetDialect) {
                    _ = try connection.execute(statement, [])
                }
                for copied in counts {
                    let found =
                        try connection.execute("SELECT COUNT(*) AS n FROM \(copied.table)", []).first?.int("n") ?? -1
                    guard found == copied.count else {
                        throw DatabaseCopyError.countMismatch(table: copied.table, copied: copied.count, found: found)
                    }
                }
            }
            try await onTarget { try $0.commitTransaction() }
            if targetDialect == .postgres {
                // Fresh statistics for the planner, which would otherwise plan on empty tables until
                // autovacuum came round. Only an optimisation: a failure is logged, not thrown.
                do {
                    try await target.withConnection { connection in
                        for table in Self.tables { _ = try connection.execute("ANALYZE \(table.name)", []) }
                    }
                } catch {
                    logger.warning(
                        "ANALYZE after the copy failed; autovacuum will do it", metadata: ["error": "\(error)"])
                }
            }
            return counts
        } catch {
            _ = try? await target.withConnection { try $0.rollbackTransaction() }
            _ = try? await source.withConnection { try $0.rollbackTransaction() }
            throw error
        }
    }

    /// Checks that the two databases hold the tables this build copies, with the same columns, and
    /// that the target's are empty; then copies each, batch by batch.
    private func copyTables() async throws -> [Copied] {
        let sourceDialect = source.dialect
        let targetDialect = target.dialect
        let sourceTables = try await onSource { try Self.tableNames(on: $0, dialect: sourceDialect) }
        let known = Set(Self.tables.map(\.name)).union(Self.tablesNotCopied)
        if let unknown = sourceTables.subtracting(known).sorted().first {
            throw DatabaseCopyError.unknownTable(unknown)
        }
        var counts: [Copied] = []
        for table in Self.tables {
            let columns = try await onSource { try Self.columns(of: table.name, on: $0, dialect: sourceDialect) }
            let targetColumns = try await onTarget { try Self.columns(of: table.name, on: $0, dialect: targetDialect) }
            guard !columns.isEmpty, Set(columns) == Set(targetColumns), columns.contains(table.key) else {
                throw DatabaseCopyError.columnsDiffer(table: table.name)
            }
            let occupied = try await onTarget { connection in
                try !connection.execute("SELECT 1 AS present FROM \(table.name) LIMIT 1", []).isEmpty
            }
            if occupied { throw DatabaseCopyError.targetNotEmpty(table: table.name) }
            let copied: Int
            do {
                copied = try await copy(table, columns: columns)
            } catch let error as SubscriptionStoreError {
                throw DatabaseCopyError.tableFailed(table: table.name, reason: error.description)
            }
            logger.info(
                "Copied table", metadata: ["db.table": "\(table.name)", "db.rows": "\(copied)"])
            counts.append(Copied(table: table.name, count: copied))
        }
        return counts
    }

    /// Copies one table a batch at a time: the source's next `batchSize` rows after the last key
    /// copied, then the same rows into the target. Only one batch is ever held.
    private func copy(_ table: Table, columns: [String]) async throws -> Int {
        let columnList = columns.joined(separator: ", ")
        let first = "SELECT \(columnList) FROM \(table.name) ORDER BY \(table.key) LIMIT \(batchSize)"
        let next =
            "SELECT \(columnList) FROM \(table.name) WHERE \(table.key) > $1 ORDER BY \(table.key) LIMIT \(batchSize)"
        let keyIndex = columns.firstIndex(of: table.key) ?? 0
        var last: SQLValue?
        var copied = 0
        while true {
            let after = last
            let batch = try await onSource { connection in
                try connection.execute(after == nil ? first : next, after.map { [$0] } ?? [])
            }
            guard !batch.isEmpty else { break }
            try await onTarget { try Self.write(batch, into: table.name, columns: columns, on: $0) }
            copied += batch.count
            last = batch[batch.count - 1].values[keyIndex]
            if batch.count < batchSize { break }
        }
        return copied
    }

    /// Writes `rows` (each holding `columns`, in order): one `COPY` where the connection loads in
    /// bulk, else one prepared `INSERT` per row.
    static func write(_ rows: [SQLRow], into table: String, columns: [String], on connection: any SQLConnection) throws
    {
        if connection.bulkLoads {
            try connection.copy(into: table, columns: columns, rows: rows.map { $0.values.map(copyText) })
            return
        }
        let placeholders = (1...columns.count).map { "$\($0)" }.joined(separator: ", ")
        let insert = "INSERT INTO \(table) (\(columns.joined(separator: ", "))) VALUES (\(placeholders))"
        for row in rows {
            _ = try connection.execute(insert, row.values)
        }
    }

    /// A value in COPY's text form; nil for NULL. A whole number read back as a double is written as
    /// an integer, which every integer column accepts.
    static func copyText(_ value: SQLValue) -> String? {
        switch value {
        case .null: return nil
        case .int64(let value): return String(value)
        case .text(let value): return value
        case .double(let value):
            if let whole = Int64(exactly: value) { return String(whole) }
            return "\(value)"
        }
    }

    // MARK: - Connections

    /// Runs `body` on the source inside the snapshot opened by `copyEverything`. A lost PostgreSQL
    /// session comes back outside any transaction: the copy stops rather than read another snapshot.
    private func onSource<T: Sendable>(_ body: (any SQLConnection) throws -> T) async throws -> T {
        try await source.withConnection { connection in
            guard connection.isInTransaction else { throw DatabaseCopyError.transactionLost(side: "source") }
            return try body(connection)
        }
    }

    /// Runs `body` on the target inside the copy's transaction. A lost PostgreSQL session comes back
    /// outside any transaction (the server rolled the copy back): the copy stops rather than write
    /// what is left outside a transaction.
    private func onTarget<T: Sendable>(_ body: (any SQLConnection) throws -> T) async throws -> T {
        try await target.withConnection { connection in
            guard connection.isInTransaction else { throw DatabaseCopyError.transactionLost(side: "target") }
            return try body(connection)
        }
    }

    /// The tables of the connection's database (its current schema on PostgreSQL).
    static func tableNames(on connection: any SQLConnection, dialect: SQLDialect) throws -> Set<String> {
        let sql =
            dialect == .postgres
            ? """
            SELECT table_name AS name FROM information_schema.tables
            WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'
            """
            : "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
        return Set(try connection.execute(sql, []).map { try $0.text("name") })
    }

    /// The columns of `table`, in table order.
    static func columns(of table: String, on connection: any SQLConnection, dialect: SQLDialect) throws -> [String] {
        let sql =
            dialect == .postgres
            ? """
            SELECT column_name AS name FROM information_schema.columns
            WHERE table_schema = current_schema() AND table_name = $1 ORDER BY ordinal_position
            """
            : "SELECT name FROM pragma_table_info($1) ORDER BY cid"
        return try connection.execute(sql, [.text(table)]).map { try $0.text("name") }
    }
}
