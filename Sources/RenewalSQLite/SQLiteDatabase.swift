import Foundation
import RenewalSQL
import RenewalStorage
import Synchronization

/// A SQLite database file over the system libsqlite3: one connection in WAL mode behind a `Mutex`,
/// with a prepared-statement cache, and a run lock on `<path>.lock`. Statements run on the
/// database's own thread (`BlockingCallQueue`), never on a thread of the run's executor: a write
/// waiting out another process's lock (`busy_timeout`) or a slow disk stalls only that thread,
/// while the run's requests, timers and signal handling go on.
public final class SQLiteDatabase: SQLDatabase {
    /// How long a statement waits for another process's write lock before failing, in milliseconds.
    public static let busyTimeoutMilliseconds = 5000

    /// The database file.
    public let path: String
    public let dialect = SQLDialect.sqlite
    public var backendName: String { "sqlite" }
    /// One run at a time holds the run lock, so it owns every lease.
    public var runLockOwnsEveryLease: Bool { true }

    private let connection: Mutex<SQLiteConnection>
    private let calls = BlockingCallQueue(label: "renewal.sqlite")

    /// Opens (and with `create`, creates) the database at `path` and configures the connection:
    /// `journal_mode=WAL`, `synchronous=NORMAL`, `busy_timeout`, `foreign_keys=ON`.
    ///
    /// - Throws: `SubscriptionStoreError.unavailable` when the linked SQLite is older than 3.35, when
    ///   the file is missing and `create` is false, or when it cannot be opened.
    public init(path: String, create: Bool) throws {
        let linked = SQLiteVersion.linked
        try SQLiteVersion.check(found: linked.number, text: linked.text)
        if !create && !FileManager.default.fileExists(atPath: path) {
            throw SubscriptionStoreError.unavailable("Database file not found at \(path). Run `renewal migrate` first.")
        }
        if create, path != ":memory:", !FileManager.default.fileExists(atPath: path) {
            // Every customer's receipt lives here: made owner-only before SQLite opens it; SQLite gives
            // its -wal and -shm files the database file's mode.
            OwnerOnlyFile.create(atPath: path)
        }
        let connection = try SQLiteConnection(path: path, create: create)
        _ = try connection.execute("PRAGMA busy_timeout = \(Self.busyTimeoutMilliseconds)", [])
        let mode = try connection.execute("PRAGMA journal_mode = WAL", [])
        guard let row = mode.first, case .text(let name)? = row["journal_mode"], name.lowercased() == "wal" else {
            throw SubscriptionStoreError.unavailable("cannot switch the SQLite database at \(path) to WAL mode")
        }
        _ = try connection.execute("PRAGMA synchronous = NORMAL", [])
        _ = try connection.execute("PRAGMA foreign_keys = ON", [])
        self.path = path
        self.connection = Mutex(connection)
    }

    public func withConnection<T: Sendable>(_ body: (any SQLConnection) throws -> T) async throws -> T {
        try await calls.run {
            try connection.withLock { connection in try body(connection) }
        }
    }

    /// Holds an exclusive, non-blocking `flock` on `<path>.lock` while `body` runs. The kernel
    /// releases it if the process dies.
    ///
    /// - Throws: `SubscriptionStoreError.locked("held by pid N on HOST since …")` when another
    ///   process (or another store in this one) holds it.
    public func withRunLock<T: Sendable>(owner: String, _ body: @Sendable () async throws -> T) async throws -> T {
        let lock = try SQLiteRunLock.acquire(path: path + ".lock", owner: owner)
        defer { lock.release() }
        return try await body()
    }

    /// The lock every command that writes holds shared, and `renewal copy-database` exclusively.
    var copyLockPath: String { path + ".copy-lock" }

    /// Holds a shared, non-blocking `flock` on `<path>.copy-lock` while `body` runs (any number of
    /// writers share it).
    ///
    /// - Throws: `SubscriptionStoreError.copying("held by pid N on HOST since …")` while
    ///   `renewal copy-database` copies this file.
    public func withWriterLock<T: Sendable>(_ body: @Sendable () async throws -> T) async throws -> T {
        let lock = try SQLiteRunLock.acquire(path: copyLockPath, owner: nil) { .copying($0) }
        defer { lock.release() }
        return try await body()
    }

    /// Holds an exclusive, non-blocking `flock` on `<path>.copy-lock` while `body` runs.
    ///
    /// - Throws: `SubscriptionStoreError.locked` while a command that writes holds it shared.
    public func withCopyLock<T: Sendable>(owner: String, _ body: @Sendable () async throws -> T) async throws -> T {
        let path = path
        let lock = try SQLiteRunLock.acquire(path: copyLockPath, owner: owner) { _ in
            .locked(
                """
                a renewal command that writes (run, import, extend, deliver) is using \(path); stop the timer, \
                let it finish, then copy
                """)
        }
        defer { lock.release() }
        return try await body()
    }
}

extension SQLiteDatabase {
    /// Only called by the holder of the run lock: no other worker lives.
    public func workerIsAlive(_ workerID: String, on connection: any SQLConnection) throws -> Bool {
        false
    }
}

/// The SQLite-backed store.
public typealias SQLiteSubscriptionStore = SQLSubscriptionStore<SQLiteDatabase>

extension SQLSubscriptionStore where Database == SQLiteDatabase {
    /// Opens the SQLite store at `path`. With `create` false a missing file is an error naming
    /// `renewal migrate`; `renewal migrate` passes true, then calls `migrate()`.
    public static func open(path: String, create: Bool) throws -> SQLiteSubscriptionStore {
        SQLSubscriptionStore(database: try SQLiteDatabase(path: path, create: create))
    }
}
