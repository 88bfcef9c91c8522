import Foundation
import RenewalCore
import RenewalStorage

extension SQLSubscriptionStore {
    public func claimRefundRequests(limit: Int, now: Date, claimedUntil: Date, runID: String?) async throws
        -> [RefundRequest]
    {
        guard limit > 0 else { return [] }
        // On the partial index of the requests still to answer; PostgreSQL skips the rows another worker is
        // claiming at this moment, SQLite has one writer. A claim whose run is no longer `running` (it
        // ended, or a later run proved it dead and marked it `abandoned`) is taken at once.
        // The pick is a materialized CTE, evaluated once: as a plain `IN (SELECT … LIMIT … SKIP LOCKED)`,
        // PostgreSQL may plan the subquery on the inner side of a semi-join and rescan it per row, and each
        // rescan skips the row this same statement just updated, so a claim of one took every pending request.
        let claim = """
            WITH picked AS MATERIALIZED (
                SELECT q.notification_uuid FROM refund_requests q
                WHERE \(Self.column("q.state", in: RefundRequests.open)) AND q.next_attempt_at <= $1
                    AND (q.claimed_until IS NULL OR q.claimed_until <= $1
                        OR EXISTS (SELECT 1 FROM runs r WHERE r.id = q.run_id AND r.status <> 'running'))
                ORDER BY q.answer_by, q.notification_uuid LIMIT $3 \(database.dialect.lockingClause))
            UPDATE refund_requests SET claimed_until = $2, run_id = $4
            WHERE notification_uuid IN (SELECT notification_uuid FROM picked)
            RETURNING notification_uuid
            """
        return try await inTransaction { connection in
            let claimed = try connection.execute(
                claim, [SQLValue(now), SQLValue(claimedUntil), .int64(Int64(limit)), SQLValue(runID)]
            ).map { try $0.text("notification_uuid") }
            return try claimed.compactMap { uuid in
                try connection.execute(Self.refundRequestQuery, [.text(uuid)]).first.map(Self.refundRequest)
            }.sorted { ($0.answerBy, $0.notificationUUID) < ($1.answerBy, $1.notificationUUID) }
        }
    }

    /// A request with what the job knows to answer it: the user's recorded consent, whether the job held
    /// the subscription entitled during the period, and whether the customer had a free trial first.
    private static var refundRequestQuery: String {
        """
        SELECT q.*, c.consented AS consented, c.delivery_status AS app_delivery_status,
            c.consumption_percentage AS app_consumption_percentage,
            (SELECT COUNT(*) FROM subscriptions s WHERE s.original_transaction_id = q.original_transaction_id
                AND s.last_verified_at IS NOT NULL
                AND (q.period_start IS NULL OR s.expires_at IS NULL OR s.expires_at > q.period_start)
                AND (s.cancelled_at IS NULL OR s.cancelled_at > q.requested_at)) AS delivered,
            (SELECT COUNT(*) FROM transactions t WHERE t.original_transaction_id = q.original_transaction_id
                AND t.is_trial = 1 AND (q.period_start IS NULL OR t.purchased_at < q.period_start)) AS trials
        FROM refund_requests q LEFT JOIN consumption_consents c ON c.user_id = q.user_id
        WHERE q.notification_uuid = $1
        """
    }

    private static func refundRequest(_ row: SQLRow) throws -> RefundRequest {
        RefundRequest(
            notificationUUID: try row.text("notification_uuid"), transactionID: try row.text("transaction_id"),
            originalTransactionID: try row.optionalText("original_transaction_id"),
            userID: try row.optionalText("user_id"), bundleID: try row.optionalText("bundle_id"),
            environment: try row.environment("environment") ?? .production, reason: try row.optionalText("reason"),
            requestedAt: try row.date("requested_at"), answerBy: try row.date("answer_by"),
            periodStart: try row.optionalDate("period_start"), periodEnd: try row.optionalDate("period_end"),
            consented: try row.optionalInt("consented").map { $0 == 1 },
            delivered: try row.int("delivered") > 0, hadTrial: try row.int("trials") > 0,
            attempts: try row.int("attempts"), appDeliveryStatus: try row.optionalText("app_delivery_status"),
            appConsumptionPercentage: try row.optionalInt("app_consumption_percentage"))
    }

    public func recordRefundRequest(_ request: RefundRequest, result: RefundRequestResult, runID: String?)
        async throws
    {
        let (sql, values): (String, [SQLValue])
        let key = SQLValue.text(request.notificationUUID)
        switch result {
        case .answered(let sent, let at):
            sql = """
                UPDATE refund_requests SET state = 'answered', answered_at = $2, sent = $3, apple_status = 202,
                    apple_error_code = NULL, last_error = NULL, attempts = attempts + 1, claimed_until = NULL,
                    next_attempt_at = NULL, run_id = $4
                WHERE notification_uuid = $1
                """
            values = [key, SQLValue(at), .text(sent), SQLValue(runID)]
        case .noConsent:
            sql = """
                UPDATE refund_requests SET state = 'no_consent', claimed_until = NULL, next_attempt_at = NULL,
                    last_error = 'no consumption_consent recorded for the user', run_id = $2
                WHERE notification_uuid = $1
                """
            values = [key, SQLValue(runID)]
        case .rejected(let status, let code, let reason, let sent, _):
            sql = """
                UPDATE refund_requests SET state = 'rejected', apple_status = $2, apple_error_code = $3,
                    last_error = $4, sent = $5, attempts = attempts + 1, claimed_until = NULL, next_attempt_at = NULL,
                    run_id = $6
                WHERE notification_uuid = $1
                """
            values = [key, SQLValue(status), SQLValue(code), .text(reason), .text(sent), SQLValue(runID)]
        case .retry(let reason, let retryAt):
            sql = """
                UPDATE refund_requests SET attempts = attempts + 1, last_error = $2, next_attempt_at = $3,
                    claimed_until = NULL, run_id = $4
                WHERE notification_uuid = $1
                """
            values = [key, .text(reason), SQLValue(retryAt), SQLValue(runID)]
        case .released:
            sql = "UPDATE refund_requests SET claimed_until = NULL WHERE notification_uuid = $1"
            values = [key]
        case .missed(let reason, _):
            sql = """
                UPDATE refund_requests SET state = 'missed', last_error = COALESCE($2, last_error),
                    claimed_until = NULL, next_attempt_at = NULL, run_id = $3
                WHERE notification_uuid = $1
                """
            values = [key, SQLValue(reason), SQLValue(runID)]
        }
        try await inTransaction { connection in _ = try connection.execute(sql, values) }
    }

    public func refundRequestBacklog(now: Date) async throws -> RefundRequestBacklog {
        try await onConnection { connection in
            // Open and missed as Core's `RefundRequests.isOpen` and `isMissed` say, over the last day.
            let row = try connection.execute(
                """
                SELECT (SELECT COUNT(*) FROM refund_requests
                        WHERE \(Self.column("state", in: RefundRequests.open)) AND answer_by > $1) AS open,
                    (SELECT COUNT(*) FROM refund_requests WHERE answer_by > $2 AND answer_by <= $1
                        AND \(Self.column("state", in: RefundRequests.unanswered))) AS missed
                """, [SQLValue(now), SQLValue(now.addingTimeInterval(-RefundRequests.missedWindow))]
            ).first
            return RefundRequestBacklog(open: try row?.int("open") ?? 0, missedLastDay: try row?.int("missed") ?? 0)
        }
    }

    /// Records a `CONSUMPTION_REQUEST` read from the feed (once: its uuid is the key), to be answered by
    /// `answerBy` (`FeedNotificationPlan`: 12 hours after Apple signed it).
    static func recordRefundRequest(
        _ notification: FeedNotificationRecord, transactionID: String, requestedAt: Date, answerBy: Date,
        receiptID: Int64?, runID: String?, now: Date, on connection: any SQLConnection
    ) throws {
        var userID: String?
        var bundleID = notification.bundleID
        if let receiptID,
            let row = try connection.execute(
                "SELECT user_id, bundle_id FROM receipts WHERE id = $1", [.int64(receiptID)]
            ).first
        {
            userID = try row.text("user_id")
            bundleID = try row.optionalText("bundle_id") ?? bundleID
        }
        _ = try connection.execute(
            """
            INSERT INTO refund_requests (notification_uuid, transaction_id, original_transaction_id, user_id, bundle_id,
                environment, product_id, reason, requested_at, answer_by, period_start, period_end, state, attempts,
                next_attempt_at, recorded_at, run_id)
            VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, 'pending', 0, $13, $13, $14)
            ON CONFLICT (notification_uuid) DO NOTHING
            """,
            [
                .text(notification.uuid), .text(transactionID), SQLValue(notification.originalTransactionID),
                SQLValue(userID), SQLValue(bundleID), .text(notification.environment.rawValue),
                SQLValue(notification.productID), SQLValue(notification.consumptionRequestReason),
                SQLValue(requestedAt), SQLValue(answerBy),
                SQLValue(notification.periodStart), SQLValue(notification.periodEnd), SQLValue(now), SQLValue(runID),
            ])
    }

    /// Records Apple's decision (`REFUND`, `REFUND_DECLINED`) on the open requests about its transaction
    /// made before it.
    static func recordRefundOutcome(_ outcome: RefundOutcome, on connection: any SQLConnection) throws {
        _ = try connection.execute(
            """
            UPDATE refund_requests SET outcome = $2, outcome_at = $3, revocation_type = $4, revocation_percentage = $5
            WHERE transaction_id = $1 AND outcome IS NULL AND requested_at <= $3
            """,
            [
                .text(outcome.transactionID), .text(outcome.kind.rawValue), SQLValue(outcome.at),
                SQLValue(outcome.revocationType), SQLValue(outcome.revocationPercentage),
            ])
    }

    /// Keeps each line's `consumption_consent`, `consumption_delivery_status` and `consumption_percentage`
    /// for its user, in line order (a later line wins; a field a line leaves out stays as it was).
    static func recordConsents(_ items: [ReceiptImport], now: Date, on connection: any SQLConnection) throws {
        for item in items
        where item.consumptionConsent != nil || item.consumptionDeliveryStatus != nil
            || item.consumptionPercentage != nil
        {
            _ = try connection.execute(
                """
                INSERT INTO consumption_consents (user_id, consented, delivery_status, consumption_percentage,
                    updated_at)
                VALUES ($1, $2, $3, $4, $5)
                ON CONFLICT (user_id) DO UPDATE SET
                    consented = COALESCE(excluded.consented, consumption_consents.consented),
                    delivery_status = COALESCE(excluded.delivery_status, consumption_consents.delivery_status),
                    consumption_percentage = COALESCE(excluded.consumption_percentage,
                        consumption_consents.consumption_percentage),
                    updated_at = excluded.updated_at
                """,
                [
                    .text(item.userID), SQLValue(item.consumptionConsent), SQLValue(item.consumptionDeliveryStatus),
                    SQLValue(item.consumptionPercentage), SQLValue(now),
                ])
        }
    }
}
