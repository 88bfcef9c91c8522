import Foundation
import RenewalCore
import RenewalStorage

/// The import engine behind `renewal import`: reads JSON Lines (flat memory, one line at a time),
/// checks each line, verifies signed transactions, and writes the good lines in batches, each batch
/// in one transaction. One batch is written while the next is read and parsed, so the database and
/// this process work at the same time; batches are still written one after another, in order.
/// A bad line is named and skipped; the rest of the file goes on.
package struct ReceiptImporter: Sendable {
    /// Lines written per transaction; at least 1.
    package var batchSize: Int
    /// The verifier of `signed_transaction`, made on the first signed line, so a receipt-only file
    /// never needs the trusted roots.
    package var signedTransactions: @Sendable () throws -> SignedTransactionImport
    /// Queue a `purchase.claimed` webhook for each adopted purchase a line claims (a webhook URL is set).
    package var queueClaimWebhooks: Bool

    package init(
        batchSize: Int, queueClaimWebhooks: Bool = false,
        signedTransactions: @escaping @Sendable () throws -> SignedTransactionImport
    ) {
        self.batchSize = max(1, batchSize)
        self.queueClaimWebhooks = queueClaimWebhooks
        self.signedTransactions = signedTransactions
    }

    /// What an import did, line by line.
    package struct Summary: Sendable, Hashable {
        package var inserted = 0
        package var replaced = 0
        package var unchanged = 0
        /// Lines refused: unreadable, breaking a rule, a signed transaction that failed, a user
        /// whose stored receipt is another app's, or a token mapped to another user.
        package var rejected = 0
        /// Lines that only registered a user's `app_account_token`.
        package var tokens = 0
        /// Lines that claimed, for their user, a purchase the change feed had adopted.
        package var claimed = 0

        mutating func count(_ outcomes: [ReceiptImportOutcome]) {
            for outcome in outcomes {
                switch outcome {
                case .inserted: inserted += 1
                case .replaced: replaced += 1
                case .unchanged: unchanged += 1
                case .otherApp, .tokenConflict: rejected += 1
                case .tokenRecorded: tokens += 1
                case .claimed: claimed += 1
                }
            }
        }
    }

    /// Imports every line `handle` holds into `store`.
    ///
    /// - Parameter problem: told of each refused line: its number, from 1, and a sentence naming
    ///   the problem and the fix (never the receipt).
    package func run(
        _ handle: FileHandle, into store: any SubscriptionStore, now: Date,
        problem: @escaping @Sendable (_ line: Int, _ message: String) -> Void
    ) async throws -> Summary {
        var reader = LineReader(handle: handle)
        var summary = Summary()
        var batch: [(line: Int, item: ReceiptImport)] = []
        var lineNumber = 0
        var signed: SignedTransactionImport?
        var writing: Task<[ReceiptImportOutcome], any Error>?
        func finishWriting() async throws {
            guard let outcomes = try await writing?.value else { return }
            summary.count(outcomes)
            writing = nil
        }
        func write(_ full: [(line: Int, item: ReceiptImport)]) async throws {
            try await finishWriting()
            writing = Task { [queueClaimWebhooks] in
                try await Self.store(full, in: store, now: now, queueClaimWebhooks: queueClaimWebhooks, problem: problem)
            }
        }
        do {
            while let line = try await reader.next() {
                lineNumber += 1
                var parsed = ImportLine.parse(line)
                if case .success(let item, let jws?) = parsed {
                    if signed == nil { signed = try signedTransactions() }
                    switch await signed?.complete(item, signedTransaction: jws) {
                    case .success(let completed)?: parsed = .success(completed, signedTransaction: nil)
                    case .failure(let refusal)?: parsed = .failure(refusal.description)
                    case nil: break
                    }
                }
                switch parsed {
                case .skip: continue
                case .failure(let message):
                    summary.rejected += 1
                    problem(lineNumber, message)
                case .success(let item, _):
                    batch.append((lineNumber, item))
                    if batch.count >= batchSize {
                        try await write(batch)
                        batch.removeAll(keepingCapacity: true)
                    }
                }
            }
            if !batch.isEmpty { try await write(batch) }
            try await finishWriting()
        } catch {
            // A batch already handed over is written as it would have been before the error.
            _ = try? await writing?.value
            throw error
        }
        return summary
    }

    /// Writes a batch in one transaction; names each line refused because its user's stored
    /// receipt is another app's.
    private static func store(
        _ batch: [(line: Int, item: ReceiptImport)], in store: any SubscriptionStore, now: Date,
        queueClaimWebhooks: Bool, problem: @Sendable (Int, String) -> Void
    ) async throws -> [ReceiptImportOutcome] {
        let items = batch.map(\.item)
        let outcomes =
            if queueClaimWebhooks, let claiming = store as? any ClaimWebhookImporting {
                try await claiming.importReceipts(items, now: now, queueClaimWebhooks: true)
            } else {
                try await store.importReceipts(items, now: now)
            }
        for (entry, outcome) in zip(batch, outcomes) where outcome == .tokenConflict {
            problem(
                entry.line,
                """
                app_account_token \(entry.item.appAccountToken ?? "") is registered for another user than \
                \(entry.item.userID); nothing was changed. One token names one user: give each user the token the app \
                generated for them, or fix the line's user_id.
                """)
        }
        for (entry, outcome) in zip(batch, outcomes) where outcome == .otherApp {
            problem(
                entry.line,
                """
                user \(entry.item.userID) already has a receipt of another app than \(entry.item.bundleID ?? ""); \
                nothing was changed. A user id holds one receipt: import each app's customers under user ids of \
                their own (for example mac:\(entry.item.userID)).
                """)
        }
        return outcomes
    }
}
