import Foundation
import RenewalCore
import RenewalStorage

extension SQLSubscriptionStore: PurchaseClaiming {
    public func claim(
        originalTransactionID: String, user: String, reassign: Bool, method: ClaimMethod, runID: String?,
        queueWebhooks: Bool, now: Date
    ) async throws -> ClaimResult {
        guard !PurchaseAdoption.isReserved(user) else { throw ClaimError.reservedUserID(user) }
        let claim = Claim(
            originalTransactionID: originalTransactionID, user: user, method: method, runID: runID,
            queueWebhooks: queueWebhooks, now: now)
        // The refusal is committed (recorded in ownership_conflicts) before it is thrown.
        let outcome = try await inTransaction { connection in
            try Self.perform(claim, reassign: reassign, on: connection, dialect: database.dialect)
        }
        return try outcome.get()
    }

    public func claim(
        originalTransactionIDs ids: [String], user: String, reassign: Bool, method: ClaimMethod, runID: String?,
        queueWebhooks: Bool, now: Date
    ) async throws -> [ClaimResult] {
        guard !PurchaseAdoption.isReserved(user) else { throw ClaimError.reservedUserID(user) }
        let dialect = database.dialect
        // A refusal is committed (recorded in ownership_conflicts) before it is thrown; nothing is claimed then.
        let outcome = try await inTransaction { connection -> Result<[ClaimResult], ClaimError> in
            var owned: [String: String] = [:]
            for id in ids {
                guard let owner = try Self.currentOwner(of: id, on: connection, dialect: dialect) else {
                    return .failure(.notHeld(originalTransactionID: id))
                }
                if let owner = owner.user, owner != user { owned[id] = owner }
            }
            if !owned.isEmpty, !reassign {
                for (id, owner) in owned {
                    try Self.recordConflict(id, owner: owner, claimant: user, runID: runID, at: now, on: connection)
                }
                if owned.count == 1, let only = owned.first {
                    return .failure(.ownedByAnotherUser(originalTransactionID: only.key, owner: only.value))
                }
                return .failure(.ownedByOtherUsers(owners: owned))
            }
            return .success(
                try ids.map { id in
                    let claim = Claim(
                        originalTransactionID: id, user: user, method: method, runID: runID,
                        queueWebhooks: queueWebhooks, now: now)
                    // Checked above: a failure here throws, so the transaction claims nothing.
                    return try Self.perform(claim, reassign: reassign, on: connection, dialect: dialect).get()
                })
        }
        return try outcome.get()
    }

    /// Who holds `id` now, the row locked: nil when no receipts row holds it; `user` nil when unclaimed.
    private static func currentOwner(of id: String, on connection: any SQLConnection, dialect: SQLDialect) throws
        -> (receiptID: Int64, user: String?)?
    {
        guard let receiptID = try heldBy(id, on: connection),
            let row = try connection.execute(
                "SELECT \(ownerSQL("r")) AS owner FROM receipts r WHERE id = $1 \(dialect.rowLockClause)",
                [.int64(receiptID)]
            ).first
        else { return nil }
        return (receiptID, try row.optionalText("owner"))
    }

    /// Records a claim of another user's subscription in `ownership_conflicts`, refused or moved.
    private static func recordConflict(
        _ id: String, owner: String, claimant: String, runID: String?, at now: Date, on connection: any SQLConnection
    ) throws {
        _ = try connection.execute(
            """
            INSERT INTO ownership_conflicts (run_id, original_transaction_id, owner_user_id, claimant_user_id,
                product_id, detected_at)
            VALUES ($1, $2, $3, $4, (SELECT product_id FROM subscriptions WHERE original_transaction_id = $2), $5)
            """,
            [SQLValue(runID), .text(id), .text(owner), .text(claimant), SQLValue(now)])
    }

    /// The owner of the receipts row `alias`, as SQL: its `owner_user_id` when set, NULL when it is an
    /// adopted row no user claimed (its `user_id` is a reserved key), else its `user_id`.
    public static func ownerSQL(_ alias: String) -> String {
        """
        CASE WHEN \(alias).owner_user_id IS NOT NULL THEN \(alias).owner_user_id \
        WHEN \(alias).user_id LIKE '\(PurchaseAdoption.reservedUserPrefix)%' THEN NULL ELSE \(alias).user_id END
        """
    }

    /// One claim's inputs, as `perform` and the feed's and import's token claims pass them.
    struct Claim {
        var originalTransactionID: String
        var user: String
        var method: ClaimMethod
        var runID: String?
        var queueWebhooks: Bool
        var now: Date
    }

    /// Claims in the caller's transaction: finds and locks the receipts row holding the subscription,
    /// refuses (recorded) when another user owns it and `reassign` is false, else moves it.
    static func perform(_ claim: Claim, reassign: Bool, on connection: any SQLConnection, dialect: SQLDialect)
        throws -> Result<ClaimResult, ClaimError>
    {
        let id = claim.originalTransactionID
        guard let receiptID = try heldBy(id, on: connection),
            let row = try connection.execute(
                "SELECT id, user_id, \(ownerSQL("r")) AS owner FROM receipts r WHERE id = $1 \(dialect.rowLockClause)",
                [.int64(receiptID)]
            ).first
        else { return .failure(.notHeld(originalTransactionID: id)) }
        let owner = try row.optionalText("owner")
        if owner == claim.user {
            return .success(
                ClaimResult(originalTransactionID: id, userID: claim.user, previousOwner: owner, changed: false))
        }
        if let owner {
            // Recorded either way: a refusal, and a reassignment, are conflicts support resolved.
            try recordConflict(
                id, owner: owner, claimant: claim.user, runID: claim.runID, at: claim.now, on: connection)
            guard reassign else { return .failure(.ownedByAnotherUser(originalTransactionID: id, owner: owner)) }
        }
        try move(receiptID, keyed: try row.text("user_id"), to: claim, on: connection)
        try recordClaimed(receiptID, claim, on: connection)
        return .success(ClaimResult(originalTransactionID: id, userID: claim.user, previousOwner: owner, changed: true))
    }

    /// The receipts row holding the subscription: by its stored subscription, else by the id it was
    /// imported or adopted by.
    static func heldBy(_ originalTransactionID: String, on connection: any SQLConnection) throws -> Int64? {
        if let held = try connection.execute(
            "SELECT receipt_id FROM subscriptions WHERE original_transaction_id = $1", [.text(originalTransactionID)]
        ).first?.int64("receipt_id") {
            return held
        }
        return try connection.execute(
            "SELECT id FROM receipts WHERE original_transaction_id = $1 ORDER BY id LIMIT 1",
            [.text(originalTransactionID)]
        ).first?.int64("id")
    }

    /// Makes the row the user's. A user holding no receipts row takes it under their own id; one who
    /// holds a row already (user ids are UNIQUE) gets it through `owner_user_id`, the row keeping (or
    /// taking) the reserved key of the subscription. Its subscriptions and ledger follow.
    private static func move(_ receiptID: Int64, keyed key: String, to claim: Claim, on connection: any SQLConnection)
        throws
    {
        let holdsRow = try !connection.execute(
            "SELECT id FROM receipts WHERE user_id = $1 AND id <> $2", [.text(claim.user), .int64(receiptID)]
        ).isEmpty
        if holdsRow {
            let reserved =
                PurchaseAdoption.isReserved(key) ? key : PurchaseAdoption.userKey(of: claim.originalTransactionID)
            _ = try connection.execute(
                "UPDATE receipts SET user_id = $2, owner_user_id = $3, updated_at = $4 WHERE id = $1",
                [.int64(receiptID), .text(reserved), .text(claim.user), SQLValue(claim.now)])
        } else {
            _ = try connection.execute(
                "UPDATE receipts SET user_id = $2, owner_user_id = NULL, updated_at = $3 WHERE id = $1",
                [.int64(receiptID), .text(claim.user), SQLValue(claim.now)])
        }
        _ = try connection.execute(
            """
            UPDATE transactions SET user_id = $2
            WHERE original_transaction_id IN (SELECT original_transaction_id FROM subscriptions WHERE receipt_id = $1)
            """,
            [.int64(receiptID), .text(claim.user)])
        _ = try connection.execute(
            "UPDATE subscriptions SET user_id = $2 WHERE receipt_id = $1", [.int64(receiptID), .text(claim.user)])
        _ = try connection.execute(
            """
            UPDATE adopted_purchases SET claimed_user_id = $2, claimed_at = $3, claimed_by = $4
            WHERE receipt_id = $1
            """,
            [.int64(receiptID), .text(claim.user), SQLValue(claim.now), .text(claim.method.rawValue)])
    }

    /// Records `purchase_claimed` for the user, in the subscription's state as stored (`unverified` before
    /// its first check), and queues its webhook when asked.
    private static func recordClaimed(_ receiptID: Int64, _ claim: Claim, on connection: any SQLConnection) throws {
        let receipt = try connection.execute(
            "SELECT source, bundle_id, environment, imported_product_id FROM receipts WHERE id = $1",
            [.int64(receiptID)])
        let held = try connection.execute(
            "SELECT product_id, state, expires_at, environment FROM subscriptions WHERE original_transaction_id = $1",
            [.text(claim.originalTransactionID)]
        ).first
        let event = SubscriptionEvent.purchaseClaimed(
            originalTransactionID: claim.originalTransactionID,
            productID: try held?.optionalText("product_id") ?? receipt.first?.optionalText("imported_product_id"),
            state: try held?.state("state") ?? .unverified, expiresAt: try held?.optionalDate("expires_at"),
            environment: try held?.environment("environment") ?? receipt.first?.environment("environment"))
        try recordPurchaseChange(
            event, user: claim.user, runID: claim.runID, source: try receipt.first?.optionalText("source"),
            bundleID: try receipt.first?.optionalText("bundle_id"), queueWebhooks: claim.queueWebhooks,
            at: claim.now, on: connection)
    }

    /// Records a purchase change (`purchase_unclaimed`, `purchase_claimed`) as the checks record theirs:
    /// a row of `entitlement_changes`, and of the webhook outbox when webhooks are queued.
    static func recordPurchaseChange(
        _ event: SubscriptionEvent, user: String, runID: String?, source: String?, bundleID: String?,
        queueWebhooks: Bool, at now: Date, on connection: any SQLConnection
    ) throws {
        let inserted = try connection.execute(
            """
            INSERT INTO entitlement_changes (run_id, user_id, original_transaction_id, product_id, kind, from_state,
                to_state, old_expires_at, new_expires_at, environment, occurred_at, source, bundle_id)
            VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)
            RETURNING id
            """,
            [
                SQLValue(runID), .text(user), SQLValue(event.originalTransactionID), SQLValue(event.productID),
                .text(event.kind.rawValue), .text(event.fromState.rawValue), .text(event.toState.rawValue),
                SQLValue(event.oldExpiresAt), SQLValue(event.newExpiresAt), SQLValue(event.environment?.rawValue),
                SQLValue(now), SQLValue(source), SQLValue(bundleID),
            ])
        guard let id = try inserted.first?.int64("id") else {
            throw SubscriptionStoreError.query("INSERT INTO entitlement_changes returned no id")
        }
        guard queueWebhooks else { return }
        _ = try connection.execute(
            "INSERT INTO webhook_outbox (change_id, user_id, created_at, next_attempt_at) VALUES ($1, $2, $3, $3)",
            [.int64(id), .text(user), SQLValue(now)])
    }
}
