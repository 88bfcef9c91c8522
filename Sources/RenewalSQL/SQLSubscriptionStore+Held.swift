import Foundation
import RenewalCore
import RenewalStorage

extension SQLSubscriptionStore: HeldSubscriptionReading {
    public func heldSubscriptions(originalTransactionIDs ids: [String]) async throws -> [String: HeldSubscription] {
        guard !ids.isEmpty else { return [:] }
        return try await onConnection { connection in
            var held: [String: HeldSubscription] = [:]
            for chunk in Array(Set(ids)).sorted().chunked(by: Self.chunkSize) {
                var binds = SQLBinds()
                let list = binds.list(chunk.map { .text($0) })
                let again = binds.list(chunk.map { .text($0) })
                // A subscription row first; else the receipts row imported (or adopted) by that id, not
                // verified yet, read as the status rows read it.
                let sql = """
                    SELECT s.original_transaction_id AS otid, \(Self.heldOwner) AS owner, s.product_id AS product_id,
                        s.state AS state, s.entitled AS entitled, s.expires_at AS expires_at,
                        s.environment AS environment, r.app_account_token AS app_account_token, r.bundle_id AS bundle_id,
                        NULL AS receipt_status, NULL AS no_subscription_since
                    FROM subscriptions s JOIN receipts r ON r.id = s.receipt_id
                    WHERE s.original_transaction_id IN (\(list))
                    UNION ALL
                    SELECT r.original_transaction_id, \(Self.heldOwner), r.imported_product_id, r.status, 0, NULL,
                        r.environment, r.app_account_token, r.bundle_id, r.status, r.no_subscription_since
                    FROM receipts r
                    WHERE r.original_transaction_id IN (\(again))
                        AND NOT EXISTS (
                            SELECT 1 FROM subscriptions s WHERE s.original_transaction_id = r.original_transaction_id)
                    """
                for row in try connection.execute(sql, binds.values) {
                    let subscription = try HeldSubscription(heldRow: row)
                    if held[subscription.originalTransactionID] == nil {
                        held[subscription.originalTransactionID] = subscription
                    }
                }
            }
            return held
        }
    }

    public func recordAppAccountToken(_ token: String, originalTransactionID: String, now: Date) async throws -> Bool {
        try await inTransaction { connection in
            guard let receiptID = try Self.heldBy(originalTransactionID, on: connection) else { return false }
            _ = try connection.execute(
                "UPDATE receipts SET app_account_token = $2, updated_at = $3 WHERE id = $1",
                [.int64(receiptID), .text(token), SQLValue(now)])
            _ = try connection.execute(
                "UPDATE adopted_purchases SET app_account_token = $2 WHERE original_transaction_id = $1",
                [.text(originalTransactionID), .text(token)])
            return true
        }
    }

    /// The owning user of a held row's receipt, NULL when it is unclaimed.
    static var heldOwner: String { ownerSQL("r") }
}

extension HeldSubscription {
    init(heldRow row: SQLRow) throws {
        self.init(
            originalTransactionID: try row.text("otid"), userID: try row.optionalText("owner"),
            productID: try row.optionalText("product_id"), state: try row.shownState(),
            entitled: try row.bool("entitled"), expiresAt: try row.optionalDate("expires_at"),
            environment: try row.environment("environment"),
            appAccountToken: try row.optionalText("app_account_token"), bundleID: try row.optionalText("bundle_id"))
    }
}
