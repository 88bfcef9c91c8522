import Foundation
import RenewalSQL
import RenewalStorage
import Synchronization

/// A PostgreSQL database over libpq: one connection behind a `Mutex` (the job serialises its writes,
/// and several workers each open their own). Every libpq call runs on the database's own Dispatch
/// thread (`BlockingCallQueue`), never on Swift's cooperative pool, so a stalled server cannot
/// freeze the rest of the process.
///
/// Workers cooperate through row leases (`FOR UPDATE SKIP LOCKED`); each holds a liveness lock for
/// its life (see `withRunLock`), so the others can tell a dead worker from a slow one. Migrations
/// are serialised across processes with a session-level advisory lock.
public final class PostgresDatabase: SQLDatabase {
    /// The advisory lock key that serialises `migrate` across processes (`hashtext('renewal.migrate')`
    /// would do as well; a constant keeps it obvious in `pg_locks`).
    public static let migrationLockKey: Int64 = 0x7265_6E65_7761_6C00

    /// The connection URL with its password replaced by `***`, for logs and messages.
    public let redactedURL: String
    public let dialect = SQLDialect.postgres
    public var backendName: String { "postgres" }
    public var runLockOwnsEveryLease: Bool { false }

    private let connection: Mutex<PostgresConnection>
    private let calls = BlockingCallQueue(label: "renewal.postgres")

    /// Connects to `url` as libpq understands it: `PG*` environment variables fill in what the URL
    /// leaves out, `.pgpass` supplies the password, and `sslmode`, `options` and every other URL
    /// parameter apply (see `PostgresConnection.clientDefaults` and `sessionDefaults` for the
    /// timeouts set when the URL leaves them out).
    ///
    /// - Throws: `SubscriptionStoreError.unavailable` for a URL libpq rejects ("invalid PostgreSQL
    ///   URL …") or a server it cannot reach; the message never holds the password.
    public init(url: String) throws {
        let connection = try PostgresConnection(url: url)
        self.redactedURL = connection.redactedURL
        self.connection = Mutex(connection)
    }

    /// Runs `body` on the connection, on the database's own thread. When the connection turns out
    /// to be lost (server restarted, session terminated), reconnects and runs `body` once more: a
    /// transaction the server had not committed was rolled back with the session, and writes are
    /// fenced by their lease, so a second attempt never writes a result twice.
    ///
    /// A deadlock victim or a serialization failure (SQLSTATE class 40: the server rolled the
    /// transaction back and asks for it again) runs `body` again, up to three more times, after a short
    /// pause that grows: a migration that alters tables while a worker writes them, in the other order,
    /// is one. Before, the loser failed (a migration stopped half-way, or a worker's write was lost for
    /// the run).
    public func withConnection<T: Sendable>(_ body: (any SQLConnection) throws -> T) async throws -> T {
        try await withPostgresConnection { connection in
            var rolledBack = 0
            while true {
                do {
                    return try body(connection)
                } catch let error as SubscriptionStoreError where connection.isBroken {
                    guard (try? connection.reconnectIfBroken()) != nil else { throw error }
                    return try body(connection)
                } catch let error as SubscriptionStoreError where connection.lastFailureRolledBack {
                    connection.lastFailureRolledBack = false
                    guard rolledBack < Self.rolledBackRetries else { throw error }
                    rolledBack += 1
                    try? connection.rollbackTransaction()
                    Thread.sleep(forTimeInterval: 0.02 * Double(rolledBack))
                }
            }
        }
    }

    /// How many more times a transaction the server rolled back (class 40) is run.
    static let rolledBackRetries = 3

    private func withPostgresConnection<T: Sendable>(_ body: (PostgresConnection) throws -> T) async throws -> T {
        try await calls.run {
            try connection.withLock { connection in
                try connection.reconnectIfBroken()
                return try body(connection)
            }
        }
    }

    /// Runs `body` while this session holds `owner`'s liveness lock: a session-level advisory lock
    /// the server drops when the session ends, however the process died (`kill -9`, a lost node),
    /// so `workerIsAlive` can prove a worker dead at once instead of waiting for its leases to
    /// expire. There is no exclusive run lock: concurrent runs share the due rows through leases.
    ///
    /// - Throws: `SubscriptionStoreError.locked` when a live session already uses `owner`.
    public func withRunLock<T: Sendable>(owner: String, _ body: @Sendable () async throws -> T) async throws -> T {
        try await withPostgresConnection { try $0.holdLiveness(of: owner) }
        do {
            let result = try await body()
            try? await withPostgresConnection { $0.releaseLiveness() }
            return result
        } catch {
            try? await withPostgresConnection { $0.releaseLiveness() }
            throw error
        }
    }

    /// Runs `body` while this session holds the writers' lock shared (a session-level advisory lock in
    /// the current schema, taken again after a reconnect).
    ///
    /// - Throws: `SubscriptionStoreError.copying` while `renewal copy-database` copies this schema.
    public func withWriterLock<T: Sendable>(_ body: @Sendable () async throws -> T) async throws -> T {
        try await withPostgresConnection { try $0.holdWriterLock() }
        do {
            let result = try await body()
            try? await withPostgresConnection { $0.releaseWriterLock() }
            return result
        } catch {
            try? await withPostgresConnection { $0.releaseWriterLock() }
            throw error
        }
    }

    /// Runs `body` while this session holds the writers' lock exclusively: no other session writes to
    /// this schema through renewal meanwhile. Not taken back after a reconnect: the copy's snapshot
    /// went with the session, and the copy stops.
    ///
    /// - Throws: `SubscriptionStoreError.locked` when a writer holds it now.
    public func withCopyLock<T: Sendable>(owner: String, _ body: @Sendable () async throws -> T) async throws -> T {
        guard try await withPostgresConnection({ try $0.tryCopyLock() }) else {
            throw SubscriptionStoreError.locked(
                """
                a renewal command that writes (run, import, extend, deliver) is using \(redactedURL); stop the \
                timer and the workers, let it finish, then copy
                """)
        }
        do {
            let result = try await body()
            try? await withPostgresConnection { $0.releaseCopyLock() }
            return result
        } catch {
            try? await withPostgresConnection { $0.releaseCopyLock() }
            throw error
        }
    }

    public func workerIsAlive(_ workerID: String, on connection: any SQLConnection) throws -> Bool {
        guard let connection = connection as? PostgresConnection else {
            throw SubscriptionStoreError.query("a PostgreSQL liveness probe needs a PostgreSQL connection")
        }
        return try connection.livenessIsHeld(by: workerID)
    }

    /// Runs `body` while this session holds the advisory lock of `name` in the current schema, or
    /// returns nil at once when another session holds it. The lock goes with the session, so a
    /// killed holder frees it; if the connection is lost meanwhile, another worker may start the
    /// same work, which `body` must tolerate (the change feed's uuids make a second read harmless).
    public func exclusively<T: Sendable>(_ name: String, _ body: @Sendable () async throws -> T) async throws -> T? {
        let key = "task/" + name
        guard try await withPostgresConnection({ try $0.tryLock(key) }) else { return nil }
        do {
            let result = try await body()
            try? await withPostgresConnection { $0.unlock(key) }
            return result
        } catch {
            try? await withPostgresConnection { $0.unlock(key) }
            throw error
        }
    }

    /// Holds a session-level advisory lock while `body` runs, so two processes migrating at once
    /// apply each version once (the second waits, then finds it applied).
    ///
    /// The second process waits between statements, polling, rather than inside one: a statement
    /// waiting for the lock would hold a snapshot, which the first process's
    /// `CREATE INDEX CONCURRENTLY` waits for in turn (a deadlock). Migration statements run without
    /// the session's statement timeout, as building an index on a large table takes longer.
    public func withMigrationLock<T: Sendable>(_ body: (any SQLConnection) throws -> T) async throws -> T {
        try await withConnection { connection in
            while try connection.execute(
                "SELECT 1 AS locked WHERE pg_try_advisory_lock($1)", [.int64(Self.migrationLockKey)]
            ).isEmpty {
                Thread.sleep(forTimeInterval: 0.1)
            }
            defer { _ = try? connection.execute("SELECT pg_advisory_unlock($1)", [.int64(Self.migrationLockKey)]) }
            let setting = try connection.execute("SELECT current_setting('statement_timeout') AS timeout", [])
            let timeout: String? = if case .text(let value) = setting.first?["timeout"] { value } else { nil }
            _ = try connection.execute("SET statement_timeout = 0", [])
            defer {
                if let timeout {
                    _ = try? connection.execute("SELECT set_config('statement_timeout', $1, false)", [.text(timeout)])
                }
            }
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
