import Foundation
import RenewalCore
import RenewalStorage

extension SQLSubscriptionStore {
    /// Records the facts an update adds (`SubscriptionFact.added`), in the transaction that writes it and
    /// before its rows are overwritten: each subscription this receipt writes against its stored row, each
    /// ledger transaction against the ledger's row of it. A `fresh` subscription (`FreshLedger`) has
    /// neither, so nothing of it is read. Returns the facts it recorded.
    @discardableResult
    static func recordFacts(
        of write: ReceiptUpdate, fresh: Set<String> = [], on connection: any SQLConnection
    ) throws -> [SubscriptionFact] {
        let facts = try addedFacts(of: write, fresh: fresh, on: connection)
        try insert(facts, runID: write.runID, recordedAt: write.checkedAt, on: connection)
        return facts
    }

    /// The facts `recordFacts` records, not written yet.
    static func addedFacts(
        of write: ReceiptUpdate, fresh: Set<String> = [], on connection: any SQLConnection
    ) throws -> [SubscriptionFact] {
        try subscriptionFacts(of: write, fresh: fresh, on: connection)
            + transactionFacts(write.transactions, unrecorded: fresh, now: write.checkedAt, on: connection)
    }

    /// The facts the update's subscriptions add over their stored rows.
    static func subscriptionFacts(
        of write: ReceiptUpdate, fresh: Set<String>, on connection: any SQLConnection
    ) throws -> [SubscriptionFact] {
        guard !write.subscriptions.isEmpty else { return [] }
        var facts: [SubscriptionFact] = []
        let stored = try storedSubscriptions(
            write.subscriptions.map(\.snapshot.originalTransactionID).filter { !fresh.contains($0) }, on: connection)
        for subscription in write.subscriptions {
            let id = subscription.snapshot.originalTransactionID
            let previous = stored[id]
            // A row another receipt owns is not written, so what this answer says of it is not recorded.
            guard previous.map({ $0.receiptID == write.receiptID }) ?? true else { continue }
            let before = previous?.snapshot.state == .unverified ? nil : previous?.snapshot
            facts += SubscriptionFact.added(
                by: subscription.snapshot, previous: before, now: write.checkedAt,
                statedAt: subscription.appleSignedAt)
        }
        return facts
    }

    /// The facts new versions of ledger transactions add over the ledger's rows of them; the ledger holds
    /// nothing of the subscriptions `unrecorded` names, so their transactions are not looked up, and the
    /// rows of the subscriptions `read` holds were read already (by the summaries' upkeep, before the
    /// write), so they are not read again.
    static func transactionFacts(
        _ transactions: [LedgerTransaction], unrecorded: Set<String> = [], read: LedgersRead = LedgersRead(),
        now: Date, on connection: any SQLConnection
    ) throws -> [SubscriptionFact] {
        guard !transactions.isEmpty else { return [] }
        var recorded: [String: LedgerTransaction] = [:]
        let looked = transactions.filter {
            !unrecorded.contains($0.originalTransactionID) && !read.subscriptions.contains($0.originalTransactionID)
        }.map(\.transactionID)
        for chunk in Array(Set(looked)).sorted().chunked(by: chunkSize) where !chunk.isEmpty {
            var binds = SQLBinds()
            let list = binds.list(chunk.map { .text($0) })
            for row in try connection.execute(
                "SELECT \(SaveSQL.recordedColumns) FROM transactions WHERE transaction_id IN (\(list))", binds.values)
            {
                let transaction = try SaveSQL.recordedTransaction(from: row)
                recorded[transaction.transactionID] = transaction
            }
        }
        return transactions.flatMap { transaction in
            let row =
                read.subscriptions.contains(transaction.originalTransactionID)
                ? read.transactions[transaction.transactionID] : recorded[transaction.transactionID]
            return SubscriptionFact.added(by: transaction, recorded: row, now: now)
        }
    }

    /// Inserts facts; one already recorded stays as it is (one row per fact).
    static func insert(
        _ facts: [SubscriptionFact], runID: String?, recordedAt: Date, on connection: any SQLConnection
    ) throws {
        for fact in facts {
            _ = try connection.execute(
                SaveSQL.insertFact,
                [
                    .text(fact.originalTransactionID), .text(fact.kind.rawValue), SQLValue(fact.transactionID),
                    SQLValue(fact.startsAt), SQLValue(fact.endsAt), SQLValue(fact.value), SQLValue(fact.statedAt),
                    SQLValue(recordedAt), .text("answer"), SQLValue(runID),
                ])
        }
    }

    /// The stored rows of these subscriptions, with the receipt owning each.
    private static func storedSubscriptions(
        _ ids: [String], on connection: any SQLConnection
    ) throws -> [String: (receiptID: Int64, snapshot: SubscriptionSnapshot)] {
        var stored: [String: (receiptID: Int64, snapshot: SubscriptionSnapshot)] = [:]
        for chunk in Array(Set(ids)).sorted().chunked(by: chunkSize) where !chunk.isEmpty {
            var binds = SQLBinds()
            let list = binds.list(chunk.map { .text($0) })
            for row in try connection.execute(
                "SELECT \(subscriptionColumns) FROM subscriptions WHERE original_transaction_id IN (\(list))",
                binds.values)
            {
                let row = (receiptID: try row.int64("receipt_id"), snapshot: try Self.subscription(from: row).snapshot)
                stored[row.snapshot.originalTransactionID] = row
            }
        }
        return stored
    }

    /// Every fact recorded about these subscriptions, by original transaction id.
    static func facts(of ids: [String], on connection: any SQLConnection) throws -> [String: [SubscriptionFact]] {
        try LedgerSQL.facts(of: ids, on: connection)
    }
}

/// Ledgers read already in a transaction, before its write: the subscriptions read (each with all its
/// transactions, none for one without) and their transactions by id.
struct LedgersRead {
    var subscriptions: Set<String> = []
    var transactions: [String: LedgerTransaction] = [:]

    mutating func add(_ ledger: SubscriptionLedger) {
        for transaction in ledger.transactions { transactions[transaction.transactionID] = transaction }
    }
}
