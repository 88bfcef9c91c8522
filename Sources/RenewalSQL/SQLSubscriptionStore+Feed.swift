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
        let ordered = notifications.map { ($0, $0.facts) }.sorted { $0.1.precedes($1.1) }
        return try await inTransaction { connection in
            var result = FeedRecordResult()
            // The page's writes change the summaries once, summed.
            try AnalyticsSummaryWrites.keeping(on: connection) { summaries in
                for (notification, facts) in ordered {
                    let receiptID = try Self.receiptID(holding: notification.originalTransactionID, on: connection)
                    guard try Self.insert(notification, receiptID: receiptID, runID: runID, now: now, on: connection)
                    else { continue }
                    result.new += 1
                    result.newByType[notification.type, default: 0] += 1
                    // Core decides what the notification means; this only reads what it asks and writes the plan.
                    let plan = FeedNotificationPlan(for: facts, heldBy: receiptID, applying: context, now: now)
                    if let record = plan.record {
                        try Self.perform(
                            record, of: notification, receiptID: receiptID, runID: runID, now: now, on: connection)
                        if case .refundRequest = record { result.refundRequests += 1 }
                    }
                    switch plan.entitlement {
                    case .changesNoEntitlement, .namesNoSubscription:
                        continue
                    case .unmatched:
                        result.unmatched.append(notification)
                    case .adopt(let adoption):
                        let adopted = try Self.adopt(
                            adoption, notification: notification.uuid, runID: runID,
                            queueWebhooks: context?.queueWebhooks ?? false, on: connection, dialect: dialect)
                        if adopted.created { result.adopted += 1 }
                        if adopted.claimed { result.claimedAtAdoption += 1 }
                        if let change = adopted.change { result.purchaseChanges.append(change) }
                    case .makeDue(let receiptID, let due):
                        result.madeDue += try Self.makeDue(receiptID, due, on: connection, dialect: dialect)
                    case .weigh(let receiptID, let evidence, let context):
                        let (stored, leasedUntil) = try Self.receiptForFeed(receiptID, on: connection, dialect: dialect)
                        switch FeedNotificationPlan.weigh(
                            evidence, of: facts, stored: stored, leasedUntil: leasedUntil, context: context, now: now)
                        {
                        case .decide(let request):
                            result.applied.append(
                                try Self.decide(request, summaries: summaries, on: connection, dialect: dialect))
                        case .known:
                            result.known += 1
                        case .recheck(let reason, let due):
                            result.rechecked[reason, default: 0] += 1
                            result.madeDue += try Self.makeDue(receiptID, due, on: connection, dialect: dialect)
                        }
                    }
                }
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

    /// Writes the operator action a notification settles (`FeedNotificationPlan.Record`).
    private static func perform(
        _ record: FeedNotificationPlan.Record, of notification: FeedNotificationRecord, receiptID: Int64?,
        runID: String?, now: Date, on connection: any SQLConnection
    ) throws {
        switch record {
        case .refundRequest(let transactionID, let requestedAt, let answerBy):
            try recordRefundRequest(
                notification, transactionID: transactionID, requestedAt: requestedAt, answerBy: answerBy,
                receiptID: receiptID, runID: runID, now: now, on: connection)
        case .extensionsConfirmed(let originalTransactionID, let at):
            try confirmExtensions(of: originalTransactionID, at: at, on: connection)
        case .massExtensionComplete(let summary, let at):
            try completeMassExtension(summary, at: at, on: connection)
        case .refundOutcome(let outcome):
            try recordRefundOutcome(outcome, on: connection)
        }
    }

    /// Makes the receipt due as `due` says (`MakeDue.applies`), on its row locked. Returns 1 when it
    /// was made due.
    private static func makeDue(
        _ receiptID: Int64, _ due: MakeDue, on connection: any SQLConnection, dialect: SQLDialect
    ) throws -> Int {
        guard
            let row = try connection.execute(
                "SELECT next_check_at, last_verified_at FROM receipts WHERE id = $1 \(dialect.rowLockClause)",
                [.int64(receiptID)]
            ).first,
            due.applies(
                nextCheckAt: try row.date("next_check_at"), lastVerifiedAt: try row.optionalDate("last_verified_at"))
        else { return 0 }
        _ = try connection.execute(
            "UPDATE receipts SET next_check_at = $2, polling_check_at = NULL, outage_check_at = NULL WHERE id = $1",
            [.int64(receiptID), SQLValue(due.at)])
        return 1
    }

    /// The receipt a notification's signed data is weighed against, locked, with its subscriptions and
    /// lease; nil when the row is gone.
    private static func receiptForFeed(_ receiptID: Int64, on connection: any SQLConnection, dialect: SQLDialect)
        throws -> (StoredReceipt?, leasedUntil: Date?)
    {
        let rows = try connection.execute(
            "SELECT \(receiptColumns), lease_expires_at FROM receipts WHERE id = $1 \(dialect.rowLockClause)",
            [.int64(receiptID)])
        guard let row = rows.first else { return (nil, nil) }
        var receipt = try Self.receipt(from: row)
        receipt.subscriptions = try subscriptions(ofReceipts: [receiptID], on: connection)[receiptID] ?? []
        return (receipt, try row.optionalDate("lease_expires_at"))
    }

    /// Takes and writes the decision for a notification's signed data, in the transaction that records
    /// it: the same decision, rows, change events and webhook outbox as a check's.
    private static func decide(
        _ request: EntitlementDecision.Request, summaries: AnalyticsSummaryWrites, on connection: any SQLConnection,
        dialect: SQLDialect
    ) throws -> AppliedNotification {
        let (claimed, owners) = try claim(request.claims, forReceipt: request.receipt.id, on: connection)
        let decision = request.decide(owners: owners)
        try write(decision.update, summaries: summaries, on: connection, dialect: dialect)
        try giveBack(claimed, unusedBy: decision.update, on: connection)
        return AppliedNotification(receipt: request.receipt, decision: decision)
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

    /// Whether the stream's feed shows activity since `since`, as Core's `FeedActivityWindow` defines it:
    /// storage reads its bounds and kinds, and asks only whether one row meets them.
    public func feedActivity(_ stream: FeedStream, since: Date) async throws -> FeedActivity {
        let window = FeedActivityWindow(since: since)
        return try await onConnection { connection in
            let env = SQLValue.text(stream.environment.rawValue)
            let pulledSince = try connection.execute(
                "SELECT pulled_since FROM feed_cursors WHERE environment = $1", [.text(stream.key)]
            ).first?.optionalDate("pulled_since")
            var binds = SQLBinds()
            let ofApp = stream.app.map { " AND bundle_id = \(binds.add(.text($0)))" } ?? ""
            let ofStream = "environment = \(binds.add(env))" + ofApp
            var notifiedBinds = binds
            let notified = try connection.execute(
                """
                SELECT 1 AS found FROM feed_notifications
                WHERE \(ofStream) AND signed_at >= \(notifiedBinds.add(SQLValue(window.notifiedSince))) LIMIT 1
                """, notifiedBinds.values)
            guard notified.isEmpty else {
                return FeedActivity(pulledSince: pulledSince, notified: true, renewed: false)
            }
            let kinds = window.renewalKinds.map { "'\($0.rawValue)'" }.joined(separator: ", ")
            let renewed = try connection.execute(
                """
                SELECT 1 AS found FROM entitlement_changes
                WHERE \(ofStream) AND kind IN (\(kinds))
                AND occurred_at >= \(binds.add(SQLValue(window.recordedSince)))
                AND old_expires_at >= \(binds.add(SQLValue(window.tookEffectSince))) LIMIT 1
                """,
                binds.values)
            return FeedActivity(pulledSince: pulledSince, notified: false, renewed: !renewed.isEmpty)
        }
    }

    /// Core's `PollingFallback` over a whole stream, as one set-based statement per table (a stream can
    /// hold millions of receipts): each check moves to the earlier of itself and the polling check
    /// (`nextCheck`), only ever earlier (`moves`), and the polling check is dropped.
    /// `FeedSilenceStoreTests` holds this SQL to Core's function on both databases.
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

extension FeedNotificationRecord {
    /// What the feed's rules (`FeedNotificationPlan`) see of it.
    fileprivate var facts: FeedNotificationFacts {
        FeedNotificationFacts(
            uuid: uuid, type: type, subtype: subtype, originalTransactionID: originalTransactionID,
            transactionID: transactionID, signedAt: signedAt, evidence: evidence, extensionSummary: extensionSummary)
    }
}
