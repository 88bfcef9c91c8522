import Foundation
import RenewalCore
import RenewalStorage

extension SQLSubscriptionStore {
    static var receiptColumns: String {
        """
        id, COALESCE(owner_user_id, user_id) AS user_id, latest_receipt, imported_product_id, status, environment, \
        next_check_at, last_verified_at, consecutive_failures, consecutive_malformed, rejected_since, \
        no_subscription_since, source, original_transaction_id, bundle_id
        """
    }

    static var subscriptionColumns: String { SaveSQL.columnList }

    public func nextBatch(
        _ selection: ReceiptSelection, after: ReceiptCursor?, limit: Int, lease: Lease?
    ) async throws -> [StoredReceipt] {
        guard limit > 0,
            let statement = Self.batchStatement(
                selection, after: after, limit: limit, lease: lease, dialect: database.dialect)
        else { return [] }
        let work: (any SQLConnection) throws -> [StoredReceipt] = { connection in
            let rows = try connection.execute(statement.sql, statement.binds)
            var receipts = try rows.map(Self.receipt(from:))
            // RETURNING gives no order guarantee: restore the selection's order.
            switch selection {
            case .due: receipts.sort { ($0.nextCheckAt, $0.id) < ($1.nextCheckAt, $1.id) }
            case .backfill: receipts.sort { $0.id < $1.id }
            }
            let subscriptions = try Self.subscriptions(ofReceipts: receipts.map(\.id), on: connection)
            for index in receipts.indices {
                receipts[index].subscriptions = subscriptions[receipts[index].id] ?? []
            }
            try Self.readLedger(&receipts, on: connection)
            return receipts
        }
        return lease == nil ? try await onConnection(work) : try await inTransaction(work)
    }

    /// The statement selecting (and, with a lease, leasing) one page; nil when the selection is empty.
    static func batchStatement(
        _ selection: ReceiptSelection, after: ReceiptCursor?, limit: Int, lease: Lease?, dialect: SQLDialect
    ) -> SQLStatement? {
        var binds = SQLBinds()
        // With a lease, the lease parameters come first so the inner query's numbering follows them.
        let leaseSet = lease.map { lease in
            "lease_owner = \(binds.add(.text(lease.owner))), lease_expires_at = \(binds.add(SQLValue(lease.until)))"
        }
        var conditions: [String] = []
        let order: String
        switch selection {
        case .due(let asOf):
            conditions.append("r.next_check_at <= \(binds.add(SQLValue(asOf)))")
            if let after {
                conditions.append(
                    """
                    (r.next_check_at, r.id) > (\(binds.add(SQLValue(after.nextCheckAt))), \
                    \(binds.add(.int64(after.id))))
                    """
                )
            }
            order = "r.next_check_at, r.id"
        case .backfill(let selector):
            guard !selector.isEmpty else { return nil }
            conditions += backfillConditions(selector, binds: &binds)
            if let after { conditions.append("r.id > \(binds.add(.int64(after.id)))") }
            order = "r.id"
        }
        if let lease {
            conditions.append("(r.lease_expires_at IS NULL OR r.lease_expires_at <= \(binds.add(SQLValue(lease.now))))")
        }
        let whereClause = conditions.isEmpty ? "" : "WHERE " + conditions.joined(separator: " AND ")
        let limitParameter = binds.add(.int64(Int64(limit)))
        guard let leaseSet else {
            return SQLStatement(
                sql:
                    "SELECT \(receiptColumns) FROM receipts r \(whereClause) ORDER BY \(order) LIMIT \(limitParameter)",
                binds: binds.values
            )
        }
        return SQLStatement(
            sql: """
                UPDATE receipts SET \(leaseSet)
                WHERE id IN (
                    SELECT r.id FROM receipts r \(whereClause)
                    ORDER BY \(order) LIMIT \(limitParameter) \(dialect.lockingClause)
                )
                RETURNING \(receiptColumns)
                """,
            binds: binds.values
        )
    }

    /// The rows of `users`: keyed by them, or claimed for them under another key (`owner_user_id`; see
    /// `ownerSQL`), found through the subscriptions' user (indexed) and, for a row not checked yet, the small
    /// `adopted_purchases` table, so a user's backfill stays on indexes.
    private static func userCondition(_ users: [String], binds: inout SQLBinds) -> String {
        let keyed = binds.list(users.map { .text($0) })
        let owners = binds.list(users.map { .text($0) })
        let subscribed = binds.list(users.map { .text($0) })
        let adopted = binds.list(users.map { .text($0) })
        return """
            (r.user_id IN (\(keyed)) OR (r.owner_user_id IN (\(owners)) AND r.id IN (\
            SELECT s.receipt_id FROM subscriptions s WHERE s.user_id IN (\(subscribed)) \
            UNION SELECT a.receipt_id FROM adopted_purchases a WHERE a.claimed_user_id IN (\(adopted)))))
            """
    }

    /// The backfill selector as `AND`ed conditions on `receipts r`; lists are bound one value each.
    private static func backfillConditions(_ selector: BackfillSelector, binds: inout SQLBinds) -> [String] {
        var conditions: [String] = []
        if !selector.userIDs.isEmpty {
            conditions.append(userCondition(selector.userIDs, binds: &binds))
        }
        if !selector.productIDs.isEmpty {
            let products = binds.list(selector.productIDs.map { .text($0) })
            conditions.append(
                """
                (r.imported_product_id IN (\(products)) OR EXISTS (SELECT 1 FROM subscriptions s \
                WHERE s.receipt_id = r.id AND s.product_id IN (\(products))))
                """
            )
        }
        if !selector.states.isEmpty {
            let states = binds.list(selector.states.map { .text($0.rawValue) })
            var alternatives = [
                "EXISTS (SELECT 1 FROM subscriptions s WHERE s.receipt_id = r.id AND s.state IN (\(states)))"
            ]
            if selector.states.contains(.unverified) {
                alternatives.append("r.status = \(binds.add(.text(ReceiptStatus.unverified.rawValue)))")
            }
            conditions.append("(" + alternatives.joined(separator: " OR ") + ")")
        }
        if let since = selector.expiredSince {
            conditions.append(
                """
                EXISTS (SELECT 1 FROM subscriptions s WHERE s.receipt_id = r.id \
                AND s.expires_at >= \(binds.add(SQLValue(since))) AND s.entitled = 0)
                """
            )
        }
        if let environment = selector.environment {
            conditions.append("r.environment = \(binds.add(.text(environment.rawValue)))")
        }
        if !selector.bundleIDs.isEmpty {
            conditions.append("r.bundle_id IN (\(binds.list(selector.bundleIDs.map { .text($0) })))")
        }
        return conditions
    }

    /// Reads the ledger's rows of the receipts' subscriptions (their purchases and latest transactions,
    /// for receipts with a receipt to send verifyReceipt) into `recordedTransactions`, and marks those
    /// whose subscriptions' purchases the ledger lacks: a subscription's purchase is the transaction
    /// whose id is its original transaction id. A receipt never verified lacks them all; one known to
    /// hold no subscription lacks none.
    static func readLedger(_ receipts: inout [StoredReceipt], on connection: any SQLConnection) throws {
        var ids: Set<String> = []
        for receipt in receipts where receipt.latestReceipt != nil {
            for subscription in receipt.subscriptions {
                ids.insert(subscription.snapshot.originalTransactionID)
                if let latest = subscription.snapshot.latestTransactionID { ids.insert(latest) }
            }
        }
        var recorded: [String: LedgerTransaction] = [:]
        for chunk in ids.sorted().chunked(by: chunkSize) where !chunk.isEmpty {
            var binds = SQLBinds()
            let list = binds.list(chunk.map { .text($0) })
            for row in try connection.execute(
                "SELECT \(SaveSQL.recordedColumns) FROM transactions WHERE transaction_id IN (\(list))", binds.values)
            {
                let transaction = try SaveSQL.recordedTransaction(from: row)
                recorded[transaction.transactionID] = transaction
            }
        }
        for index in receipts.indices where receipts[index].latestReceipt != nil {
            let receipt = receipts[index]
            receipts[index].lacksTransactionHistory =
                receipt.subscriptions.isEmpty
                ? receipt.noSubscriptionSince == nil
                : receipt.subscriptions.contains { recorded[$0.snapshot.originalTransactionID] == nil }
            for subscription in receipt.subscriptions {
                for id in [subscription.snapshot.originalTransactionID, subscription.snapshot.latestTransactionID] {
                    if let id, let transaction = recorded[id] { receipts[index].recordedTransactions[id] = transaction }
                }
            }
        }
    }

    /// The subscriptions of these receipts, grouped by receipt id, each group by original transaction id.
    static func subscriptions(
        ofReceipts ids: [Int64], on connection: any SQLConnection
    ) throws -> [Int64: [StoredSubscription]] {
        var grouped: [Int64: [StoredSubscription]] = [:]
        for chunk in ids.chunked(by: chunkSize) where !chunk.isEmpty {
            var binds = SQLBinds()
            let list = binds.list(chunk.map { .int64($0) })
            let rows = try connection.execute(
                """
                SELECT \(subscriptionColumns) FROM subscriptions WHERE receipt_id IN (\(list))
                ORDER BY receipt_id, original_transaction_id
                """,
                binds.values
            )
            for row in rows {
                grouped[try row.int64("receipt_id"), default: []].append(try subscription(from: row))
            }
        }
        return grouped
    }

    static func receipt(from row: SQLRow) throws -> StoredReceipt {
        let rawStatus = try row.text("status")
        guard let status = ReceiptStatus(rawValue: rawStatus) else {
            throw SubscriptionStoreError.corruptRow("receipts.status holds an unknown status")
        }
        return StoredReceipt(
            id: try row.int64("id"),
            userID: try row.text("user_id"),
            latestReceipt: try row.text("latest_receipt").nonEmpty,
            importedProductID: try row.optionalText("imported_product_id"),
            status: status,
            environment: try row.environment("environment"),
            nextCheckAt: try row.date("next_check_at"),
            lastVerifiedAt: try row.optionalDate("last_verified_at"),
            consecutiveFailures: try row.int("consecutive_failures"),
            consecutiveMalformed: try row.int("consecutive_malformed"),
            rejectedSince: try row.optionalDate("rejected_since"),
            noSubscriptionSince: try row.optionalDate("no_subscription_since"),
            source: try row.optionalText("source").flatMap(CheckSource.init(rawValue:)),
            originalTransactionID: try row.optionalText("original_transaction_id"),
            bundleID: try row.optionalText("bundle_id"),
            subscriptions: []
        )
    }

    static func subscription(from row: SQLRow) throws -> StoredSubscription {
        let snapshot = SubscriptionSnapshot(
            originalTransactionID: try row.text("original_transaction_id"),
            productID: try row.optionalText("product_id"),
            state: try row.state("state"),
            expiresAt: try row.optionalDate("expires_at"),
            autoRenew: try row.optionalBool("auto_renew"),
            autoRenewProductID: try row.optionalText("auto_renew_product_id"),
            gracePeriodExpiresAt: try row.optionalDate("grace_period_expires_at"),
            isInBillingRetry: try row.bool("billing_retry"),
            cancelledAt: try row.optionalDate("cancelled_at"),
            expirationIntent: try row.optionalText("expiration_intent"),
            isTrialPeriod: try row.bool("is_trial"),
            isInIntroOfferPeriod: try row.bool("is_intro_offer"),
            ownershipType: try row.optionalText("ownership_type"),
            environment: try row.environment("environment"),
            latestTransactionID: try row.optionalText("latest_transaction_id"),
            subscriptionGroupIdentifier: try row.optionalText("subscription_group_id")
        )
        return StoredSubscription(
            snapshot: snapshot,
            lastVerifiedAt: try row.optionalDate("last_verified_at"),
            nextCheckAt: try row.date("next_check_at"),
            appleSignedAt: try row.optionalDate("apple_signed_at")
        )
    }
}
