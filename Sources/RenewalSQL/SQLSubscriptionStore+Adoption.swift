import Foundation
import RenewalCore
import RenewalStorage

extension SQLSubscriptionStore {
    /// What adopting one purchase did.
    struct Adopted {
        var created = false
        var claimed = false
        /// The change recorded for it.
        var change: PurchaseChange?
    }

    /// Writes `adoption` in the transaction recording its notification (docs/design.md §7): the purchase in
    /// `adopted_purchases`, a receipts row under its reserved key, read by the App Store Server API and due
    /// now, and a `purchase_unclaimed` change; or, when its `appAccountToken` maps to a user, the row claimed
    /// for that user and a `purchase_claimed` change instead. A purchase adopted already is left as it is.
    static func adopt(
        _ adoption: PurchaseAdoption, notification uuid: String, runID: String?, queueWebhooks: Bool,
        on connection: any SQLConnection, dialect: SQLDialect
    ) throws -> Adopted {
        let id = adoption.originalTransactionID
        guard
            try connection.execute(
                "SELECT original_transaction_id FROM adopted_purchases WHERE original_transaction_id = $1", [.text(id)]
            ).isEmpty
        else { return Adopted() }
        let inserted = try connection.execute(
            """
            INSERT INTO receipts (user_id, latest_receipt, imported_product_id, status, next_check_at,
                consecutive_failures, consecutive_malformed, created_at, updated_at, original_transaction_id,
                app_account_token, environment, source, bundle_id)
            VALUES ($1, '', $2, 'unverified', $3, 0, 0, $3, $3, $4, $5, $6, 'server_api', $7)
            RETURNING id
            """,
            [
                .text(adoption.userKey), SQLValue(adoption.productID), SQLValue(adoption.at), .text(id),
                SQLValue(adoption.appAccountToken), .text(adoption.environment.rawValue), SQLValue(adoption.bundleID),
            ])
        guard let receiptID = try inserted.first?.int64("id") else {
            throw SubscriptionStoreError.query("INSERT INTO receipts returned no id for an adopted purchase")
        }
        _ = try connection.execute(
            """
            INSERT INTO adopted_purchases (original_transaction_id, receipt_id, bundle_id, environment, product_id,
                app_account_token, notification_uuid, adopted_at, run_id)
            VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
            """,
            [
                .text(id), .int64(receiptID), SQLValue(adoption.bundleID), .text(adoption.environment.rawValue),
                SQLValue(adoption.productID), SQLValue(adoption.appAccountToken), .text(uuid), SQLValue(adoption.at),
                SQLValue(runID),
            ])
        if let token = adoption.appAccountToken, let user = try userOf(token: token, on: connection) {
            let claim = Claim(
                originalTransactionID: id, user: user, method: .token, runID: runID, queueWebhooks: queueWebhooks,
                now: adoption.at)
            if case .success = try perform(claim, reassign: false, on: connection, dialect: dialect) {
                let event = SubscriptionEvent.purchaseClaimed(
                    originalTransactionID: id, productID: adoption.productID, state: .unverified, expiresAt: nil,
                    environment: adoption.environment)
                return Adopted(
                    created: true, claimed: true,
                    change: PurchaseChange(event: event, userID: user, bundleID: adoption.bundleID))
            }
        }
        try recordPurchaseChange(
            .purchaseUnclaimed(adoption), user: adoption.userKey, runID: runID,
            source: CheckSource.serverAPI.rawValue, bundleID: adoption.bundleID, queueWebhooks: queueWebhooks,
            at: adoption.at, on: connection)
        return Adopted(
            created: true, claimed: false,
            change: PurchaseChange(
                event: .purchaseUnclaimed(adoption), userID: adoption.userKey, bundleID: adoption.bundleID))
    }

    /// The user the app registered `token` for, if any.
    static func userOf(token: String, on connection: any SQLConnection) throws -> String? {
        try connection.execute(
            "SELECT user_id FROM app_account_tokens WHERE app_account_token = $1", [.text(token)]
        ).first?.text("user_id")
    }
}
