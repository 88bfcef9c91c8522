import Foundation
import RenewalSQLite
import RenewalStorage

/// The composition root for storage: picks the backend from `--database`.
enum StoreFactory {
    static func open(_ database: String, create: Bool) throws -> any SubscriptionStore {
        let lowered = database.lowercased()
        if lowered.hasPrefix("postgres://") || lowered.hasPrefix("postgresql://") {
            throw ConfigurationError("PostgreSQL URLs are not supported by this build yet; use a SQLite file path for --database / RENEWAL_DATABASE.")
        }
        if lowered.contains("://") {
            throw ConfigurationError("--database / RENEWAL_DATABASE must be a SQLite file path or a postgres:// URL, got a URL with another scheme.")
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
        case .unavailable, .notMigrated, .schemaTooNew: return 78
        case .locked: return 75
        case .query, .corruptRow: return 1
        }
    }

    var message: String { description }
}
