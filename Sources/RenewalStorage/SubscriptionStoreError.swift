/// The storage module's one error type. Descriptions name the problem and the fix; they never
/// contain receipts or passwords.
public enum SubscriptionStoreError: Error, Sendable, CustomStringConvertible {
    /// The database cannot be opened or reached.
    case unavailable(String)
    /// The schema is missing or older than this build.
    case notMigrated(found: Int, expected: Int)
    /// The schema is newer than this build.
    case schemaTooNew(found: Int, expected: Int)
    /// Another run holds the lock.
    case locked(String)
    /// `renewal copy-database` is copying this database (`detail` says which process): a command that
    /// writes is refused before it writes anything, so no row lands behind the copy's back.
    case copying(String)
    /// Another process holds a write transaction on the database longer than the busy timeout.
    case busy(String)
    /// A statement failed.
    case query(String)
    /// A stored value cannot be read back.
    case corruptRow(String)
    /// The row's lease passed to another worker (this one was slower than its lease, or was
    /// presumed dead): nothing of this result was written.
    case leaseLost(receiptID: Int64)

    public var description: String {
        switch self {
        case .unavailable(let detail): return "Database unavailable: \(detail)"
        case .notMigrated(let found, let expected):
            return "Database schema is at version \(found), this build needs \(expected). Run `renewal migrate` first."
        case .schemaTooNew(let found, let expected):
            return "Database schema is at version \(found), newer than this build's \(expected). Upgrade renewal."
        case .locked(let detail): return "Another renewal run holds the lock (\(detail)). Try again when it ends."
        case .copying(let detail):
            return
                """
                renewal copy-database is copying this database (\(detail)); nothing was written. Try again when \
                the copy has ended (and point renewal at the copy if the database has moved).
                """
        case .busy(let detail): return "Database busy: \(detail)"
        case .query(let detail): return "Database error: \(detail)"
        case .corruptRow(let detail): return "Unreadable stored row: \(detail)"
        case .leaseLost(let receiptID):
            return
                """
                The lease on receipt \(receiptID) passed to another worker; this worker's result for it was not \
                written.
                """
        }
    }
}
