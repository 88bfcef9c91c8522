import Foundation

/// Why a copy was refused or stopped. Messages name the table and the fix; they never hold a value.
public enum DatabaseCopyError: Error, Sendable, CustomStringConvertible {
    /// The source's schema is not this build's.
    case sourceSchema(found: Int, expected: Int)
    /// The target already holds rows in `table`.
    case targetNotEmpty(table: String)
    /// The source holds a table this build does not know how to copy.
    case unknownTable(String)
    /// The two databases' columns of `table` differ.
    case columnsDiffer(table: String)
    /// The transaction on `side` ("source" or "target") was lost with its session.
    case transactionLost(side: String)
    /// The target holds another number of rows than were copied into it.
    case countMismatch(table: String, copied: Int, found: Int)
    /// Reading or writing `table` failed for `reason` (the database's message, which holds no value).
    case tableFailed(table: String, reason: String)

    public var description: String {
        switch self {
        case .sourceSchema(let found, let expected) where found < expected:
            return
                "the source database is at schema version \(found), this build copies version \(expected): run `renewal migrate` on the source first"
        case .sourceSchema(let found, let expected):
            return
                "the source database is at schema version \(found), newer than this build's \(expected): copy it with the renewal that migrated it"
        case .targetNotEmpty(let table):
            return
                "the target database already holds rows in \(table); copy-database only copies into an empty database: give a new database (or schema), or drop the target's tables and try again"
        case .unknownTable(let table):
            return "the source database holds a table this build does not copy (\(table)); nothing was copied"
        case .columnsDiffer(let table):
            return "the source and target databases have different columns in \(table); run `renewal migrate` on both"
        case .transactionLost(let side):
            return
                "the connection to the \(side) database was lost during the copy; nothing was committed to the target: run copy-database again"
        case .tableFailed(let table, let reason):
            return
                "copying \(table) failed (\(reason)); nothing was committed to the target: fix the cause and run copy-database again"
        case .countMismatch(let table, let copied, let found):
            return
                "the target holds \(found) rows in \(table) after copying \(copied); nothing was committed: run copy-database again"
        }
    }

    /// Whether the error is the operator's to fix before running the copy again (a configuration
    /// error, exit 78), rather than a failure on the way (exit 1).
    public var isConfiguration: Bool {
        switch self {
        case .sourceSchema, .targetNotEmpty, .unknownTable, .columnsDiffer: return true
        case .transactionLost, .countMismatch, .tableFailed: return false
        }
    }
}
