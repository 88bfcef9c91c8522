import Foundation
import RenewalCore
import RenewalStorage

/// The correction of a window off UTC midnights (`OffUnitWindow`, schema 31's indexes).
extension SQLSubscriptionStore {
    /// The subscriptions to correct are listed into a temporary table on one connection (a day's activity:
    /// hundreds of thousands at ten million), then read back `pageSize` at a time in id order with their
    /// ledgers, so the process holds one page of ids and ledgers, not the whole list.
    public func analyticsCorrection(_ query: SummaryQuery, pageSize: Int) async throws -> (
        rows: AnalyticsSummary, subscriptions: Int
    ) {
        guard let window = query.offUnit, !window.parts.isEmpty else { return (AnalyticsSummary(), 0) }
        let (dated, binds) = Self.subscriptions(datedIn: window.parts)
        let table = Self.correctedTable
        let page = max(pageSize, 1)
        return try await onConnection { connection in
            // A table left by a read that failed on this connection before is replaced.
            _ = try connection.execute("DROP TABLE IF EXISTS \(table)", [])
            _ = try connection.execute(
                "CREATE TEMPORARY TABLE \(table) (original_transaction_id TEXT PRIMARY KEY)", [])
            defer { _ = try? connection.execute("DROP TABLE IF EXISTS \(table)", []) }
            _ = try connection.execute("INSERT INTO \(table) (original_transaction_id) \(dated)", binds)
            var correction = AnalyticsSummary()
            var count = 0
            var last: String?
            repeat {
                let after = last.map { _ in "WHERE original_transaction_id > $1 " } ?? ""
                let ids = try connection.execute(
                    "SELECT original_transaction_id FROM \(table) \(after)ORDER BY original_transaction_id LIMIT \(page)",
                    last.map { [.text($0)] } ?? []
                ).map { try $0.text("original_transaction_id") }
                for ledger in try LedgerSQL.ledgers(of: ids, on: connection) {
                    correction.add(query.correction(of: ledger))
                }
                count += ids.count
                last = ids.count == page ? ids.last : nil
            } while last != nil
            return (correction, count)
        }
    }

    /// The temporary table of one correction's subscriptions (per connection).
    static var correctedTable: String { "analytics_corrected_subscriptions" }

    /// A statement listing the original transaction ids of the subscriptions with a date in one of `parts`
    /// (closed ranges), each once: a transaction's purchase, expiry, revocation or seat refund, or a fact's
    /// start, end or statement, the dates `SubscriptionLedger.dates` lists. Index range reads.
    static func subscriptions(datedIn parts: [ClosedRange<Date>]) -> (sql: String, binds: [SQLValue]) {
        var binds = SQLBinds()
        var reads: [String] = []
        for part in parts {
            let from = binds.add(.int64(Int64((part.lowerBound.timeIntervalSince1970 * 1000).rounded(.down))))
            let to = binds.add(.int64(Int64((part.upperBound.timeIntervalSince1970 * 1000).rounded(.up))))
            for (table, column) in datedColumns {
                reads.append("SELECT original_transaction_id FROM \(table) WHERE \(column) BETWEEN \(from) AND \(to)")
            }
        }
        return (reads.joined(separator: "\nUNION\n"), binds.values)
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
