import Foundation
import RenewalStorage

/// One connection to a SQL database, used by one caller at a time (its `SQLDatabase` serialises
/// access).
///
/// SQL is written with `$1, $2…` placeholders; backends that spell them differently rewrite them
/// when preparing. Parameters are always bound, never spliced into the text. Implementations throw
/// only `SubscriptionStoreError`, with messages that never contain bound values.
public protocol SQLConnection {
    /// Runs one statement with its `$n` placeholders bound to `binds`, and returns every row it produces.
    func execute(_ sql: String, _ binds: [SQLValue]) throws -> [SQLRow]

    /// Starts a transaction that takes the write lock up front (SQLite `BEGIN IMMEDIATE`, PostgreSQL `BEGIN`).
    func beginTransaction() throws
    func commitTransaction() throws
    func rollbackTransaction() throws

    /// Whether a transaction is open on this connection. A caller that keeps one open across several
    /// `withConnection` calls checks it, as a lost PostgreSQL session is replaced by a new one
    /// outside any transaction.
    var isInTransaction: Bool { get }

    /// Whether `copy` loads in bulk here: PostgreSQL, where each statement costs a round trip. SQLite
    /// (in-process, no round trip) writes row by row.
    var bulkLoads: Bool { get }

    /// Loads `rows` (text values, nil for NULL) into `columns` of `table` in one bulk stream
    /// (PostgreSQL's `COPY … FROM STDIN`). Only called where `bulkLoads`.
    func copy(into table: String, columns: [String], rows: [[String?]]) throws
}

extension SQLConnection {
    public var bulkLoads: Bool { false }

    public func copy(into table: String, columns: [String], rows: [[String?]]) throws {
        throw SubscriptionStoreError.query("this database has no bulk load")
    }
}

extension SQLConnection {
    /// Runs `body` inside a transaction: committed when it returns, rolled back when it throws.
    public func transaction<T>(_ body: () throws -> T) throws -> T {
        try beginTransaction()
        do {
            let result = try body()
            try commitTransaction()
            return result
        } catch {
            try? rollbackTransaction()
            throw error
        }
    }
}

/// A database the generic `SQLSubscriptionStore` runs on: serialised access to a connection, the
/// dialect's few differences, and the run lock.
public protocol SQLDatabase: Sendable {
    /// What differs between SQLite and PostgreSQL.
    var dialect: SQLDialect { get }

    /// A short name for logs: `sqlite` or `postgres`.
    var backendName: String { get }

    /// Runs `body` with exclusive use of a connection.
    func withConnection<T: Sendable>(_ body: (any SQLConnection) throws -> T) async throws -> T

    /// Runs `body` while this process may lease rows as `owner`: SQLite holds the exclusive run lock
    /// (or throws `SubscriptionStoreError.locked`); PostgreSQL holds `owner`'s liveness lock, which
    /// other workers probe with `workerIsAlive`.
    func withRunLock<T: Sendable>(owner: String, _ body: @Sendable () async throws -> T) async throws -> T

    /// Runs `body` as one of the commands that write to this database, which share this lock (SQLite: a
    /// shared `flock` on `<path>.copy-lock`; PostgreSQL: a shared session advisory lock in the schema).
    /// Throws `SubscriptionStoreError.copying` at once, before `body` writes anything, while
    /// `renewal copy-database` copies the database (`withCopyLock`).
    func withWriterLock<T: Sendable>(_ body: @Sendable () async throws -> T) async throws -> T

    /// Runs `body` while no command that writes holds `withWriterLock` (`renewal copy-database`: no row
    /// is written behind the copy's back); throws `SubscriptionStoreError.locked` at once when one does.
    func withCopyLock<T: Sendable>(owner: String, _ body: @Sendable () async throws -> T) async throws -> T

    /// True where the run lock admits one run at a time (SQLite): whoever holds it owns every lease,
    /// so any other lease found belongs to a dead process.
    var runLockOwnsEveryLease: Bool { get }

    /// Whether the worker that leases rows as `workerID` is provably alive. Backends whose run lock
    /// owns every lease answer false (the caller holds the lock, so no other worker lives).
    func workerIsAlive(_ workerID: String, on connection: any SQLConnection) throws -> Bool

    /// Runs `body` (the migrations) on a connection while no other process migrates the same
    /// database. Default: `withConnection` (SQLite's `BEGIN IMMEDIATE` already serialises them);
    /// PostgreSQL holds an advisory lock.
    func withMigrationLock<T: Sendable>(_ body: (any SQLConnection) throws -> T) async throws -> T

    /// Runs `body` unless another process is running one under the same `name`; nil when it is.
    /// Default: runs it (SQLite's run lock admits one run at a time); PostgreSQL tries a session
    /// advisory lock, which the server drops with the session if the process dies.
    func exclusively<T: Sendable>(_ name: String, _ body: @Sendable () async throws -> T) async throws -> T?
}

extension SQLDatabase {
    public func exclusively<T: Sendable>(_ name: String, _ body: @Sendable () async throws -> T) async throws -> T? {
        try await body()
    }

    public func withMigrationLock<T: Sendable>(_ body: (any SQLConnection) throws -> T) async throws -> T {
        try await withConnection(body)
    }
}

extension SQLDatabase {
    /// Runs `body` in one transaction on a connection.
    public func withTransaction<T: Sendable>(_ body: (any SQLConnection) throws -> T) async throws -> T {
        try await withConnection { connection in
            try connection.transaction { try body(connection) }
        }
    }
}

/// The few things that really differ between SQLite and PostgreSQL. Everything else in the schema
/// and the queries is written once.
public struct SQLDialect: Sendable, Hashable {
    /// The column definition of an auto-numbered 64-bit primary key.
    public var identityPrimaryKey: String
    /// Appended to the inner `SELECT` that picks rows to lease (`FOR UPDATE SKIP LOCKED`, or empty
    /// where the database has a single writer).
    public var lockingClause: String
    /// Appended to a `SELECT` of one row the transaction is about to write, so no other
    /// transaction changes it first (`FOR UPDATE`, or empty where the database has a single writer).
    public var rowLockClause: String
    /// A query returning one row when a table named `$1` exists in the current schema.
    public var tableExistsQuery: String

    /// An expression giving the UTC day (`YYYY-MM-DD` text) of the epoch-milliseconds expression in `{}`.
    public var utcDayTemplate: String
    /// An expression giving the current time in epoch milliseconds (a BIGINT).
    public var nowMilliseconds: String
    /// A statement telling listening sessions about new changes (`$1`: their ids, comma-separated),
    /// delivered when the transaction commits; nil where the database has no such thing.
    public var changeNotification: String?

    public init(
        identityPrimaryKey: String, lockingClause: String, rowLockClause: String, tableExistsQuery: String,
        utcDayTemplate: String, nowMilliseconds: String, changeNotification: String? = nil
    ) {
        self.identityPrimaryKey = identityPrimaryKey
        self.lockingClause = lockingClause
        self.rowLockClause = rowLockClause
        self.tableExistsQuery = tableExistsQuery
        self.utcDayTemplate = utcDayTemplate
        self.nowMilliseconds = nowMilliseconds
        self.changeNotification = changeNotification
    }

    /// The UTC day, as `YYYY-MM-DD` text, of an epoch-milliseconds column or expression.
    public func utcDay(_ milliseconds: String) -> String {
        utcDayTemplate.replacingOccurrences(of: "{}", with: milliseconds)
    }

    /// SQLite: rowid primary keys, one writer at a time so no row locks.
    public static let sqlite = SQLDialect(
        identityPrimaryKey: "INTEGER PRIMARY KEY",
        lockingClause: "",
        rowLockClause: "",
        tableExistsQuery: "SELECT 1 AS present FROM sqlite_master WHERE type = 'table' AND name = $1",
        utcDayTemplate: "strftime('%Y-%m-%d', ({}) / 1000, 'unixepoch')",
        nowMilliseconds: "CAST(strftime('%s', 'now') AS INTEGER) * 1000"
    )

    /// PostgreSQL: identity columns and `SKIP LOCKED` so cooperating workers never take the same rows.
    public static let postgres = SQLDialect(
        identityPrimaryKey: "BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY",
        lockingClause: "FOR UPDATE SKIP LOCKED",
        rowLockClause: "FOR UPDATE",
        tableExistsQuery: """
            SELECT 1 AS present FROM information_schema.tables
            WHERE table_schema = current_schema() AND table_name = $1
            """,
        utcDayTemplate: "to_char(to_timestamp(({}) / 1000.0) AT TIME ZONE 'UTC', 'YYYY-MM-DD')",
        nowMilliseconds: "CAST(EXTRACT(EPOCH FROM now()) * 1000 AS BIGINT)",
        changeNotification: "SELECT pg_notify('renewal_changes', $1)"
    )
}
