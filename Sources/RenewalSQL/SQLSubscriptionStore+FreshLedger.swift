import Foundation
import RenewalCore
import RenewalStorage

/// A first check's shortcut. A subscription the saving transaction has just claimed (its row did not
/// exist) and of which the ledger holds no transaction starts its history with this write:
/// its previous state is none, none of its transactions is recorded, and its spans follow from what the
/// write itself stores. Knowing that saves reading back, per subscription, its row, its ledger, its facts
/// and its spans, and deleting spans that are not there: most of what keeping facts and spans cost a
/// first check.
enum FreshLedger {
    /// The ids among `claimed` of which the ledger holds no transaction. One statement per chunk. Facts
    /// and spans need no probe: both are written only with the subscription's row (a save, a history page)
    /// or from its ledger rows, and a claimed subscription had no row. (Apple's transaction ids are unique
    /// and each belongs to one original transaction id for good, so a subscription without ledger rows
    /// has none of its transactions recorded.)
    static func subscriptions(
        claimed: some Collection<String>, transactions: [LedgerTransaction], on connection: any SQLConnection
    ) throws -> Set<String> {
        guard !claimed.isEmpty else { return [] }
        var held: Set<String> = []
        for chunk in Array(Set(claimed)).sorted().chunked(by: LedgerSQL.chunkSize) where !chunk.isEmpty {
            var binds = SQLBinds()
            let list = binds.list(chunk.map { .text($0) })
            for row in try connection.execute(
                "SELECT DISTINCT original_transaction_id FROM transactions WHERE original_transaction_id IN (\(list))",
                binds.values)
            {
                held.insert(try row.text("original_transaction_id"))
            }
        }
        var fresh = Set(claimed).subtracting(held)
        // The same transaction written twice, or one the ledger holds for another subscription, is merged
        // by the upsert's rules: those subscriptions take the reading path.
        var seen: Set<String> = []
        for transaction in transactions where fresh.contains(transaction.originalTransactionID) {
            if !seen.insert(transaction.transactionID).inserted { fresh.remove(transaction.originalTransactionID) }
        }
        return fresh
    }

    /// The spans of fresh subscriptions, computed from what this write stores for them exactly as
    /// `LedgerSQL.replaceSpans` would compute them from reading it back (dates at the ledger's millisecond
    /// precision, the ledger's order), inserted without reading or deleting anything. Returns those
    /// ledgers, for the analytics summaries' upkeep.
    static func insertSpans(
        of fresh: Set<String>, write: ReceiptUpdate, environments: [String: AppStoreEnvironment?],
        facts: [SubscriptionFact], on connection: any SQLConnection
    ) throws -> [SubscriptionLedger] {
        guard !fresh.isEmpty else { return [] }
        var ledgers: [SubscriptionLedger] = []
        var transactions: [String: [LedgerTransaction]] = [:]
        for transaction in write.transactions where fresh.contains(transaction.originalTransactionID) {
            transactions[transaction.originalTransactionID, default: []].append(transaction.asStored)
        }
        // As `subscription_facts` keeps them: the first of the facts its unique key does not tell apart.
        var factsByID: [String: [SubscriptionFact]] = [:]
        for fact in facts where fresh.contains(fact.originalTransactionID) {
            let stored = fact.asStored
            if !(factsByID[fact.originalTransactionID] ?? []).contains(where: { $0.sameKey(as: stored) }) {
                factsByID[fact.originalTransactionID, default: []].append(stored)
            }
        }
        var rows: [[SQLValue]] = []
        for (id, written) in transactions.sorted(by: { $0.key < $1.key }) {
            let environment = environments[id] ?? write.environment
            let ledger = SubscriptionLedger(
                originalTransactionID: id, bundleID: write.bundleID, environment: environment ?? nil,
                facts: factsByID[id] ?? [],
                transactions: written.sorted {
                    ($0.purchasedAt ?? .distantPast, $0.transactionID) < (
                        $1.purchasedAt ?? .distantPast, $1.transactionID
                    )
                })
            ledgers.append(ledger)
            for span in ledger.timeline(in: ledger.environment ?? .production).spans {
                rows.append(
                    LedgerSQL.spanRow(
                        id: id,
                        LedgerSQL.KeptSpan(
                            span: span, bundleID: write.bundleID, environment: ledger.environment?.rawValue)))
            }
        }
        try LedgerSQL.insertSpans(rows, on: connection)
        return ledgers
    }
}

extension LedgerTransaction {
    /// The transaction as the ledger gives it back: dates at millisecond precision.
    var asStored: LedgerTransaction {
        var stored = self
        stored.purchasedAt = purchasedAt.map(\.atMillisecond)
        stored.expiresAt = expiresAt.map(\.atMillisecond)
        stored.revokedAt = revokedAt.map(\.atMillisecond)
        stored.signedAt = signedAt.map(\.atMillisecond)
        stored.seatsRevokedAt = seatsRevokedAt.map(\.atMillisecond)
        return stored
    }
}

extension SubscriptionFact {
    /// The fact as `subscription_facts` gives it back: dates at millisecond precision.
    var asStored: SubscriptionFact {
        var stored = self
        stored.startsAt = startsAt.atMillisecond
        stored.endsAt = endsAt.map(\.atMillisecond)
        stored.statedAt = statedAt.atMillisecond
        return stored
    }

    /// Whether `subscription_facts`' unique key (all but the statement date) holds both as one row.
    func sameKey(as other: SubscriptionFact) -> Bool {
        (originalTransactionID, kind, transactionID, startsAt, endsAt, value)
            == (other.originalTransactionID, other.kind, other.transactionID, other.startsAt, other.endsAt, other.value)
    }
}

extension Date {
    /// The date a column written with `SQLValue(Date)` reads back as.
    fileprivate var atMillisecond: Date { AppleDateFormat.date(milliseconds: AppleDateFormat.milliseconds(self)) }
}
