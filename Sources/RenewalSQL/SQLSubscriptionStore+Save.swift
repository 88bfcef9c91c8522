import Foundation
import RenewalCore
import RenewalStorage

extension SQLSubscriptionStore {
    public func save(_ update: ReceiptUpdate) async throws {
        let dialect = database.dialect
        try await inTransaction { connection in
            if let owner = update.leaseOwner,
                try !Self.holdsLease(update.receiptID, owner: owner, on: connection, dialect: dialect)
            {
                throw SubscriptionStoreError.leaseLost(receiptID: update.receiptID)
            }
            try AnalyticsSummaryWrites.keeping(on: connection) { summaries in
                try Self.write(update, summaries: summaries, on: connection, dialect: dialect)
            }
        }
    }

    public func saveBatch(_ items: [PendingSave]) async throws -> [EntitlementDecision?] {
        guard !items.isEmpty else { return [] }
        let dialect = database.dialect
        if items.count > 1 {
            do {
                return try await inTransaction { connection in
                    try AnalyticsSummaryWrites.keeping(on: connection) { summaries in
                        try items.map {
                            try Self.saveFenced($0, summaries: summaries, on: connection, dialect: dialect)
                        }
                    }
                }
            } catch let error as CancellationError {
                throw error
            } catch {
                // One transaction each below: the same work, without what made the batch fail.
            }
        }
        var results: [EntitlementDecision?] = []
        for item in items {
            do {
                results.append(
                    try await inTransaction { connection in
                        try AnalyticsSummaryWrites.keeping(on: connection) { summaries in
                            try Self.saveFenced(item, summaries: summaries, on: connection, dialect: dialect)
                        }
                    })
            } catch SubscriptionStoreError.leaseLost {
                results.append(nil)
            }
        }
        return results
    }

    /// Fences, claims, decides and writes one item on a connection inside a transaction; nil
    /// (nothing written) when its worker no longer holds the lease.
    private static func saveFenced(
        _ item: PendingSave, summaries: AnalyticsSummaryWrites, on connection: any SQLConnection, dialect: SQLDialect
    ) throws -> EntitlementDecision? {
        if let owner = item.leaseOwner, try !holdsLease(item.receiptID, owner: owner, on: connection, dialect: dialect)
        {
            return nil
        }
        let (claimed, owners) = try claim(item.claiming, forReceipt: item.receiptID, on: connection)
        let decision = item.decide(owners: owners)
        try write(decision.update, claimed: claimed, summaries: summaries, on: connection, dialect: dialect)
        try giveBack(claimed, unusedBy: decision.update, on: connection)
        return decision
    }

    /// Claims the decision did not use (it failed, say) are given back.
    static func giveBack(_ claimed: [String], unusedBy update: ReceiptUpdate, on connection: any SQLConnection)
        throws
    {
        guard !claimed.isEmpty else { return }
        let written = Set(update.subscriptions.map(\.snapshot.originalTransactionID))
        for id in claimed where !written.contains(id) {
            _ = try connection.execute(
                """
                DELETE FROM subscriptions WHERE original_transaction_id = $1 AND receipt_id = $2 AND state = \
                'unverified'
                """,
                [.text(id), .int64(update.receiptID)])
        }
    }

    /// Whether `owner` still holds the receipt's lease; the row stays locked until the transaction
    /// ends (PostgreSQL `FOR UPDATE`; SQLite's `BEGIN IMMEDIATE` already excludes every other
    /// writer), so no claim can slip in before the write. Writes without a lease owner (tests writing
    /// directly) are not fenced.
    private static func holdsLease(
        _ receiptID: Int64, owner: String, on connection: any SQLConnection, dialect: SQLDialect
    ) throws -> Bool {
        let rows = try connection.execute(
            "SELECT lease_owner FROM receipts WHERE id = $1 \(dialect.rowLockClause)", [.int64(receiptID)])
        guard let row = rows.first else { throw SubscriptionStoreError.query("receipt \(receiptID) does not exist") }
        return try row.optionalText("lease_owner") == owner
    }

    /// Inserts a placeholder row for each id no receipt owns yet, so this transaction holds it (on
    /// PostgreSQL a concurrent claimant waits on the unique key until we commit, then finds our row);
    /// returns the ids claimed and the owners of the others. Ids go in sorted order, so two
    /// transactions claiming overlapping sets cannot deadlock.
    static func claim(
        _ ids: [String], forReceipt receiptID: Int64, on connection: any SQLConnection
    ) throws -> (claimed: [String], owners: [String: SubscriptionOwner]) {
        guard !ids.isEmpty else { return ([], [:]) }
        // The row's user: its owner when a claim gave it one (docs/design.md §7).
        let receipt = try connection.execute(
            "SELECT COALESCE(owner_user_id, user_id) AS user_id FROM receipts WHERE id = $1", [.int64(receiptID)])
        guard let userID = try receipt.first?.text("user_id") else {
            throw SubscriptionStoreError.query("receipt \(receiptID) does not exist")
        }
        var claimed: [String] = []
        var taken: [String] = []
        for id in Set(ids).sorted() {
            let rows = try connection.execute(
                """
                INSERT INTO subscriptions (original_transaction_id, receipt_id, user_id, state, entitled, next_check_at,
                    updated_at)
                VALUES ($1, $2, $3, 'unverified', 0, 0, 0)
                ON CONFLICT (original_transaction_id) DO NOTHING
                RETURNING original_transaction_id
                """,
                [.text(id), .int64(receiptID), .text(userID)])
            if rows.isEmpty { taken.append(id) } else { claimed.append(id) }
        }
        var owners: [String: SubscriptionOwner] = [:]
        for id in taken {
            let rows = try connection.execute(
                "SELECT receipt_id, user_id FROM subscriptions WHERE original_transaction_id = $1", [.text(id)])
            if let row = rows.first {
                owners[id] = SubscriptionOwner(receiptID: try row.int64("receipt_id"), userID: try row.text("user_id"))
            }
        }
        return (claimed, owners)
    }

    public func recordFailures(_ failures: [RecordedFailure], runID: String, releasingLeasesOf owner: String?)
        async throws -> Int
    {
        guard !failures.isEmpty else { return 0 }
        return try await inTransaction { connection in
            var lost = 0
            for recorded in failures {
                if let owner {
                    let released = try connection.execute(
                        """
                        UPDATE receipts SET lease_owner = NULL, lease_expires_at = NULL
                        WHERE id = $1 AND lease_owner = $2 RETURNING id
                        """,
                        [.int64(recorded.receiptID), .text(owner)])
                    // Another worker holds the row now: its own check speaks for it.
                    guard !released.isEmpty else {
                        lost += 1
                        continue
                    }
                }
                try Self.insert(
                    recorded.failure, runID: runID, receiptID: recorded.receiptID, userID: recorded.userID,
                    bundleID: recorded.bundleID, at: recorded.occurredAt, on: connection)
            }
            return lost
        }
    }

    private static func insert(
        _ failure: CheckFailure, runID: String?, receiptID: Int64, userID: String, bundleID: String?, at date: Date,
        on connection: any SQLConnection
    ) throws {
        _ = try connection.execute(
            """
            INSERT INTO run_failures (run_id, receipt_id, user_id, reason, message, occurred_at, bundle_id)
            VALUES ($1, $2, $3, $4, $5, $6, $7)
            """,
            [
                SQLValue(runID), .int64(receiptID), .text(userID), .text(failure.reason.rawValue),
                .text(failure.message), SQLValue(date), SQLValue(bundleID),
            ])
    }

    /// Writes one update on a connection already inside a transaction. `claimed` are the subscriptions
    /// this transaction has just created rows for (`claim`): those whose history starts with this write are
    /// written without reading their rows, ledger, facts or spans back (`FreshLedger`). The change to the
    /// analytics summaries goes to `summaries`, which the transaction appends before it commits.
    static func write(
        _ write: ReceiptUpdate, claimed: [String] = [], summaries: AnalyticsSummaryWrites,
        on connection: any SQLConnection, dialect: SQLDialect
    ) throws {
        // The receipt row goes last: if it is gone, everything before is rolled back with it.
        let ownership = Dictionary(
            write.subscriptions.map { ($0.snapshot.originalTransactionID, $0.snapshot.ownershipType) },
            uniquingKeysWith: { first, _ in first }
        )
        var changeIDs: [Int64] = []
        for change in write.changes {
            let ownershipType = change.originalTransactionID.flatMap { ownership[$0] ?? nil }
            changeIDs.append(try Self.insert(change, of: write, ownershipType: ownershipType, on: connection))
        }
        // Listening app servers hear of the changes when (and only if) the transaction commits.
        if let notify = dialect.changeNotification, !changeIDs.isEmpty {
            _ = try connection.execute(notify, [.text(changeIDs.map(String.init).joined(separator: ","))])
        }
        if let failure = write.failure {
            try Self.insert(
                failure, runID: write.runID, receiptID: write.receiptID, userID: write.userID,
                bundleID: write.bundleID, at: write.checkedAt, on: connection)
        }
        for conflict in write.conflicts {
            _ = try connection.execute(
                """
                INSERT INTO ownership_conflicts (run_id, original_transaction_id, owner_user_id, claimant_user_id,
                    product_id, detected_at)
                VALUES ($1, $2, $3, $4, $5, $6)
                """,
                [
                    SQLValue(write.runID), .text(conflict.originalTransactionID), .text(conflict.ownerUserID),
                    .text(conflict.claimantUserID), SQLValue(conflict.productID), SQLValue(write.checkedAt),
                ]
            )
        }
        // What the rows say before this update overwrites them decides which facts it adds.
        let fresh = try FreshLedger.subscriptions(
            claimed: claimed, transactions: write.transactions, on: connection)
        let subscriptionFacts = try Self.subscriptionFacts(of: write, fresh: fresh, on: connection)
        // The subscriptions whose ledger this update writes (its transactions', and its facts', which are
        // those of its transactions or of its subscriptions' rows): their spans are replaced, and the
        // analytics summaries take their change (read before anything of them is written).
        let written = Set(
            write.transactions.map(\.originalTransactionID) + subscriptionFacts.map(\.originalTransactionID))
        let rewritten = written.subtracting(fresh)
        let upkeep = try AnalyticsSummaryUpkeep.begin(
            rewritten, fresh: written.intersection(fresh), into: summaries, on: connection, dialect: dialect)
        // The ledger rows the upkeep has just read are not read again for the transactions' facts.
        let facts =
            try subscriptionFacts
            + Self.transactionFacts(
                write.transactions, unrecorded: fresh, read: upkeep?.read ?? LedgersRead(), now: write.checkedAt,
                on: connection)
        try Self.insert(facts, runID: write.runID, recordedAt: write.checkedAt, on: connection)
        for subscription in write.subscriptions {
            try Self.upsert(subscription, of: write, on: connection)
        }
        let environments = Dictionary(
            write.subscriptions.map { ($0.snapshot.originalTransactionID, $0.snapshot.environment) },
            uniquingKeysWith: { first, _ in first })
        for transaction in write.transactions {
            let environment = environments[transaction.originalTransactionID] ?? write.environment
            _ = try connection.execute(
                SaveSQL.upsertTransaction,
                SaveSQL.values(of: transaction, of: write, environment: environment ?? nil))
        }
        // The spans SQL reads "entitled at T" from, after this update's ledger rows and facts. Spans follow
        // from the ledger and the facts alone, so a subscription this update adds neither to (a re-check
        // Apple answers as before: its transactions are not rewritten) keeps its spans unread.
        let ledgers = try LedgerSQL.replaceSpans(of: rewritten, on: connection)
        let freshLedgers = try FreshLedger.insertSpans(
            of: fresh, write: write, environments: environments, facts: facts, on: connection)
        upkeep?.finish(after: ledgers + freshLedgers)
        try Self.updateReceipt(write, on: connection)
    }

    private static func updateReceipt(_ write: ReceiptUpdate, on connection: any SQLConnection) throws {
        var values: [SQLValue] = [
            .int64(write.receiptID), .text(write.status.rawValue), SQLValue(write.checkedAt),
            SQLValue(write.nextCheckAt), SQLValue(write.pollingCheckAt), SQLValue(write.outageCheckAt),
            SQLValue(write.consecutiveFailures), SQLValue(write.consecutiveMalformed),
            SQLValue(write.failure?.reason.rawValue), SQLValue(write.rejectedSince),
            SQLValue(write.noSubscriptionSince),
            SQLValue(write.newLatestReceipt), SQLValue(write.environment?.rawValue), SQLValue(write.verifiedAt),
            SQLValue(write.source?.rawValue), SQLValue(write.originalTransactionID),
            SQLValue(write.migrated ? write.checkedAt : nil), SQLValue(write.bundleID),
        ]
        if let owner = write.leaseOwner { values.append(.text(owner)) }
        let rows = try connection.execute(
            write.leaseOwner == nil ? SaveSQL.updateReceipt : SaveSQL.updateLeasedReceipt, values)
        guard !rows.isEmpty else {
            if write.leaseOwner != nil { throw SubscriptionStoreError.leaseLost(receiptID: write.receiptID) }
            throw SubscriptionStoreError.query("receipt \(write.receiptID) does not exist")
        }
    }

    /// Inserts or updates one subscription; a row owned by another receipt is left untouched.
    private static func upsert(
        _ subscription: StoredSubscription, of write: ReceiptUpdate, on connection: any SQLConnection
    ) throws {
        let snapshot = subscription.snapshot
        let values: [SQLValue] = [
            .text(snapshot.originalTransactionID), .int64(write.receiptID), .text(write.userID),
            SQLValue(snapshot.productID), .text(snapshot.state.rawValue), SQLValue(snapshot.entitled),
            SQLValue(snapshot.expiresAt), SQLValue(snapshot.autoRenew), SQLValue(snapshot.autoRenewProductID),
            SQLValue(snapshot.gracePeriodExpiresAt), SQLValue(snapshot.isInBillingRetry),
            SQLValue(snapshot.cancelledAt),
            SQLValue(snapshot.expirationIntent), SQLValue(snapshot.isTrialPeriod),
            SQLValue(snapshot.isInIntroOfferPeriod),
            SQLValue(snapshot.ownershipType), SQLValue(snapshot.environment?.rawValue),
            SQLValue(snapshot.latestTransactionID), SQLValue(snapshot.subscriptionGroupIdentifier),
            SQLValue(subscription.lastVerifiedAt), SQLValue(subscription.nextCheckAt), SQLValue(write.checkedAt),
            SQLValue(subscription.appleSignedAt),
        ]
        _ = try connection.execute(SaveSQL.upsertSubscription, values)
    }

    /// Records one change; returns its id.
    private static func insert(
        _ change: SubscriptionEvent, of write: ReceiptUpdate, ownershipType: String?, on connection: any SQLConnection
    ) throws -> Int64 {
        let inserted = try connection.execute(
            """
            INSERT INTO entitlement_changes (run_id, user_id, original_transaction_id, product_id, kind, from_state,
                to_state, old_expires_at, new_expires_at, environment, ownership_type, occurred_at, source, bundle_id,
                from_product_id, revocation_type, revocation_percentage)
            VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17)
            RETURNING id
            """,
            [
                SQLValue(write.runID), .text(write.userID), SQLValue(change.originalTransactionID),
                SQLValue(change.productID),
                .text(change.kind.rawValue), .text(change.fromState.rawValue), .text(change.toState.rawValue),
                SQLValue(change.oldExpiresAt), SQLValue(change.newExpiresAt), SQLValue(change.environment?.rawValue),
                SQLValue(ownershipType), SQLValue(write.checkedAt), SQLValue(write.source?.rawValue),
                SQLValue(write.bundleID), SQLValue(change.fromProductID), SQLValue(change.revocationType),
                SQLValue(change.revocationPercentage),
            ]
        )
        guard let id = try inserted.first?.int64("id") else {
            throw SubscriptionStoreError.query("INSERT INTO entitlement_changes returned no id")
        }
        if write.queueWebhooks {
            _ = try connection.execute(
                "INSERT INTO webhook_outbox (change_id, user_id, created_at, next_attempt_at) VALUES ($1, $2, $3, $3)",
                [.int64(id), .text(write.userID), SQLValue(write.checkedAt)])
        }
        return id
    }
}
