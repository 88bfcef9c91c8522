import Foundation
import RenewalCore
import RenewalStorage

extension SQLSubscriptionStore {
    public func claimHistoryCandidates(limit: Int, now: Date, claimedUntil: Date) async throws -> [HistoryCandidate] {
        guard limit > 0 else { return [] }
        // On the partial index of the subscriptions still to complete; PostgreSQL skips the rows another
        // worker is claiming at this moment, SQLite has one writer.
        let sql = """
            UPDATE subscriptions SET history_claimed_until = $2
            WHERE original_transaction_id IN (
                SELECT original_transaction_id FROM subscriptions
                WHERE history_completed_at IS NULL AND (history_claimed_until IS NULL OR history_claimed_until <= $1)
                ORDER BY original_transaction_id LIMIT $3 \(database.dialect.lockingClause))
            RETURNING original_transaction_id, user_id, environment, history_revision,
                (SELECT r.bundle_id FROM receipts r WHERE r.id = subscriptions.receipt_id) AS bundle_id
            """
        let binds: [SQLValue] = [SQLValue(now), SQLValue(claimedUntil), .int64(Int64(limit))]
        let rows = try await inTransaction { connection in try connection.execute(sql, binds) }
        return try rows.map { row in
            HistoryCandidate(
                originalTransactionID: try row.text("original_transaction_id"), userID: try row.text("user_id"),
                bundleID: try row.optionalText("bundle_id"), environment: try row.environment("environment"),
                revision: try row.optionalText("history_revision"))
        }.sorted { $0.originalTransactionID < $1.originalTransactionID }
    }

    public func releaseHistoryClaims(_ originalTransactionIDs: [String]) async throws {
        guard !originalTransactionIDs.isEmpty else { return }
        try await inTransaction { connection in
            for id in originalTransactionIDs {
                _ = try connection.execute(
                    "UPDATE subscriptions SET history_claimed_until = NULL WHERE original_transaction_id = $1",
                    [.text(id)])
            }
        }
    }

    public func recordHistoryPage(
        of candidate: HistoryCandidate, transactions: [LedgerTransaction], environment: AppStoreEnvironment?,
        revision: String?, completedAt: Date?, recordedAt: Date
    ) async throws {
        let dialect = database.dialect
        try await inTransaction { connection in
            let written = [candidate.originalTransactionID] + transactions.map(\.originalTransactionID)
            try AnalyticsSummaryWrites.keeping(on: connection) { summaries in
                let upkeep = try AnalyticsSummaryUpkeep.begin(
                    Set(written), into: summaries, on: connection, dialect: dialect)
                // A refund reversed or an expiry moved is kept as a fact before the row is overwritten (from the
                // ledger rows the upkeep read, when it read them).
                let facts = try Self.transactionFacts(
                    transactions, read: upkeep?.read ?? LedgersRead(), now: recordedAt, on: connection)
                try Self.insert(facts, runID: nil, recordedAt: recordedAt, on: connection)
                for transaction in transactions {
                    _ = try connection.execute(
                        SaveSQL.upsertTransaction,
                        SaveSQL.values(
                            of: transaction, userID: candidate.userID, bundleID: candidate.bundleID,
                            environment: environment, recordedAt: recordedAt))
                }
                let ledgers = try LedgerSQL.replaceSpans(of: written, on: connection)
                upkeep?.finish(after: ledgers)
            }
            // A completed history needs no claim any more.
            _ = try connection.execute(
                """
                UPDATE subscriptions SET history_revision = $2, history_completed_at = $3
                \(completedAt == nil ? "" : ", history_claimed_until = NULL")
                WHERE original_transaction_id = $1
                """,
                [.text(candidate.originalTransactionID), SQLValue(revision), SQLValue(completedAt)])
        }
    }
}
