import Foundation
import RenewalCore
import RenewalStorage

/// The subscriptions a window off UTC midnights corrects (`OffUnitWindow`, schema 31's indexes).
extension SQLSubscriptionStore {
    /// The original transaction ids of the subscriptions with a date in one of `parts` (closed ranges): a
    /// transaction's purchase, expiry, revocation or seat refund, or a fact's start, end or statement, the
    /// dates `SubscriptionLedger.dates` lists. One statement of index range reads, distinct and sorted.
    public func analyticsSubscriptions(datedIn parts: [ClosedRange<Date>]) async throws -> [String] {
        guard !parts.isEmpty else { return [] }
        var binds = SQLBinds()
        var reads: [String] = []
        for part in parts {
            let from = binds.add(.int64(Int64((part.lowerBound.timeIntervalSince1970 * 1000).rounded(.down))))
            let to = binds.add(.int64(Int64((part.upperBound.timeIntervalSince1970 * 1000).rounded(.up))))
            for (table, column) in Self.datedColumns {
                reads.append("SELECT original_transaction_id FROM \(table) WHERE \(column) BETWEEN \(from) AND \(to)")
            }
        }
        let sql = reads.joined(separator: "\nUNION\n") + "\nORDER BY 1"
        let rows = try await onConnection { connection in try connection.execute(sql, binds.values) }
        return try rows.map { try $0.text("original_transaction_id") }
    }

    /// Each column a ledger's dates come from, by table.
    static var datedColumns: [(String, String)] {
        [
            ("transactions", "purchased_at"), ("transactions", "expires_at"), ("transactions", "revoked_at"),
            ("transactions", "seats_revoked_at"), ("subscription_facts", "starts_at"),
            ("subscription_facts", "ends_at"), ("subscription_facts", "stated_at"),
        ]
    }
}
