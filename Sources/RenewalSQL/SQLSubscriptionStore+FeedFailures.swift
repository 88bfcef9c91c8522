import Foundation
import RenewalCore
import RenewalStorage

extension SQLSubscriptionStore {
    /// A verified notification whose data could not be decoded changes nothing itself. It is recorded by
    /// its uuid in `feed_notifications` like every other (so the overlap of the next window, or `discover`
    /// reading the same history, meets it as known and does not fail again); a new one is a failure of
    /// the run in `run_failures` when the database holds the subscription it names, and that
    /// subscription (found as the feed finds it: by the stored subscriptions, else by the id the receipt
    /// was imported or last asked by) is made due so the next check asks Apple instead.
    public func recordUnreadableNotifications(_ notifications: [FeedNotificationRecord], runID: String?, now: Date)
        async throws -> UnreadableRecordResult
    {
        guard !notifications.isEmpty else { return UnreadableRecordResult() }
        return try await inTransaction { connection in
            var result = UnreadableRecordResult()
            for notification in notifications.sorted(by: { $0.uuid < $1.uuid }) {
                let held = try Self.receiptHolding(notification.originalTransactionID, on: connection)
                let inserted = try connection.execute(
                    """
                    INSERT INTO feed_notifications (notification_uuid, environment, notification_type, subtype,
                        original_transaction_id, receipt_id, signed_at, received_at, run_id, bundle_id)
                    VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
                    ON CONFLICT (notification_uuid) DO NOTHING
                    RETURNING notification_uuid
                    """,
                    [
                        .text(notification.uuid), .text(notification.environment.rawValue), .text(notification.type),
                        SQLValue(notification.subtype), SQLValue(notification.originalTransactionID),
                        held.map { .int64($0.receiptID) } ?? .null, SQLValue(notification.signedAt), SQLValue(now),
                        SQLValue(runID), SQLValue(notification.bundleID),
                    ])
                guard !inserted.isEmpty else { continue }
                result.new.append(notification)
                guard let held else { continue }
                try Self.recordUnreadable(notification, held: held, runID: runID, now: now, on: connection)
                result.madeDue +=
                    try connection.execute(
                        """
                        UPDATE receipts SET next_check_at = $2, polling_check_at = NULL, outage_check_at = NULL
                        WHERE id = $1 AND next_check_at > $2
                        RETURNING id
                        """,
                        [.int64(held.receiptID), SQLValue(now)]
                    ).count
            }
            return result
        }
    }

    /// The receipt holding the subscription `originalTransactionID` names, with its user and app.
    private static func receiptHolding(_ originalTransactionID: String?, on connection: any SQLConnection) throws
        -> (receiptID: Int64, userID: String, bundleID: String?)?
    {
        guard let id = originalTransactionID else { return nil }
        let rows =
            try connection.execute(
                """
                SELECT r.id, r.user_id, r.bundle_id FROM subscriptions s JOIN receipts r ON r.id = s.receipt_id
                WHERE s.original_transaction_id = $1
                """, [.text(id)])
        let row =
            try rows.first
            ?? connection.execute(
                "SELECT id, user_id, bundle_id FROM receipts WHERE original_transaction_id = $1 ORDER BY id LIMIT 1",
                [.text(id)]
            ).first
        guard let row else { return nil }
        return (try row.int64("id"), try row.text("user_id"), try row.optionalText("bundle_id"))
    }

    /// The failure of the run that read it, under the subscription's receipt and user.
    private static func recordUnreadable(
        _ notification: FeedNotificationRecord, held: (receiptID: Int64, userID: String, bundleID: String?),
        runID: String?, now: Date, on connection: any SQLConnection
    ) throws {
        _ = try connection.execute(
            """
            INSERT INTO run_failures (run_id, receipt_id, user_id, reason, message, occurred_at, bundle_id)
            VALUES ($1, $2, $3, $4, $5, $6, $7)
            """,
            [
                SQLValue(runID), .int64(held.receiptID), .text(held.userID),
                .text(FailureReason.notificationDataUnreadable.rawValue),
                .text(
                    """
                    Apple's verified \(notification.type) notification \(notification.uuid) has data the job cannot \
                    decode; the subscription was made due so its next check reads its state from Apple
                    """),
                SQLValue(now), SQLValue(held.bundleID ?? notification.bundleID),
            ])
    }
}
