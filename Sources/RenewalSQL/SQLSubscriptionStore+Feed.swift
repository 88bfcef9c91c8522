import Foundation
import RenewalCore
import RenewalStorage

extension SQLSubscriptionStore {
    public func feedCursor(_ stream: FeedStream) async throws -> Date? {
        try await onConnection { connection in
            try connection.execute(
                "SELECT pulled_until FROM feed_cursors WHERE environment = $1", [.text(stream.key)]
            ).first?.date("pulled_until")
        }
    }

    public func recordFeedNotifications(
        _ notifications: [FeedNotificationRecord], runID: String?, now: Date,
        applying context: EntitlementDecision.Context?
    ) async throws -> FeedRecordResult {
        guard !notifications.isEmpty else { return FeedRecordResult() }
        let dialect = database.dialect
        // Apple's order: when Apple signed each one's data, whatever the page's order.
        let ordered = notifications.sorted {
            ($0.evidence?.signedAt ?? $0.signedAt, $0.uuid) < ($1.evidence?.signedAt ?? $1.signedAt, $1.uuid)
        }
        return try await inTransaction { connection in
            var result = FeedRecordResult()
            for notification in ordered {
                let receiptID = try Self.receiptID(holding: notification.originalTransactionID, on: connection)
                guard try Self.insert(notification, receiptID: receiptID, runID: runID, now: now, on: connection)
                else { continue }
                result.new += 1
                result.newByType[notification.type, default: 0] += 1
                if notification.type == "CONSUMPTION_REQUEST", let transactionID = notification.transactionID {
                    // A refund request changes no entitlement: it is recorded to be answered.
                    try Self.recordRefundRequest(
                        notification, transactionID: transactionID, receiptID: receiptID, runID: runID, now: now,
                        on: connection)
                    result.refundRequests += 1
                    continue
                }
                if notification.type == "RENEWAL_EXTENDED" {
                    try Self.confirmExtensions(notification, on: connection)
                }
                if notification.type == "RENEWAL_EXTENSION", notification.subtype == "SUMMARY" {
                    try Self.completeMassExtension(notification, on: connection)
                }
                if ["REFUND", "REFUND_DECLINED"].contains(notification.type),
                    let transactionID = notification.transactionID
                {
                    try Self.recordRefundOutcome(notification, transactionID: transactionID, on: connection)
                }
                guard let receiptID else {
                    if notification.originalTransactionID != nil { result.unmatched.append(notification) }
                    continue
                }
                if let context, let evidence = notification.evidence {
                    let application = try Self.apply(
                        evidence, toReceipt: receiptID, context: context, on: connection, dialect: dialect)
                    switch application {
                    case .applied(let applied):
                        result.applied.append(applied)
                        continue
                    case .known:
                        result.known += 1
                        continue
                    case .recheck(let reason):
                        result.rechecked[reason, default: 0] += 1
                    }
                }
                result.madeDue += try Self.makeDue(receiptID, by: notification, now: now, on: connection)
            }
            return result
        }
    }

    /// The receipt holding the subscription: by its stored subscriptions, else by the id it was
    /// imported or last asked by.
    private static func receiptID(holding originalTransactionID: String?, on connection: any SQLConnection) throws
        -> Int64?
    {
        guard let id = originalTransactionID else { return nil }
        if let held = try connection.execute(
            "SELECT receipt_id FROM subscriptions WHERE original_transaction_id = $1", [.text(id)]
        ).first?.int64("receipt_id") {
            return held
        }
        return try connection.execute(
            "SELECT id FROM receipts WHERE original_transaction_id = $1 ORDER BY id LIMIT 1", [.text(id)]
        ).first?.int64("id")
    }

    /// Records one notification; false when an earlier pull recorded it (same uuid).
    private static func insert(
        _ notification: FeedNotificationRecord, receiptID: Int64?, runID: String?, now: Date,
        on connection: any SQLConnection
    ) throws -> Bool {
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
                receiptID.map(SQLValue.int64) ?? .null, SQLValue(notification.signedAt), SQLValue(now),
                SQLValue(runID), SQLValue(notification.bundleID),
            ])
        return !inserted.isEmpty
    }

    /// Makes the receipt due now, unless it was verified well after Apple signed the notification
    /// (it then already shows the change). Returns 1 when it was made due.
    private static func makeDue(
        _ receiptID: Int64, by notification: FeedNotificationRecord, now: Date, on connection: any SQLConnection
    ) throws -> Int {
        try connection.execute(
            """
            UPDATE receipts SET next_check_at = $2, polling_check_at = NULL, outage_check_at = NULL
            WHERE id = $1 AND next_check_at > $2 AND (last_verified_at IS NULL OR last_verified_at < $3)
            RETURNING id
            """,
            [
                .int64(receiptID), SQLValue(now),
                SQLValue(notification.signedAt.addingTimeInterval(NotificationEvidence.verifiedAfterMargin)),
            ]
        ).count
    }

    private enum Application {
        case applied(AppliedNotification)
        case known
        case recheck(NotificationUse.Recheck)
    }

    /// Applies a notification's signed data to the receipt holding its subscription when it is newer
    /// than what is stored, in the transaction that records it: the same decision, rows, change
    /// events and webhook outbox as a check's.
    private static func apply(
        _ notification: NotificationEvidence, toReceipt receiptID: Int64, context: EntitlementDecision.Context,
        on connection: any SQLConnection, dialect: SQLDialect
    ) throws -> Application {
        let rows = try connection.execute(
            "SELECT \(receiptColumns), lease_expires_at FROM receipts WHERE id = $1 \(dialect.rowLockClause)",
            [.int64(receiptID)])
        guard let row = rows.first else { return .recheck(.notHeld) }
        // A worker checking it now writes what the statuses say.
        if let leased = try row.optionalDate("lease_expires_at"), leased > context.now {
            return .recheck(.beingChecked)
        }
        var receipt = try Self.receipt(from: row)
        receipt.subscriptions = try subscriptions(ofReceipts: [receiptID], on: connection)[receiptID] ?? []
        // The feed that listed it is current: the subscription follows the feed's schedule.
        var context = context
        let app = context.rules.apps.isEmpty ? nil : receipt.bundleID ?? notification.bundleID
        context.rules.feedStreams.insert(FeedStream(receipt.environment ?? notification.environment, app: app))
        switch context.rules.use(of: notification, for: receipt) {
        case .known: return .known
        case .recheck(let reason): return .recheck(reason)
        case .apply(let answer):
            let request = EntitlementDecision.Request(receipt: receipt, answer: answer, context: context)
            let (claimed, owners) = try claim(request.claims, forReceipt: receiptID, on: connection)
            let decision = request.decide(owners: owners)
            try write(decision.update, on: connection, dialect: dialect)
            try giveBack(claimed, unusedBy: decision.update, on: connection)
            return .applied(AppliedNotification(receipt: receipt, decision: decision))
        }
    }

    public func pollWhatCannotWait(_ stream: FeedStream, now: Date) async throws -> Int {
        let ofApp = stream.app == nil ? "" : "AND bundle_id = $3"
        let binds: [SQLValue] =
            [.text(stream.environment.rawValue), SQLValue(now)] + (stream.app.map { [.text($0)] } ?? [])
        return try await inTransaction { connection in
            try connection.execute(
                """
                UPDATE receipts SET next_check_at = outage_check_at, outage_check_at = NULL
                WHERE environment = $1 AND outage_check_at IS NOT NULL AND outage_check_at <= $2
                AND next_check_at > outage_check_at \(ofApp)
                RETURNING id
                """,
                binds
            ).count
        }
    }

    public func advanceFeedCursor(_ stream: FeedStream, from windowStart: Date, to pulledUntil: Date, now: Date)
        async throws
    {
        try await inTransaction { connection in
            _ = try connection.execute(
                """
                INSERT INTO feed_cursors (environment, pulled_until, updated_at, pulled_since) VALUES ($1, $2, $3, $4)
                ON CONFLICT (environment) DO UPDATE SET
                    pulled_until = CASE WHEN feed_cursors.pulled_until > excluded.pulled_until
                        THEN feed_cursors.pulled_until ELSE excluded.pulled_until END,
                    pulled_since = CASE WHEN excluded.pulled_since > feed_cursors.pulled_until
                        OR feed_cursors.pulled_since IS NULL
                        THEN excluded.pulled_since ELSE feed_cursors.pulled_since END,
                    updated_at = excluded.updated_at
                """,
                [.text(stream.key), SQLValue(pulledUntil), SQLValue(now), SQLValue(windowStart)])
        }
    }

    public func feedActivity(_ stream: FeedStream, since: Date) async throws -> FeedActivity {
        let ofApp = stream.app == nil ? "" : "AND bundle_id = $3"
        let app: [SQLValue] = stream.app.map { [.text($0)] } ?? []
        return try await onConnection { connection in
            let env = SQLValue.text(stream.environment.rawValue)
            let pulledSince = try connection.execute(
                "SELECT pulled_since FROM feed_cursors WHERE environment = $1", [.text(stream.key)]
            ).first?.optionalDate("pulled_since")
            let notified = try connection.execute(
                "SELECT 1 AS found FROM feed_notifications WHERE signed_at >= $2 AND environment = $1 \(ofApp) LIMIT 1",
                [env, SQLValue(since)] + app)
            // A renewal Apple made since then (it takes effect at the old expiry), not merely one a check
            // found since then: a late check of an old renewal says nothing about today's feed.
            guard notified.isEmpty else {
                return FeedActivity(pulledSince: pulledSince, notified: true, renewed: false)
            }
            let renewed = try connection.execute(
                """
                SELECT 1 AS found FROM entitlement_changes
                WHERE occurred_at >= $2 AND environment = $1 AND kind IN ('renewed', 'billing_recovered')
                AND old_expires_at >= $2 \(ofApp) LIMIT 1
                """,
                [env, SQLValue(since)] + app)
            return FeedActivity(pulledSince: pulledSince, notified: false, renewed: !renewed.isEmpty)
        }
    }

    public func fallBackToPolling(_ stream: FeedStream) async throws -> Int {
        let ofApp = stream.app == nil ? "" : "AND bundle_id = $2"
        let binds: [SQLValue] = [.text(stream.environment.rawValue)] + (stream.app.map { [.text($0)] } ?? [])
        return try await inTransaction { connection in
            // The subscriptions first (what `status` shows), from the receipts' polling checks.
            _ = try connection.execute(
                """
                UPDATE subscriptions SET next_check_at = (
                    SELECT r.polling_check_at FROM receipts r WHERE r.id = subscriptions.receipt_id)
                WHERE receipt_id IN (
                    SELECT id FROM receipts WHERE environment = $1 AND polling_check_at IS NOT NULL \(ofApp))
                AND next_check_at > (
                    SELECT r.polling_check_at FROM receipts r WHERE r.id = subscriptions.receipt_id)
                """,
                binds)
            return try connection.execute(
                """
                UPDATE receipts SET
                    next_check_at = CASE WHEN polling_check_at < next_check_at
                        THEN polling_check_at ELSE next_check_at END,
                    polling_check_at = NULL
                WHERE environment = $1 AND polling_check_at IS NOT NULL \(ofApp)
                RETURNING id
                """,
                binds
            ).count
        }
    }

    public func exclusively<T: Sendable>(_ name: String, _ body: @Sendable () async throws -> T) async throws -> T? {
        try await database.exclusively(name, body)
    }
}
