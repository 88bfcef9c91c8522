import Foundation
import RenewalCore
import RenewalStorage

/// Statement texts built once (the store is generic, so they cannot be its static stored properties).
enum SaveSQL {
    /// Records a transaction in the ledger, or brings a known one up to date (a refund, a renewal-date
    /// extension, an upgrade, a seat refund) unless what is stored was signed later. A price, currency or
    /// storefront once known is kept when a later answer (verifyReceipt) does not give it; seats are
    /// taken from signed transactions only, and a seat refund keeps the time it was first seen.
    static let upsertTransaction = """
        INSERT INTO transactions (transaction_id, original_transaction_id, user_id, bundle_id, product_id,
            environment, ownership_type, purchased_at, expires_at, price_milliunits, currency, storefront, offer_type,
            offer_discount_type, is_trial, quantity, revoked_at, revocation_reason, revocation_type,
            revocation_percentage, transaction_reason, upgraded, origin, signed_at, recorded_at, updated_at,
            revoked_seat_quantity, seats_revoked_at)
        VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22,
            $23, $24, $25, $25, $26, $27)
        ON CONFLICT (transaction_id) DO UPDATE SET
            expires_at = excluded.expires_at, revoked_at = excluded.revoked_at,
            quantity = CASE WHEN excluded.signed_at IS NULL THEN transactions.quantity ELSE excluded.quantity END,
            revoked_seat_quantity = CASE WHEN excluded.signed_at IS NULL THEN transactions.revoked_seat_quantity
                ELSE excluded.revoked_seat_quantity END,
            seats_revoked_at = CASE WHEN excluded.signed_at IS NULL THEN transactions.seats_revoked_at
                WHEN excluded.revoked_seat_quantity IS NULL THEN NULL
                ELSE COALESCE(transactions.seats_revoked_at, excluded.seats_revoked_at) END,
            revocation_reason = excluded.revocation_reason, revocation_type = excluded.revocation_type,
            revocation_percentage = excluded.revocation_percentage, upgraded = excluded.upgraded,
            price_milliunits = COALESCE(excluded.price_milliunits, transactions.price_milliunits),
            currency = COALESCE(excluded.currency, transactions.currency),
            storefront = COALESCE(excluded.storefront, transactions.storefront),
            signed_at = COALESCE(excluded.signed_at, transactions.signed_at), updated_at = excluded.updated_at
        WHERE transactions.signed_at IS NULL OR excluded.signed_at IS NULL
            OR excluded.signed_at >= transactions.signed_at
        """

    static func values(of transaction: LedgerTransaction, of write: ReceiptUpdate, environment: AppStoreEnvironment?)
        -> [SQLValue]
    {
        values(
            of: transaction, userID: write.userID, bundleID: write.bundleID, environment: environment,
            recordedAt: write.checkedAt)
    }

    /// The statement's values for `transaction` of the user and app named, recorded at `recordedAt`.
    static func values(
        of transaction: LedgerTransaction, userID: String, bundleID: String?, environment: AppStoreEnvironment?,
        recordedAt: Date
    ) -> [SQLValue] {
        [
            .text(transaction.transactionID), .text(transaction.originalTransactionID), .text(userID),
            SQLValue(bundleID), SQLValue(transaction.productID), SQLValue(environment?.rawValue),
            SQLValue(transaction.ownershipType), SQLValue(transaction.purchasedAt), SQLValue(transaction.expiresAt),
            transaction.priceMilliunits.map(SQLValue.int64) ?? .null, SQLValue(transaction.currency),
            SQLValue(transaction.storefront), SQLValue(transaction.offerType),
            SQLValue(transaction.offerDiscountType), SQLValue(transaction.isTrial), SQLValue(transaction.quantity),
            SQLValue(transaction.revokedAt), SQLValue(transaction.revocationReason),
            SQLValue(transaction.revocationType), SQLValue(transaction.revocationPercentage),
            SQLValue(transaction.transactionReason), SQLValue(transaction.isUpgraded),
            .text(transaction.origin.rawValue), SQLValue(transaction.signedAt), SQLValue(recordedAt),
            SQLValue(transaction.revokedSeatQuantity), SQLValue(transaction.seatsRevokedAt),
        ]
    }

    /// Writes a check's outcome to its receipt row (`$1` the id). What the check did not learn (a newer
    /// receipt, the environment, a verification, the source, the original transaction id, a migration)
    /// is passed as NULL and leaves the column as it is; the app's bundle id is set once. One text for
    /// every check, so it is prepared once per connection.
    static let updateReceipt = receiptUpdate(fenced: false)

    /// `updateReceipt` for a leased check: written (and the lease released) only while the worker whose
    /// lease owner is `$19` still holds the lease.
    static let updateLeasedReceipt = receiptUpdate(fenced: true)

    private static func receiptUpdate(fenced: Bool) -> String {
        """
        UPDATE receipts SET status = $2, last_checked_at = $3, updated_at = $3, next_check_at = $4,
            polling_check_at = $5, outage_check_at = $6, consecutive_failures = $7, consecutive_malformed = $8,
            last_failure_reason = $9, rejected_since = $10, no_subscription_since = $11,
            latest_receipt = COALESCE($12, latest_receipt), environment = COALESCE($13, environment),
            last_verified_at = COALESCE($14, last_verified_at), source = COALESCE($15, source),
            original_transaction_id = COALESCE($16, original_transaction_id),
            migrated_at = COALESCE($17, migrated_at), bundle_id = COALESCE(bundle_id, $18)\(
                fenced ? ", lease_owner = NULL, lease_expires_at = NULL" : "")
        WHERE id = $1\(fenced ? " AND lease_owner = $19" : "")
        RETURNING id
        """
    }

    /// Records one dated fact (`subscription_facts`); the same fact stated again is left as recorded.
    static let insertFact = """
        INSERT INTO subscription_facts (original_transaction_id, kind, transaction_id, starts_at, ends_at, value,
            stated_at, recorded_at, source, run_id)
        VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
        ON CONFLICT DO NOTHING
        """

    /// The columns of `subscriptions`, in the order rows are written and read.
    static let columnList = """
        original_transaction_id, receipt_id, user_id, product_id, state, entitled, expires_at, auto_renew, \
        auto_renew_product_id, grace_period_expires_at, billing_retry, cancelled_at, expiration_intent, is_trial, \
        is_intro_offer, ownership_type, environment, latest_transaction_id, subscription_group_id, last_verified_at, \
        next_check_at, updated_at, apple_signed_at
        """

    /// Inserts a subscription, or updates it when this receipt owns it.
    static let upsertSubscription: String = {
        let columns = columnList.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
        let updated = columns.filter { $0 != "original_transaction_id" && $0 != "receipt_id" }
        return """
            INSERT INTO subscriptions (\(columnList))
            VALUES (\((1...columns.count).map { "$\($0)" }.joined(separator: ", ")))
            ON CONFLICT (original_transaction_id) DO UPDATE SET
                \(updated.map { "\($0) = excluded.\($0)" }.joined(separator: ", "))
            WHERE subscriptions.receipt_id = excluded.receipt_id
            """
    }()

    /// The ledger's columns a later version of a transaction is compared with (`LedgerTransaction.changes`).
    static let recordedColumns = """
        transaction_id, original_transaction_id, product_id, expires_at, price_milliunits, currency, storefront, \
        quantity, revoked_at, revocation_reason, revocation_type, revocation_percentage, upgraded, origin, \
        signed_at, revoked_seat_quantity, seats_revoked_at
        """

    /// A ledger row read with `recordedColumns`, as the transaction it records (the columns an upsert
    /// never changes are left out).
    static func recordedTransaction(from row: SQLRow) throws -> LedgerTransaction {
        let rawOrigin = try row.text("origin")
        guard let origin = LedgerTransaction.Origin(rawValue: rawOrigin) else {
            throw SubscriptionStoreError.corruptRow("transactions.origin holds an unknown origin")
        }
        return LedgerTransaction(
            transactionID: try row.text("transaction_id"),
            originalTransactionID: try row.text("original_transaction_id"),
            productID: try row.optionalText("product_id"), purchasedAt: nil,
            expiresAt: try row.optionalDate("expires_at"), priceMilliunits: try row.optionalInt64("price_milliunits"),
            currency: try row.optionalText("currency"), storefront: try row.optionalText("storefront"),
            quantity: try row.int("quantity"), revokedAt: try row.optionalDate("revoked_at"),
            revocationReason: try row.optionalInt("revocation_reason"),
            revocationType: try row.optionalText("revocation_type"),
            revocationPercentage: try row.optionalInt("revocation_percentage"), isUpgraded: try row.bool("upgraded"),
            origin: origin, signedAt: try row.optionalDate("signed_at"),
            revokedSeatQuantity: try row.optionalInt("revoked_seat_quantity"),
            seatsRevokedAt: try row.optionalDate("seats_revoked_at"))
    }
}

extension SaveSQL {
    /// `ReceiptStatus.afterReplacement` as an SQL expression over the status column `column` (for the
    /// imports' set-based updates, which replace many rows in one statement).
    static func statusAfterReplacement(of column: String) -> String {
        let changed = ReceiptStatus.allCases.filter { $0.afterReplacement != $0 }
        guard !changed.isEmpty else { return column }
        let cases = changed.map { "WHEN '\($0.rawValue)' THEN '\($0.afterReplacement.rawValue)'" }
        return "CASE \(column) \(cases.joined(separator: " ")) ELSE \(column) END"
    }
}
