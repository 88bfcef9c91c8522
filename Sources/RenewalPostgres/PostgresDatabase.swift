import Foundation
import RenewalStorage
import Synchronization

/// A PostgreSQL database over libpq: one connection behind a `Mutex` (the job serialises its writes,
/// and several workers each open their own).
///
/// Workers cooperate through row leases (`FOR UPDATE SKIP LOCKED`), so there is no run lock;
/// migrations are serialised across processes with a session-level advisory lock.
public final class PostgresDatabase: SQLDatabase {
    /// The advisory lock key that serialises `migrate` across processes (`hashtext('renewal.migrate')`
    /// would do as well; a constant keeps it obvious in `pg_locks`).
    public static let migrationLockKey: Int64 = 0x7265_6E65_7761_6C00

    /// The connection URL with its password replaced by `***`, for logs and messages.
    public let redactedURL: String
    public let dialect = SQLDialect.postgres
    public var backendName: String { "postgres" }

    private let connection: Mutex<PostgresConnection>

    /// Connects to `url` as libpq understands it: `PG*` environment variables fill in what the URL
    /// leaves out, `.pgpass` supplies the password, and `sslmode`, `options` and every other URL
    /// parameter apply.
    ///
    /// - Throws: `SubscriptionStoreError.unavailable` for a URL libpq rejects ("invalid PostgreSQL
    ///   URL …") or a server it cannot reach; the message never holds the password.
    public init(url: String) throws {
        let connection = try PostgresConnection(url: url)
        self.redactedURL = connection.redactedURL
        self.connection = Mutex(connection)
    }

    public func withConnection<T: Sendable>(_ body: (any SQLConnection) throws -> T) async throws -> T {
        try connection.withLock { connection in
            try connection.reconnectIfBroken()
            return try body(connection)
        }
    }

    /// Runs `body` without an exclusive lock: on PostgreSQL concurrent runs share the due rows, each
    /// claiming batches under a lease that expires, so a second run cooperates instead of exiting 75.
    public func withRunLock<T: Sendable>(owner: String, _ body: @Sendable () async throws -> T) async throws -> T {
        try await body()
    }

    /// Holds a session-level advisory lock while `body` runs, so two processes migrating at once
    /// apply each version once (the second waits, then finds it applied).
    public func withMigrationLock<T: Sendable>(_ body: (any SQLConnection) throws -> T) async throws -> T {
        try await withConnection { connection in
            _ = try connection.execute("SELECT pg_advisory_lock($1)", [.int64(Self.migrationLockKey)])
            defer { _ = try? connection.execute("SELECT pg_advisory_unlock($1)", [.int64(Self.migrationLockKey)]) }
            return try body(connection)
        }
    }
}

/// The PostgreSQL-backed store.
public typealias PostgresSubscriptionStore = SQLSubscriptionStore<PostgresDatabase>

extension SQLSubscriptionStore where Database == PostgresDatabase {
    /// Connects to the PostgreSQL database at `url` (see `PostgresDatabase.init(url:)`). Run
    /// `migrate()` (or `renewal migrate`) before using a fresh database.
    public static func open(url: String) throws -> PostgresSubscriptionStore {
        SQLSubscriptionStore(database: try PostgresDatabase(url: url))
    }
}
