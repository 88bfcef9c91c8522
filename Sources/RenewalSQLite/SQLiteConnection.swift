import CSQLite
import Foundation
import RenewalSQL
import RenewalStorage

/// One open libsqlite3 handle with a prepared-statement cache.
///
/// Not thread-safe by itself: `SQLiteDatabase` only touches it inside its `Mutex`, which is what
/// makes the unchecked `Sendable` sound.
final class SQLiteConnection: SQLConnection, @unchecked Sendable {
    /// Statements kept prepared at most; beyond it the cache is emptied (dynamic `IN` lists vary).
    private static let cacheCapacity = 128

    private let handle: OpaquePointer
    private var cache: [String: OpaquePointer] = [:]
    /// The result columns of each cached statement, built once: naming a row's columns (a dictionary of
    /// each name and its lowercase) cost more than running a one-row query by primary key.
    private var columnNames: [OpaquePointer: SQLColumnNames] = [:]
    /// The database file, named in every error so an operator knows which file to fix.
    private let path: String

    /// Opens `path`; `create` allows creating a missing file.
    init(path: String, create: Bool) throws {
        var handle: OpaquePointer?
        let flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX | (create ? SQLITE_OPEN_CREATE : 0)
        let code = sqlite3_open_v2(path, &handle, flags, nil)
        guard code == SQLITE_OK, let handle else {
            let detail = handle.map { String(cString: sqlite3_errmsg($0)) } ?? String(cString: sqlite3_errstr(code))
            let systemError = handle.map { sqlite3_system_errno($0) } ?? 0
            if let handle { sqlite3_close_v2(handle) }
            throw SQLiteFailure(code: code, message: detail, systemError: systemError).error(
                path: path, action: "opening it")
        }
        self.handle = handle
        self.path = path
        sqlite3_extended_result_codes(handle, 1)
    }

    deinit {
        for statement in cache.values { sqlite3_finalize(statement) }
        sqlite3_close_v2(handle)
    }

    func execute(_ sql: String, _ binds: [SQLValue]) throws -> [SQLRow] {
        let statement = try prepared(sql)
        defer {
            sqlite3_reset(statement)
            sqlite3_clear_bindings(statement)
        }
        guard Int(sqlite3_bind_parameter_count(statement)) <= binds.count else {
            throw SubscriptionStoreError.query("statement expects more parameters than the \(binds.count) bound")
        }
        for (offset, value) in binds.enumerated() {
            try bind(value, at: Int32(offset + 1), to: statement)
        }
        var columns: SQLColumnNames?
        var rows: [SQLRow] = []
        while true {
            let code = sqlite3_step(statement)
            if code == SQLITE_DONE { break }
            guard code == SQLITE_ROW else { throw error(code, while: "running a statement") }
            let names = columns ?? resultColumns(of: statement)
            columns = names
            let values = (0..<Int32(names.names.count)).map { column(statement, $0) }
            rows.append(SQLRow(names: names, values: values))
        }
        return rows
    }

    /// The statement's result columns, from the cache when SQLite still names them the same (a statement
    /// SQLite prepared again after a schema change may not: `SELECT *` after a migration added a column).
    private func resultColumns(of statement: OpaquePointer) -> SQLColumnNames {
        let count = Int(sqlite3_column_count(statement))
        if let cached = columnNames[statement], cached.names.count == count,
            cached.names.indices.allSatisfy({ index in
                guard let name = sqlite3_column_name(statement, Int32(index)) else { return false }
                return cached.names[index].withCString { strcmp($0, name) == 0 }
            })
        {
            return cached
        }
        let names = SQLColumnNames(
            (0..<Int32(count)).map { sqlite3_column_name(statement, $0).map { String(cString: $0) } ?? "?column?" })
        columnNames[statement] = names
        return names
    }

    func beginTransaction() throws {
        // IMMEDIATE takes the write lock now, so a read-then-write transaction never fails to upgrade.
        _ = try execute("BEGIN IMMEDIATE", [])
    }

    func commitTransaction() throws {
        _ = try execute("COMMIT", [])
    }

    func rollbackTransaction() throws {
        guard sqlite3_get_autocommit(handle) == 0 else { return }
        _ = try execute("ROLLBACK", [])
    }

    var isInTransaction: Bool {
        sqlite3_get_autocommit(handle) == 0
    }

    // MARK: - Private

    private func prepared(_ sql: String) throws -> OpaquePointer {
        if let statement = cache[sql] { return statement }
        let text = Self.sqliteParameters(sql)
        var statement: OpaquePointer?
        let code = sqlite3_prepare_v3(handle, text, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &statement, nil)
        guard code == SQLITE_OK, let statement else { throw error(code, while: "preparing a statement") }
        if cache.count >= Self.cacheCapacity {
            for cached in cache.values { sqlite3_finalize(cached) }
            cache.removeAll(keepingCapacity: true)
            columnNames.removeAll(keepingCapacity: true)
        }
        cache[sql] = statement
        return statement
    }

    private func bind(_ value: SQLValue, at index: Int32, to statement: OpaquePointer) throws {
        let code: Int32
        switch value {
        case .null: code = sqlite3_bind_null(statement, index)
        case .int64(let value): code = sqlite3_bind_int64(statement, index, value)
        case .double(let value): code = sqlite3_bind_double(statement, index, value)
        case .text(let value): code = sqlite3_bind_text(statement, index, value, -1, Self.transient)
        }
        guard code == SQLITE_OK else { throw error(code, while: "binding parameter \(index)") }
    }

    private func column(_ statement: OpaquePointer, _ index: Int32) -> SQLValue {
        switch sqlite3_column_type(statement, index) {
        case SQLITE_INTEGER: return .int64(sqlite3_column_int64(statement, index))
        case SQLITE_FLOAT: return .double(sqlite3_column_double(statement, index))
        case SQLITE_NULL: return .null
        default:
            guard let text = sqlite3_column_text(statement, index) else { return .null }
            return .text(String(cString: text))
        }
    }

    /// A `SubscriptionStoreError` from SQLite's message (which names tables and constraints, never values).
    private func error(_ code: Int32, while action: String) -> SubscriptionStoreError {
        SQLiteFailure(
            code: code, message: String(cString: sqlite3_errmsg(handle)), systemError: sqlite3_system_errno(handle)
        )
        .error(path: path, action: action)
    }

    /// `SQLITE_TRANSIENT`: SQLite copies the bound text before the call returns.
    private static let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)

    /// Rewrites `$n` placeholders to SQLite's `?n`, leaving quoted text and identifiers alone.
    static func sqliteParameters(_ sql: String) -> String {
        let characters = Array(sql)
        var output = ""
        output.reserveCapacity(characters.count)
        var quote: Character?
        for (index, character) in characters.enumerated() {
            if let open = quote {
                if character == open { quote = nil }
                output.append(character)
            } else if character == "'" || character == "\"" {
                quote = character
                output.append(character)
            } else if character == "$", index + 1 < characters.count, characters[index + 1].isASCII,
                characters[index + 1].isNumber
            {
                output.append("?")
            } else {
                output.append(character)
            }
        }
        return output
    }
}
