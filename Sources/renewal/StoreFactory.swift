import Foundation
import RenewalCore
import RenewalPostgres
import RenewalSQL
import RenewalSQLite
import RenewalStorage

/// The composition root for storage: picks the backend from `--database`.
enum StoreFactory {
    /// A `postgres://`/`postgresql://` URL opens PostgreSQL (libpq conventions apply; `create` is
    /// moot, `renewal migrate` creates the tables); anything else without a scheme is a SQLite path.
    static func open(_ database: String, create: Bool) throws -> any RenewalStore {
        store(on: try openDatabase(database, create: create))
    }

    /// The database `location` names, as `open` picks it; `setting` names where the location came
    /// from in messages (`--database / RENEWAL_DATABASE`, or a command's argument).
    static func openDatabase(
        _ location: String, create: Bool, setting: String = "--database / RENEWAL_DATABASE"
    ) throws -> any SQLDatabase {
        FileSizeLimit.ignoreSignal()
        let lowered = location.lowercased()
        if PostgresURL.isPostgresURL(location) {
            if let problem = PostgresURL.problem(with: location) {
                // libpq rejects the URL itself (the message is already redacted): a configuration error, exit 78.
                throw ConfigurationError(
                    "\(setting): \(problem). Fix the URL, e.g. "
                        + "postgresql://user@host:5432/db?sslmode=require; "
                        + "give the password through PGPASSWORD or ~/.pgpass, never on the command line."
                )
            }
            return try PostgresDatabase(url: location)
        }
        if lowered.contains("://") {
            throw ConfigurationError(
                """
                \(setting) must be a SQLite file path or a postgres:// URL, got a URL with another scheme.
                """
            )
        }
        return try SQLiteDatabase(path: location, create: create)
    }

    /// The store on `database`, whichever kind it is.
    private static func store<Database: SQLDatabase>(on database: Database) -> any RenewalStore {
        SQLSubscriptionStore(database: database)
    }

    /// `location` as messages may show it: a PostgreSQL URL with its password replaced by `***`.
    static func displayName(_ location: String) -> String {
        PostgresURL.isPostgresURL(location) ? PostgresURL.redacted(location) : location
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
        case .busy, .locked, .copying: return ExitStatus.locked.rawValue
        case .unavailable, .notMigrated, .schemaTooNew: return ExitStatus.configuration.rawValue
        case .query, .corruptRow, .leaseLost: return ExitStatus.internalError.rawValue
        }
    }

    var message: String { description }
}
