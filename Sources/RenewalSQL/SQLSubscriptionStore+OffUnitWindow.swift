import Dispatch
import Foundation
import RenewalCore
import RenewalStorage
import Synchronization

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
            let readPage = { () throws -> [SubscriptionLedger]? in
                let after = last.map { _ in "WHERE original_transaction_id > $1 " } ?? ""
                let ids = try connection.execute(
                    "SELECT original_transaction_id FROM \(table) \(after)ORDER BY original_transaction_id LIMIT \(page)",
                    last.map { [.text($0)] } ?? []
                ).map { try $0.text("original_transaction_id") }
                guard !ids.isEmpty else { return nil }
                count += ids.count
                last = ids.last
                return try LedgerSQL.ledgers(of: ids, on: connection)
            }
            var ledgers = try readPage()
            while let current = ledgers {
                // The next page is read while this one's corrections are worked out on the other cores.
                let corrected = try Self.summed(current, whileRunning: readPage) { sum, ledger in
                    sum.addCorrection(of: ledger, for: query)
                }
                for part in corrected.parts { correction.add(part.counts) }
                ledgers = corrected.next
            }
            return (correction, count)
        }
    }

    /// What `add` adds for each of `ledgers` (its rows, its correction), summed in `count` parts (eight
    /// unless said, so the cores stay busy however long the read takes) worked out beside `other` (the next
    /// page's read) on the machine's cores; returns the parts' sums, for the caller to add where it keeps
    /// its total, and what `other` gave, or throws what it threw. Exact whatever the order: sums of
    /// integers per key.
    static func summed<Next: Sendable>(
        _ ledgers: [SubscriptionLedger], parts count: Int = 8, whileRunning other: @escaping () throws -> Next,
        _ add: @Sendable (inout AnalyticsSummary, SubscriptionLedger) -> Void
    ) throws -> (parts: [AnalyticsSummary], next: Next) {
        let part = max((ledgers.count + count - 1) / max(count, 1), 1)
        let parts = stride(from: 0, to: ledgers.count, by: part).map { ledgers[$0..<min($0 + part, ledgers.count)] }
        let sums = Mutex<[AnalyticsSummary]>([])
        let next = Mutex<Result<Next, any Error>?>(nil)
        let read = OneThreadCall(other)
        DispatchQueue.concurrentPerform(iterations: parts.count + 1) { index in
            guard index > 0 else {
                let result = Result { try read.call() }
                next.withLock { $0 = result }
                return
            }
            var sum = AnalyticsSummary()
            for ledger in parts[index - 1] { add(&sum, ledger) }
            sums.withLock { $0.append(sum) }
        }
        guard let result = next.withLock({ $0 }) else { throw CancellationError() }
        return (sums.withLock { $0 }, try result.get())
    }

    public func analyticsDatedRows(in part: PartDay) async throws -> Int {
        let from = part.milliseconds.lowerBound
        let to = part.milliseconds.upperBound
        // Two index range counts: purchases and expiries are nearly all of a day's dates.
        let sql = """
            SELECT (SELECT COUNT(*) FROM transactions WHERE purchased_at BETWEEN $1 AND $2)
                + (SELECT COUNT(*) FROM transactions WHERE expires_at BETWEEN $1 AND $2) AS n
            """
        let rows = try await onConnection { connection in try connection.execute(sql, [.int64(from), .int64(to)]) }
        return Int(try rows.first?.int64("n") ?? 0)
    }

    /// The temporary table of one correction's subscriptions (per connection).
    static var correctedTable: String { "analytics_corrected_subscriptions" }

    /// A statement listing the original transaction ids of the subscriptions with a date in one of `parts`
    /// (their whole milliseconds), each once: a transaction's purchase, expiry, revocation or seat refund,
    /// or a fact's start, end or statement, the dates `SubscriptionLedger.dates` lists. Index range reads.
    static func subscriptions(datedIn parts: [PartDay]) -> (sql: String, binds: [SQLValue]) {
        var binds = SQLBinds()
        var reads: [String] = []
        for part in parts {
            let from = binds.add(.int64(part.milliseconds.lowerBound))
            let to = binds.add(.int64(part.milliseconds.upperBound))
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

/// A call run on one thread of `DispatchQueue.concurrentPerform` while the thread that made it waits for
/// every iteration: whatever it captures (a connection, the page's cursor) is used by one thread at a time.
private final class OneThreadCall<Value>: @unchecked Sendable {
    let call: () throws -> Value

    init(_ call: @escaping () throws -> Value) { self.call = call }
}
