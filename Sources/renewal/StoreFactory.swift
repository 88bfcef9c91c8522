import Foundation
import RenewalPostgres
import RenewalSQLite
import RenewalStorage

/// The composition root for storage: picks the backend from `--database`.
enum StoreFactory {
    /// A `postgres://`/`postgresql://` URL opens PostgreSQL (libpq conventions apply; `create` is
    /// moot, `renewal migrate` creates the tables); anything else without a scheme is a SQLite path.
    static func open(_ database: String, create: Bool) throws -> any SubscriptionStore {
        FileSizeLimit.ignoreSignal()
        let lowered = database.lowercased()
        if PostgresURL.isPostgresURL(database) {
            if let problem = PostgresURL.problem(with: database) {
                // libpq rejects the URL itself (the message is already redacted): a configuration error, exit 78.
                throw ConfigurationError(
                    "--database / RENEWAL_DATABASE: \(problem). Fix the URL, e.g. "
                        + "postgresql://user@host:5432/db?sslmode=require; "
                        + "give the password through PGPASSWORD or ~/.pgpass, never on the command line."
                )
            }
            return try PostgresSubscriptionStore.open(url: database)
        }
        if lowered.contains("://") {
            throw ConfigurationError(
                """
                --database / RENEWAL_DATABASE must be a SQLite file path or a postgres:// URL, got a URL with \
                another scheme.
                """
            )
        }
        return try SQLiteSubscriptionStore.open(path: database, create: create)
    }
}

/// Store errors, as the CLI reports them.
protocol SubscriptionStoreErrorDescribing {
    var exitCode: Int32 { get }
    var message: String { get }
}

extension SubscriptionStoreError: SubscriptionStoreErrorDescribing {
    var exitCode: Int32 {
        switch self {
        case .busy: return 75
        case .unavailable, .notMigrated, .schemaTooNew: return 78
        case .locked: return 75
        case .query, .corruptRow, .leaseLost: return 1
        }
    }

    var message: String { description }
}
