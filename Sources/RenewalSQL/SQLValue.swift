import Foundation
import RenewalCore
import RenewalStorage

/// A value bound to a statement or read from a row. Times are Unix epoch milliseconds (`int64`),
/// booleans are `int64` 0/1.
public enum SQLValue: Sendable, Hashable {
    /// SQL `NULL`.
    case null
    /// An integer: ids, counters, epoch milliseconds, 0/1 booleans.
    case int64(Int64)
    /// A floating-point number (not used by the schema; read back for completeness).
    case double(Double)
    /// A string.
    case text(String)
}

extension SQLValue {
    /// `text`, or `null` for nil.
    public init(_ value: String?) {
        self = value.map { .text($0) } ?? .null
    }

    /// `int64`, or `null` for nil.
    public init(_ value: Int64?) {
        self = value.map { .int64($0) } ?? .null
    }

    /// `int64`, or `null` for nil.
    public init(_ value: Int?) {
        self = value.map { .int64(Int64($0)) } ?? .null
    }

    /// Unix epoch milliseconds, or `null` for nil.
    public init(_ value: Date?) {
        self = value.map { .int64(AppleDateFormat.milliseconds($0)) } ?? .null
    }

    /// 1 or 0, or `null` for nil.
    public init(_ value: Bool?) {
        self = value.map { .int64($0 ? 1 : 0) } ?? .null
    }
}

/// The column names of one statement's result, with where each is: built once per result and shared
/// by its rows, so reading a row's column by name is a dictionary lookup, not a walk over the names.
public final class SQLColumnNames: Sendable, Hashable {
    public let names: [String]
    /// The first position of each name as the statement spelled it, and lowercased.
    private let positions: [String: Int]

    public init(_ names: [String]) {
        self.names = names
        var positions: [String: Int] = [:]
        for (index, name) in names.enumerated() {
            if positions[name] == nil { positions[name] = index }
            let lowered = name.lowercased()
            if positions[lowered] == nil { positions[lowered] = index }
        }
        self.positions = positions
    }

    /// The position of the column named `name` (case-insensitive).
    func position(of name: String) -> Int? {
        positions[name] ?? positions[name.lowercased()]
    }

    public static func == (lhs: SQLColumnNames, rhs: SQLColumnNames) -> Bool { lhs.names == rhs.names }

    public func hash(into hasher: inout Hasher) { hasher.combine(names) }
}

/// One result row: column names (shared by every row of a statement) and values.
public struct SQLRow: Sendable, Hashable {
    public let names: SQLColumnNames
    /// One value per column, in the same order.
    public var values: [SQLValue]

    /// Column names, as the statement named them.
    public var columns: [String] { names.names }

    public init(names: SQLColumnNames, values: [SQLValue]) {
        self.names = names
        self.values = values
    }

    public init(columns: [String], values: [SQLValue]) {
        self.init(names: SQLColumnNames(columns), values: values)
    }

    /// The value of the column named `name` (case-insensitive), or nil when there is no such column.
    public subscript(_ name: String) -> SQLValue? {
        names.position(of: name).map { values[$0] }
    }
}

/// How a typed read names its column: by name (a `String`, looked up in each row), or as a `SQLColumn`
/// found once for every row of a result.
protocol SQLColumnReference {
    /// The name an error gives.
    var columnName: String { get }
    /// The column's value in `row`, or nil when it has no such column.
    func value(in row: SQLRow) -> SQLValue?
}

extension String: SQLColumnReference {
    var columnName: String { self }

    func value(in row: SQLRow) -> SQLValue? { row[self] }
}

/// A column of one result, its position found once by name (`SQLColumnNames.column(_:)`): a loop over
/// many rows (a page of ledgers) reads each row's column by position instead of hashing its name. A
/// plain value (no reference counted): whoever holds it keeps the result's names alive (`LedgerColumns`).
struct SQLColumn: SQLColumnReference {
    let name: StaticString
    /// The names object of the result the position was found in, and the position (nil: no such column).
    let result: ObjectIdentifier
    let position: Int?

    var columnName: String { name.description }

    /// By position in a row of the same result, else by name.
    func value(in row: SQLRow) -> SQLValue? {
        guard ObjectIdentifier(row.names) == result else { return row[columnName] }
        return position.map { row.values[$0] }
    }
}

extension SQLColumnNames {
    /// The column named `name` (case-insensitive) of the rows these names describe.
    func column(_ name: StaticString) -> SQLColumn {
        SQLColumn(name: name, result: ObjectIdentifier(self), position: position(of: name.description))
    }
}

// MARK: - Typed reads that throw `corruptRow` instead of trapping.

extension SQLRow {
    func value(_ column: some SQLColumnReference) throws -> SQLValue {
        guard let value = column.value(in: self) else {
            throw SubscriptionStoreError.corruptRow("column \(column.columnName) is missing")
        }
        return value
    }

    func optionalInt64(_ name: some SQLColumnReference) throws -> Int64? {
        switch try value(name) {
        case .null: return nil
        case .int64(let value): return value
        case .double(let value):
            guard let exact = Int64(exactly: value) else { break }
            return exact
        case .text(let text):
            guard let parsed = Int64(text) else { break }
            return parsed
        }
        throw SubscriptionStoreError.corruptRow("column \(name.columnName) is not an integer")
    }

    func int64(_ name: some SQLColumnReference) throws -> Int64 {
        guard let value = try optionalInt64(name) else {
            throw SubscriptionStoreError.corruptRow("column \(name.columnName) is null")
        }
        return value
    }

    func int(_ name: some SQLColumnReference) throws -> Int {
        guard let value = Int(exactly: try int64(name)) else {
            throw SubscriptionStoreError.corruptRow("column \(name.columnName) is out of range")
        }
        return value
    }

    func optionalInt(_ name: some SQLColumnReference) throws -> Int? {
        guard let value = try optionalInt64(name) else { return nil }
        guard let exact = Int(exactly: value) else {
            throw SubscriptionStoreError.corruptRow("column \(name.columnName) is out of range")
        }
        return exact
    }

    func optionalText(_ name: some SQLColumnReference) throws -> String? {
        switch try value(name) {
        case .null: return nil
        case .text(let text): return text
        case .int64(let value): return String(value)
        case .double(let value): return String(value)
        }
    }

    func text(_ name: some SQLColumnReference) throws -> String {
        guard let value = try optionalText(name) else {
            throw SubscriptionStoreError.corruptRow("column \(name.columnName) is null")
        }
        return value
    }

    func optionalDate(_ name: some SQLColumnReference) throws -> Date? {
        try optionalInt64(name).map { AppleDateFormat.date(milliseconds: $0) }
    }

    func date(_ name: some SQLColumnReference) throws -> Date {
        AppleDateFormat.date(milliseconds: try int64(name))
    }

    func optionalBool(_ name: some SQLColumnReference) throws -> Bool? {
        switch try optionalInt64(name) {
        case nil: return nil
        case 0?: return false
        case 1?: return true
        case .some: throw SubscriptionStoreError.corruptRow("column \(name.columnName) is not 0 or 1")
        }
    }

    func bool(_ name: some SQLColumnReference) throws -> Bool {
        guard let value = try optionalBool(name) else {
            throw SubscriptionStoreError.corruptRow("column \(name.columnName) is null")
        }
        return value
    }

    func environment(_ name: some SQLColumnReference) throws -> AppStoreEnvironment? {
        try optionalText(name).map { AppStoreEnvironment(rawValue: $0) }
    }

    /// The `state` of a status or held-subscription row: a subscription's own, or, for a receipt without
    /// subscriptions (`receipt_status` set), the one Core shows for its status.
    func shownState() throws -> SubscriptionState {
        guard let raw = try optionalText("receipt_status") else { return try state("state") }
        guard let status = ReceiptStatus(rawValue: raw) else {
            throw SubscriptionStoreError.corruptRow("receipts.status holds an unknown status")
        }
        return status.shownWithoutSubscriptions(noSubscriptionSince: try optionalDate("no_subscription_since"))
    }

    func state(_ name: String) throws -> SubscriptionState {
        let raw = try text(name)
        guard let state = SubscriptionState(rawValue: raw) else {
            throw SubscriptionStoreError.corruptRow("column \(name) holds an unknown state")
        }
        return state
    }
}

/// Builds a statement's bind list while handing out its `$n` placeholders, so values are never
/// spliced into SQL text.
struct SQLBinds {
    private(set) var values: [SQLValue] = []

    /// Binds `value` and returns its placeholder.
    mutating func add(_ value: SQLValue) -> String {
        values.append(value)
        return "$\(values.count)"
    }

    /// Binds each value and returns the comma-separated placeholders (for `IN (…)`).
    mutating func list(_ values: [SQLValue]) -> String {
        values.map { add($0) }.joined(separator: ", ")
    }
}

/// A statement with its binds.
struct SQLStatement {
    var sql: String
    var binds: [SQLValue]
}

extension SQLConnection {
    /// Inserts `rows` (each one value per column, in `columns`' order) into `table`, up to `perStatement`
    /// rows a statement: one round trip per chunk instead of per row. Keep `perStatement × columns` under
    /// SQLite's 32,766 binds.
    func insert(_ rows: [[SQLValue]], into table: String, columns: [String], perStatement: Int) throws {
        for chunk in rows.chunked(by: perStatement) where !chunk.isEmpty {
            var binds = SQLBinds()
            let values = chunk.map { "(" + binds.list($0) + ")" }.joined(separator: ", ")
            _ = try execute(
                "INSERT INTO \(table) (\(columns.joined(separator: ", "))) VALUES \(values)", binds.values)
        }
    }
}
