import CLibPQ
import Foundation
import RenewalSQL
import RenewalStorage

/// One libpq connection (`PGconn`).
///
/// Not thread-safe by itself: `PostgresDatabase` only touches it inside its `Mutex`, which is what
/// makes the unchecked `Sendable` sound. Every statement goes through `PQexecParams` with text-format
/// parameters, so values are always bound and a statement is never more than one command.
final class PostgresConnection: SQLConnection, @unchecked Sendable {
    private let handle: OpaquePointer
    /// The URL with its password replaced, for messages.
    let redactedURL: String
    /// Set when the server went away; the next use tries one reconnect first.
    var isBroken = false
    /// Whether the last failed statement was rolled back by the server as a deadlock victim or a
    /// serialization failure (SQLSTATE class 40): running the same work again is what the server asks.
    var lastFailureRolledBack = false
    /// The worker id whose liveness lock this session holds (`PostgresDatabase.withRunLock`); taken
    /// again after a reconnect.
    var livenessOwner: String?
    /// How many times this session holds the writers' shared lock (`PostgresDatabase.withWriterLock`);
    /// taken again after a reconnect.
    var writerLocks = 0
    /// The result columns of each statement text seen, reused while the server names them the same:
    /// naming a row's columns (a dictionary of each name and its lowercase) per result cost more than
    /// reading a one-row result. Emptied when it grows past `columnNamesCapacity` (dynamic `IN` lists).
    private var columnNames: [String: SQLColumnNames] = [:]
    private static let columnNamesCapacity = 256

    /// Client-side defaults, each overridden by the URL or the matching `PG*` variable: give up
    /// connecting after 10 s, and notice a dead server or a lost network within about a minute
    /// (TCP keepalives after 30 s idle, then every 10 s, 3 misses; unacknowledged data after 30 s).
    static let clientDefaults: [(keyword: String, environment: String, value: String)] = [
        ("connect_timeout", "PGCONNECT_TIMEOUT", "10"),
        ("keepalives", "", "1"),
        ("keepalives_idle", "", "30"),
        ("keepalives_interval", "", "10"),
        ("keepalives_count", "", "3"),
        ("tcp_user_timeout", "", "30000"),
    ]

    /// Server-side defaults, set after connecting only where the session still has the server's
    /// built-in 0 (no limit), so a URL's `options=-c statement_timeout=…`, `PGOPTIONS` or a role or
    /// database setting wins: no statement runs longer than a minute, and a session idle inside a
    /// transaction (its worker frozen) is ended after two, releasing its row locks.
    static let sessionDefaults: [(setting: String, value: String)] = [
        ("statement_timeout", "60s"),
        ("idle_in_transaction_session_timeout", "120s"),
    ]

    /// Connects with `url` as given (libpq applies `PG*` variables, `.pgpass`, `sslmode` and every
    /// other URL parameter), plus `fallback_application_name=renewal` and the `clientDefaults` and
    /// `sessionDefaults` the URL does not override.
    ///
    /// - Throws: `SubscriptionStoreError.unavailable` naming the redacted URL and libpq's reason.
    init(url: String) throws {
        let redacted = PostgresURL.redacted(url)
        let password = try PostgresURL.validate(url)
        var keywords = ["fallback_application_name"]
        var values = ["renewal"]
        let environment = ProcessInfo.processInfo.environment
        for option in Self.clientDefaults where option.environment.isEmpty || environment[option.environment] == nil {
            keywords.append(option.keyword)
            values.append(option.value)
        }
        // Last, so the URL's own parameters override the two defaults above.
        keywords.append("dbname")
        values.append(url)
        let connection = withArrayOfCStrings(keywords) { keywords in
            withArrayOfCStrings(values) { values in PQconnectdbParams(keywords, values, 1) }
        }
        guard let connection else {
            throw SubscriptionStoreError.unavailable("cannot connect to PostgreSQL at \(redacted): out of memory")
        }
        guard PQstatus(connection) == CONNECTION_OK else {
            let reason = PostgresURL.scrub(Self.message(PQerrorMessage(connection)), password: password)
            PQfinish(connection)
            throw SubscriptionStoreError.unavailable("cannot connect to PostgreSQL at \(redacted): \(reason)")
        }
        PQsetNoticeProcessor(connection, { _, _ in }, nil)
        self.handle = connection
        self.redactedURL = redacted
        try applySessionDefaults()
    }

    /// Sets each of `sessionDefaults` the session leaves unlimited.
    private func applySessionDefaults() throws {
        for option in Self.sessionDefaults {
            let current = try execute("SELECT current_setting($1) AS value", [.text(option.setting)])
            guard case .text("0")? = current.first?["value"] else { continue }
            _ = try execute("SELECT set_config($1, $2, false)", [.text(option.setting), .text(option.value)])
        }
    }

    deinit {
        PQfinish(handle)
    }

    func execute(_ sql: String, _ binds: [SQLValue]) throws -> [SQLRow] {
        let texts = try binds.enumerated().map { index, value in try Self.text(of: value, parameter: index + 1) }
        let result = withArrayOfOptionalCStrings(texts) { values in
            PQexecParams(handle, sql, Int32(texts.count), nil, values, nil, nil, 0)
        }
        guard let result else { throw lostOrFailed(nil, binds: binds) }
        defer { PQclear(result) }
        switch PQresultStatus(result) {
        case PGRES_COMMAND_OK, PGRES_EMPTY_QUERY:
            return []
        case PGRES_TUPLES_OK:
            guard PQntuples(result) > 0 else { return [] }
            return Self.rows(of: result, named: resultColumns(of: result, sql: sql))
        default:
            throw lostOrFailed(result, binds: binds)
        }
    }

    var bulkLoads: Bool { true }

    /// `COPY table (columns) FROM STDIN` in text format, the rows sent in chunks of about a megabyte.
    func copy(into table: String, columns: [String], rows: [[String?]]) throws {
        let started = PQexec(handle, "COPY \(table) (\(columns.joined(separator: ", "))) FROM STDIN")
        guard let started else { throw lostOrFailed(nil, binds: []) }
        guard PQresultStatus(started) == PGRES_COPY_IN else {
            defer { PQclear(started) }
            throw lostOrFailed(started, binds: [])
        }
        PQclear(started)
        var chunk: [UInt8] = []
        chunk.reserveCapacity(1 << 20 + 64 << 10)
        func send() throws {
            guard !chunk.isEmpty else { return }
            let sent = chunk.withUnsafeBufferPointer { buffer in
                buffer.withMemoryRebound(to: CChar.self) { PQputCopyData(handle, $0.baseAddress, Int32($0.count)) }
            }
            chunk.removeAll(keepingCapacity: true)
            guard sent == 1 else { throw lostConnection(detail: Self.message(PQerrorMessage(handle))) }
        }
        var failure: (any Error)?
        do {
            for row in rows {
                for (index, value) in row.enumerated() {
                    if index > 0 { chunk.append(0x09) }
                    if let value { Self.appendCopyText(value, to: &chunk) } else { chunk += [0x5C, 0x4E] }  // \N
                }
                chunk.append(0x0A)
                if chunk.count >= 1 << 20 { try send() }
            }
            try send()
        } catch {
            failure = error
        }
        // Ending with an error message aborts the COPY, so nothing of a half-sent load stays.
        let ended = failure == nil ? PQputCopyEnd(handle, nil) : PQputCopyEnd(handle, "renewal: load aborted")
        var error: SubscriptionStoreError?
        while let result = PQgetResult(handle) {
            if PQresultStatus(result) != PGRES_COMMAND_OK, error == nil { error = lostOrFailed(result, binds: []) }
            PQclear(result)
        }
        if let failure { throw failure }
        guard ended == 1 else { throw lostConnection(detail: Self.message(PQerrorMessage(handle))) }
        if let error { throw error }
    }

    /// A value's UTF-8 in COPY's text format: backslash, tab, newline and carriage return escaped.
    /// The bytes between escapes are appended a run at a time: a receipt has none, and appending
    /// it byte by byte took half the import's CPU.
    private static func appendCopyText(_ value: String, to chunk: inout [UInt8]) {
        var value = value
        value.withUTF8 { bytes in
            var runStart = 0
            for index in bytes.indices {
                let escaped: UInt8
                switch bytes[index] {
                case 0x5C: escaped = 0x5C  // \\
                case 0x09: escaped = 0x74  // \t
                case 0x0A: escaped = 0x6E  // \n
                case 0x0D: escaped = 0x72  // \r
                default: continue
                }
                chunk.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[runStart..<index]))
                chunk.append(0x5C)
                chunk.append(escaped)
                runStart = index + 1
            }
            chunk.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[runStart...]))
        }
    }

    func beginTransaction() throws {
        _ = try execute("BEGIN", [])
    }

    func commitTransaction() throws {
        _ = try execute("COMMIT", [])
    }

    func rollbackTransaction() throws {
        guard PQtransactionStatus(handle) != PQTRANS_IDLE, PQstatus(handle) == CONNECTION_OK else { return }
        _ = try execute("ROLLBACK", [])
    }

    var isInTransaction: Bool {
        let status = PQtransactionStatus(handle)
        return status == PQTRANS_INTRANS || status == PQTRANS_INERROR || status == PQTRANS_ACTIVE
    }

    /// Re-establishes a broken connection with the same parameters; a no-op when it is fine.
    func reconnectIfBroken() throws {
        guard isBroken || PQstatus(handle) != CONNECTION_OK else { return }
        PQreset(handle)
        guard PQstatus(handle) == CONNECTION_OK else {
            throw lostConnection(detail: Self.message(PQerrorMessage(handle)))
        }
        PQsetNoticeProcessor(handle, { _, _ in }, nil)
        isBroken = false
        try applySessionDefaults()
        try takeBackWriterLocks()
        try takeBackLiveness()
    }

    // MARK: - Errors

    /// The error for a failed statement: a lost connection, or the server's message with its
    /// SQLSTATE (never its DETAIL, which quotes row values, and never a bound value).
    private func lostOrFailed(_ result: OpaquePointer?, binds: [SQLValue]) -> SubscriptionStoreError {
        let state = result.flatMap { PQresultErrorField($0, Int32(UInt8(ascii: "C"))) }.map { String(cString: $0) }
        if PQstatus(handle) != CONNECTION_OK || state.map(Self.meansConnectionLost) == true {
            isBroken = true
            let detail = result.flatMap { PQresultErrorField($0, Int32(UInt8(ascii: "M"))) }.map { String(cString: $0) }
            return lostConnection(detail: detail ?? Self.message(PQerrorMessage(handle)))
        }
        lastFailureRolledBack = state?.hasPrefix("40") == true
        var message =
            result.flatMap { PQresultErrorField($0, Int32(UInt8(ascii: "M"))) }.map { String(cString: $0) }
            ?? Self.message(PQerrorMessage(handle))
        if state?.hasPrefix("22") == true, let colon = message.range(of: ": ") {
            // Data exceptions quote the offending input after a colon
            // ("invalid input syntax for type bigint: \"…\"").
            message = String(message[..<colon.lowerBound])
        }
        for case .text(let value) in binds where value.count >= 4 {
            message = message.replacingOccurrences(of: value, with: "…")
        }
        let code = state.map { " \($0)" } ?? ""
        switch state?.prefix(2) {
        case "53", "57", "58":
            // Resources, operator intervention (statement_timeout is 57014), system errors: the server's doing.
            return .unavailable("PostgreSQL at \(redactedURL): error\(code): \(message)")
        default:
            return .query("PostgreSQL error\(code): \(message)")
        }
    }

    func lostConnection(detail: String) -> SubscriptionStoreError {
        .unavailable(
            """
            Lost the connection to PostgreSQL at \(redactedURL) (\(detail)); the rows this worker leased are \
            taken back by the next worker that finds it dead
            """
        )
    }

    /// Connection exceptions (08…) and the server shutting this session down (57P01–57P03).
    private static func meansConnectionLost(_ state: String) -> Bool {
        state.hasPrefix("08") || ["57P01", "57P02", "57P03"].contains(state)
    }

    /// libpq's message, trimmed of its trailing newline.
    static func message(_ text: UnsafePointer<CChar>?) -> String {
        guard let text else { return "unknown error" }
        let message = String(cString: text).trimmingCharacters(in: .whitespacesAndNewlines)
        return message.isEmpty ? "unknown error" : message
    }

    // MARK: - Values

    /// The text form of a parameter; nil for SQL NULL.
    private static func text(of value: SQLValue, parameter: Int) throws -> String? {
        switch value {
        case .null: return nil
        case .int64(let value): return String(value)
        case .double(let value):
            if value.isNaN { return "NaN" }
            if value.isInfinite { return value < 0 ? "-Infinity" : "Infinity" }
            return "\(value)"
        case .text(let value):
            guard !value.utf8.contains(0) else {
                throw SubscriptionStoreError.query(
                    "parameter $\(parameter) holds a NUL character, which PostgreSQL text cannot store")
            }
            return value
        }
    }

    /// The result's columns, from `columnNames` when the server names them as before.
    private func resultColumns(of result: OpaquePointer, sql: String) -> SQLColumnNames {
        let count = Int(PQnfields(result))
        if let cached = columnNames[sql], cached.names.count == count,
            cached.names.indices.allSatisfy({ index in
                guard let name = PQfname(result, Int32(index)) else { return false }
                return cached.names[index].withCString { strcmp($0, name) == 0 }
            })
        {
            return cached
        }
        let names = SQLColumnNames(
            (0..<Int32(count)).map { column in PQfname(result, column).map { String(cString: $0) } ?? "?column?" })
        if columnNames.count >= Self.columnNamesCapacity { columnNames.removeAll(keepingCapacity: true) }
        columnNames[sql] = names
        return names
    }

    private static func rows(of result: OpaquePointer, named columns: SQLColumnNames) -> [SQLRow] {
        let columnCount = PQnfields(result)
        let rowCount = PQntuples(result)
        let types = (0..<columnCount).map { PQftype(result, $0) }
        return (0..<rowCount).map { row in
            let values = (0..<columnCount).map { column -> SQLValue in
                guard PQgetisnull(result, row, column) == 0, let raw = PQgetvalue(result, row, column) else {
                    return .null
                }
                return PostgresType.value(String(cString: raw), oid: types[Int(column)])
            }
            return SQLRow(names: columns, values: values)
        }
    }
}

/// Maps a text-format result value to `SQLValue` by its column type.
enum PostgresType {
    static let bool: Oid = 16
    static let int8: Oid = 20
    static let int2: Oid = 21
    static let int4: Oid = 23
    static let oid: Oid = 26
    static let float4: Oid = 700
    static let float8: Oid = 701
    static let numeric: Oid = 1700

    static func value(_ text: String, oid type: Oid) -> SQLValue {
        switch type {
        case int8, int2, int4, oid:
            return Int64(text).map(SQLValue.int64) ?? .text(text)
        case float4, float8:
            return Double(text).map(SQLValue.double) ?? .text(text)
        case numeric:
            // SUM over BIGINT is numeric: keep whole numbers integral.
            if let integer = Int64(text) { return .int64(integer) }
            return Double(text).map(SQLValue.double) ?? .text(text)
        case bool:
            return .int64(text == "t" ? 1 : 0)
        default:
            return .text(text)
        }
    }
}

/// Calls `body` with a NULL-terminated C array of the strings, valid only during the call.
func withArrayOfCStrings<R>(_ strings: [String], _ body: (UnsafePointer<UnsafePointer<CChar>?>) -> R) -> R {
    withArrayOfOptionalCStrings(strings.map(Optional.some)) { body($0) }
}

/// Calls `body` with a C array of the strings (nil entries stay NULL) followed by a NULL terminator.
func withArrayOfOptionalCStrings<R>(_ strings: [String?], _ body: (UnsafePointer<UnsafePointer<CChar>?>) -> R) -> R {
    let duplicates: [UnsafeMutablePointer<CChar>?] = strings.map { $0.flatMap { strdup($0) } }
    defer { duplicates.forEach { free($0) } }
    let pointers: [UnsafePointer<CChar>?] = duplicates.map { $0.map { UnsafePointer($0) } } + [nil]
    return body(pointers)
}
