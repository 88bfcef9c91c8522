import Foundation
import RenewalStorage

/// The versioned schema, written once for SQLite and PostgreSQL. Times are Unix epoch milliseconds
/// (`BIGINT`), booleans `INTEGER` 0/1 (or NULL when unknown), strings `TEXT`.
///
/// Migrations are append-only: a released version is never edited; a change is a new version, in a file
/// of its own (`Migrations/SQLSchema+VersionNN.swift`).
public enum SQLSchema {
    /// One schema version: statements run in order, in one transaction, then recorded in
    /// `schema_migrations`.
    public struct Migration: Sendable {
        public var version: Int
        public var statements: @Sendable (SQLDialect) -> [String]
        /// Statements run one by one before the transaction, each on its own, for work that must
        /// not hold locks for long on a large table (`CREATE INDEX CONCURRENTLY`). Each must be
        /// harmless to run again: a migration interrupted after them runs them again.
        public var prelude: @Sendable (SQLDialect) -> [String] = { _ in [] }
        /// Work in Swift run inside the migration's transaction after `statements`, for what SQL cannot
        /// say (rebuilding a table with Core's rules). It reads and writes in chunks, never whole tables.
        public var rebuild: @Sendable (any SQLConnection, SQLDialect) throws -> Void = { _, _ in }
    }

    /// The version this build expects.
    public static var currentVersion: Int { migrations.last?.version ?? 0 }

    /// Every migration, oldest first.
    public static let migrations: [Migration] = [
        Migration(version: 1, statements: version1),
        Migration(version: 2, statements: version2),
        Migration(version: 3, statements: version3),
        Migration(version: 4, statements: version4),
        Migration(version: 5, statements: version5),
        Migration(version: 6, statements: version6),
        Migration(version: 7, statements: version7),
        Migration(version: 8, statements: version8),
        Migration(version: 9, statements: version9),
        Migration(version: 10, statements: version10),
        Migration(version: 11, statements: version11, prelude: version11Prelude),
        Migration(version: 12, statements: version12, prelude: version12Prelude),
        Migration(version: 13, statements: version13),
        Migration(version: 14, statements: version14),
        Migration(version: 15, statements: version15),
        Migration(version: 16, statements: version16),
        Migration(version: 17, statements: version17),
        Migration(version: 18, statements: version18),
        Migration(version: 19, statements: version19),
        Migration(version: 20, statements: version20),
        Migration(version: 21, statements: version21),
        Migration(version: 22, statements: version22, prelude: version22Prelude, rebuild: version22Rebuild),
        Migration(version: 23, statements: version23),
        Migration(version: 24, statements: version24),
        Migration(version: 25, statements: version25),
        Migration(version: 26, statements: version26),
        Migration(version: 27, statements: version27),
        Migration(version: 28, statements: version28),
        Migration(version: 29, statements: version29),
        Migration(version: 30, statements: version30),
        Migration(version: 31, statements: version31, prelude: version31Prelude),
    ]

    static let createMigrationsTable = """
        CREATE TABLE IF NOT EXISTS schema_migrations (
            version INTEGER PRIMARY KEY,
            applied_at BIGINT NOT NULL
        )
        """
}

extension SQLSchema {
    /// The highest applied version, or 0 when the schema was never migrated.
    static func appliedVersion(on connection: any SQLConnection, dialect: SQLDialect) throws -> Int {
        let present = try connection.execute(dialect.tableExistsQuery, [.text("schema_migrations")])
        guard !present.isEmpty else { return 0 }
        let rows = try connection.execute("SELECT MAX(version) AS version FROM schema_migrations", [])
        return try rows.first?.optionalInt("version") ?? 0
    }

    /// Applies every missing migration, each in its own transaction. Returns the versions applied.
    static func migrate(
        on connection: any SQLConnection, dialect: SQLDialect, now: Date, through version: Int = currentVersion
    ) throws -> [Int] {
        _ = try connection.execute(createMigrationsTable, [])
        var applied: [Int] = []
        func isApplied(_ migration: Migration) throws -> Bool {
            try !connection.execute(
                "SELECT version FROM schema_migrations WHERE version = $1", [.int64(Int64(migration.version))]
            ).isEmpty
        }
        for migration in migrations where migration.version <= version {
            let prelude = migration.prelude(dialect)
            if !prelude.isEmpty, try !isApplied(migration) {
                for statement in prelude { _ = try connection.execute(statement, []) }
            }
            let didApply = try connection.transaction { () throws -> Bool in
                let found = try appliedVersion(on: connection, dialect: dialect)
                if found > currentVersion {
                    throw SubscriptionStoreError.schemaTooNew(found: found, expected: currentVersion)
                }
                guard try !isApplied(migration) else { return false }
                for statement in migration.statements(dialect) {
                    _ = try connection.execute(statement, [])
                }
                try migration.rebuild(connection, dialect)
                _ = try connection.execute(
                    "INSERT INTO schema_migrations (version, applied_at) VALUES ($1, $2)",
                    [.int64(Int64(migration.version)), SQLValue(now)]
                )
                return true
            }
            if didApply { applied.append(migration.version) }
        }
        return applied
    }
}
