import Foundation
import RenewalCore

extension SQLSubscriptionStore {
    public func feedCursor(environment: AppStoreEnvironment) async throws -> Date? {
        try await onConnection { connection in
            try connection.execute(
                "SELECT pulled_until FROM feed_cursors WHERE environment = $1", [.text(environment.rawValue)]
            ).first?.date("pulled_until")
        }
    }

    public func recordFeedNotifications(_ notifications: [FeedNotificationRecord], runID: String?, now: Date)
        async throws -> FeedRecordResult
    {
        guard !notifications.isEmpty else { return FeedRecordResult() }
        return try await inTransaction { connection in
            var result = FeedRecordResult()
            for notification in notifications {
                // The receipt holding the subscription: by its stored subscriptions, else by the id
                // it was imported or last asked by.
                var receiptID: Int64?
                if let id = notification.originalTransactionID {
                    receiptID =
                        try connection.execute(
                            "SELECT receipt_id FROM subscriptions WHERE original_transaction_id = $1", [.text(id)]
                        ).first?.int64("receipt_id")
                    if receiptID == nil {
                        receiptID =
                            try connection.execute(
                                "SELECT id FROM receipts WHERE original_transaction_id = $1 ORDER BY id LIMIT 1",
                                [.text(id)]
                            ).first?.int64("id")
                    }
                }
                let inserted = try connection.execute(
                    """
                    INSERT INTO feed_notifications (notification_uuid, environment, notification_type, subtype,
                        original_transaction_id, receipt_id, signed_at, received_at, run_id)
                    VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
                    ON CONFLICT (notification_uuid) DO NOTHING
                    RETURNING notification_uuid
                    """,
                    [
                        .text(notification.uuid), .text(notification.environment.rawValue), .text(notification.type),
                        SQLValue(notification.subtype), SQLValue(notification.originalTransactionID),
                        receiptID.map(SQLValue.int64) ?? .null, SQLValue(notification.signedAt), SQLValue(now),
                        SQLValue(runID),
                    ])
                guard !inserted.isEmpty else { continue }
                result.new += 1
                result.newByType[notification.type, default: 0] += 1
                guard let receiptID else {
                    if notification.originalTransactionID != nil { result.unmatched.append(notification) }
                    continue
                }
                let due = try connection.execute(
                    "UPDATE receipts SET next_check_at = $2 WHERE id = $1 AND next_check_at > $2 RETURNING id",
                    [.int64(receiptID), SQLValue(now)])
                result.madeDue += due.count
            }
            return result
        }
    }

    public func advanceFeedCursor(environment: AppStoreEnvironment, to pulledUntil: Date, now: Date) async throws {
        try await inTransaction { connection in
            _ = try connection.execute(
                """
                INSERT INTO feed_cursors (environment, pulled_until, updated_at) VALUES ($1, $2, $3)
                ON CONFLICT (environment) DO UPDATE SET
                    pulled_until = CASE WHEN feed_cursors.pulled_until > excluded.pulled_until
                        THEN feed_cursors.pulled_until ELSE excluded.pulled_until END,
                    updated_at = excluded.updated_at
                """,
                [.text(environment.rawValue), SQLValue(pulledUntil), SQLValue(now)])
        }
    }
}
