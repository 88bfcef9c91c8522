import Foundation
import RenewalCore
import RenewalStorage

extension SQLSubscriptionStore {
    /// A verified notification whose data could not be decoded changes nothing itself; the subscription
    /// it names (found as the feed finds it: by the stored subscriptions, else by the id the receipt
    /// was imported or last asked by) is made due so the next check asks Apple instead.
    public func makeDue(afterUnreadableNotificationsAbout originalTransactionIDs: [String], now: Date)
        async throws -> Int
    {
        guard !originalTransactionIDs.isEmpty else { return 0 }
        return try await inTransaction { connection in
            var madeDue = 0
            for id in Set(originalTransactionIDs).sorted() {
                let held =
                    try connection.execute(
                        "SELECT receipt_id FROM subscriptions WHERE original_transaction_id = $1", [.text(id)]
                    ).first?.int64("receipt_id")
                    ?? connection.execute(
                        "SELECT id FROM receipts WHERE original_transaction_id = $1 ORDER BY id LIMIT 1", [.text(id)]
                    ).first?.int64("id")
                guard let receiptID = held else { continue }
                madeDue +=
                    try connection.execute(
                        """
                        UPDATE receipts SET next_check_at = $2, polling_check_at = NULL, outage_check_at = NULL
                        WHERE id = $1 AND next_check_at > $2
                        RETURNING id
                        """,
                        [.int64(receiptID), SQLValue(now)]
                    ).count
            }
            return madeDue
        }
    }
}
