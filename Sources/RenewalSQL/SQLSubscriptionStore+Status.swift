import Foundation
import RenewalCore
import RenewalStorage

extension SQLSubscriptionStore {
    public func statusPage(userID: String?, after: StatusCursor?, limit: Int) async throws -> [StatusRow] {
        guard limit > 0 else { return [] }
        let upperUser = userID == nil ? try await firstUser(pastPageOf: limit, after: after) : nil
        // One user's rows include the purchases claimed for them under an adopted row's reserved key (they
        // already had a receipts row), shown under their own id.
        let claimedFor: [Int64] = if let userID { try await claimedReceiptIDs(for: userID) } else { [] }
        var binds = SQLBinds()
        var conditions: [String] = []
        var branch: [String] = []
        var shownUser = "r.user_id"
        if let userID {
            conditions.append("user_id = \(binds.add(.text(userID)))")
            let user = binds.add(.text(userID))
            if claimedFor.isEmpty {
                branch.append("r.user_id = \(user)")
            } else {
                branch.append("(r.user_id = \(user) OR r.id IN (\(binds.list(claimedFor.map { SQLValue.int64($0) }))))")
                shownUser = "COALESCE(r.owner_user_id, r.user_id)"
            }
        }
        if let after { branch.append("r.user_id >= \(binds.add(.text(after.userID)))") }
        if let upperUser { branch.append("r.user_id < \(binds.add(.text(upperUser)))") }
        let inBranch = branch.isEmpty ? "" : branch.joined(separator: " AND ")
        if let after {
            conditions.append(
                """
                (user_id, otid) > (\(binds.add(.text(after.userID))), \
                \(binds.add(.text(after.originalTransactionID))))
                """
            )
        }
        let whereClause = conditions.isEmpty ? "" : "WHERE " + conditions.joined(separator: " AND ")
        // Receipts without subscriptions show as one placeholder row (`receipt_status` set) whose state
        // Core gives from the receipt's status (`ReceiptStatus.shownWithoutSubscriptions`). Its otid is ''
        // but for a row not verified yet that was imported by transaction id (StoreKit 2): that id.
        let sql = """
            SELECT * FROM (
                SELECT \(shownUser) AS user_id, s.original_transaction_id AS otid, s.product_id AS product_id,
                    s.state AS state, s.entitled AS entitled, s.expires_at AS expires_at, s.auto_renew AS auto_renew,
                    s.environment AS environment, s.grace_period_expires_at AS grace_period_expires_at,
                    s.last_verified_at AS last_verified_at, s.next_check_at AS next_check_at,
                    s.ownership_type AS ownership_type, r.last_failure_reason AS last_failure, r.source AS source,
                    r.bundle_id AS bundle_id, NULL AS receipt_status, NULL AS no_subscription_since,
                    \(Self.lastNotification("f.original_transaction_id = s.original_transaction_id"))
                FROM subscriptions s JOIN receipts r ON r.id = s.receipt_id
                \(inBranch.isEmpty ? "" : "WHERE " + inBranch)
                UNION ALL
                SELECT \(shownUser),
                    CASE WHEN r.status = 'unverified' THEN COALESCE(r.original_transaction_id, '') ELSE '' END,
                    r.imported_product_id, r.status, 0, NULL, NULL,
                    r.environment, NULL, r.last_verified_at, r.next_check_at, NULL, r.last_failure_reason, r.source,
                    r.bundle_id, r.status, r.no_subscription_since,
                    \(Self.lastNotification("f.receipt_id = r.id"))
                FROM receipts r WHERE NOT EXISTS (SELECT 1 FROM subscriptions s WHERE s.receipt_id = r.id)
                \(inBranch.isEmpty ? "" : "AND " + inBranch)
            ) status_rows
            \(whereClause)
            ORDER BY user_id, otid
            LIMIT \(binds.add(.int64(Int64(limit))))
            """
        let values = binds.values
        return try await onConnection { connection in
            try connection.execute(sql, values).map(StatusRow.init(statusRow:))
        }
    }
}

extension SQLSubscriptionStore {
    /// The receipts rows claimed for `userID` that keep another key (the user already held a row; see
    /// `ownerSQL`): from the subscriptions' user (indexed) and, for a row not checked yet, the small
    /// `adopted_purchases` table, so the status query stays on indexes.
    func claimedReceiptIDs(for userID: String) async throws -> [Int64] {
        try await onConnection { connection in
            try connection.execute(
                """
                SELECT s.receipt_id AS receipt_id FROM subscriptions s JOIN receipts r ON r.id = s.receipt_id
                WHERE s.user_id = $1 AND r.owner_user_id = $1
                UNION
                SELECT a.receipt_id FROM adopted_purchases a JOIN receipts r ON r.id = a.receipt_id
                WHERE a.claimed_user_id = $1 AND r.owner_user_id = $1
                ORDER BY receipt_id
                """,
                [.text(userID)]
            ).map { try $0.int64("receipt_id") }
        }
    }

    /// The columns of the newest feed notification `matching` (the latest by `signed_at`, found on the
    /// feed's indexes), for a status row.
    static func lastNotification(_ matching: String) -> String {
        let newest =
            "FROM feed_notifications f WHERE \(matching) ORDER BY f.signed_at DESC, f.notification_uuid DESC LIMIT 1"
        return """
            (SELECT f.notification_type \(newest)) AS last_notification_type,
                (SELECT f.subtype \(newest)) AS last_notification_subtype,
                (SELECT f.signed_at \(newest)) AS last_notification_at
            """
    }
}

extension SQLSubscriptionStore: RunHistoryStore {
    public func run(id: String) async throws -> RunRecord? {
        try await onConnection { connection in
            guard let row = try connection.execute("SELECT * FROM runs WHERE id = $1", [.text(id)]).first else {
                return nil
            }
            return try Self.runRecord(row)
        }
    }

    static func runRecord(_ row: SQLRow) throws -> RunRecord {
        var record = RunRecord(
            id: try row.text("id"), command: try row.text("command"), startedAt: try row.date("started_at"),
            finishedAt: try row.optionalDate("finished_at"), status: RunStatus(rawValue: try row.text("status")),
            exitCode: try row.optionalInt("exit_code"), checked: try row.int("checked"),
            changed: try row.int("changed"), unchanged: try row.int("unchanged"), failed: try row.int("failed"),
            conflicts: try row.int("conflicts"), host: try row.text("host"), processID: try row.int("process_id"),
            workerID: try row.optionalText("worker_id"), leaseLost: try row.int("lease_lost")
        )
        record.counts.receiptsChanged = try row.int("receipts_changed")
        record.counts.invalid = try row.int("invalid")
        record.counts.skipped = try row.int("skipped")
        record.counts.recoveredLeases = try row.int("recovered_leases")
        record.counts.migrated = try row.int("migrated")
        record.counts.dueAtStart = try row.optionalInt("due_at_start")
        record.counts.dueLeft = try row.int("due_left")
        record.counts.notifications = try row.int("notifications")
        record.counts.notificationsUnmatched = try row.int("notifications_unmatched")
        record.counts.notificationsApplied = try row.int("notifications_applied")
        record.counts.historyTransactions = try row.int("history_transactions")
        record.counts.historyCompleted = try row.int("history_completed")
        record.counts.refundRequests = try row.int("refund_requests")
        record.counts.refundRequestsAnswered = try row.int("refund_requests_answered")
        record.counts.refundRequestsUnanswered = try row.int("refund_requests_unanswered")
        record.counts.refundRequestsMissed = try row.int("refund_requests_missed")
        record.counts.massExtensionsCompleted = try row.int("mass_extensions_completed")
        record.counts.feedLagSeconds = try row.optionalInt("feed_lag_ms").map { Double($0) / 1000 }
        record.counts.feedFallbackText = try row.optionalText("feed_fallback")
        record.counts.appsStoppedText = try row.optionalText("apps_stopped")
        record.counts.delivered = try row.optionalInt("webhooks_delivered")
        record.counts.deliveryFailed = try row.optionalInt("webhooks_failed")
        record.counts.oldestUndeliveredSeconds = try row.optionalInt("webhook_oldest_undelivered_ms").map {
            Double($0) / 1000
        }
        return record
    }

    public func changes(ofRun runID: String) async throws -> [RecordedChange] {
        try await onConnection { connection in
            try connection.execute("SELECT * FROM entitlement_changes WHERE run_id = $1 ORDER BY id", [.text(runID)])
                .map(Self.recordedChange)
        }
    }

    public func failures(ofRun runID: String) async throws -> [RecordedFailure] {
        try await onConnection { connection in
            try connection.execute("SELECT * FROM run_failures WHERE run_id = $1 ORDER BY id", [.text(runID)])
                .map(Self.recordedFailure)
        }
    }

    public func conflicts(ofRun runID: String) async throws -> [OwnershipConflict] {
        try await onConnection { connection in
            try connection.execute("SELECT * FROM ownership_conflicts WHERE run_id = $1 ORDER BY id", [.text(runID)])
                .map { row in
                    OwnershipConflict(
                        originalTransactionID: try row.text("original_transaction_id"),
                        ownerUserID: try row.text("owner_user_id"), claimantUserID: try row.text("claimant_user_id"),
                        productID: try row.optionalText("product_id")
                    )
                }
        }
    }

    /// The user after the page's last possible user, found on the user_id index: from the cursor's
    /// user to before the (limit + 2)th, so each page reads and sorts only its own rows, never the
    /// whole table (there are at least `limit` rows past the cursor among them, one per user at
    /// least). Nil when the table ends first.
    private func firstUser(pastPageOf limit: Int, after: StatusCursor?) async throws -> String? {
        var binds = SQLBinds()
        let from = after.map { "WHERE user_id >= \(binds.add(.text($0.userID)))" } ?? ""
        let offset = binds.add(.int64(Int64(limit) + 1))
        let values = binds.values
        let rows = try await onConnection { connection in
            try connection.execute(
                "SELECT user_id FROM receipts \(from) ORDER BY user_id LIMIT 1 OFFSET \(offset)", values)
        }
        return try rows.first?.text("user_id")
    }
}

extension StatusRow {
    /// One row of the status query.
    init(statusRow row: SQLRow) throws {
        let otid = try row.text("otid")
        self.init(
            userID: try row.text("user_id"),
            originalTransactionID: otid.isEmpty ? nil : otid,
            productID: try row.optionalText("product_id"),
            state: try row.shownState(),
            entitled: try row.bool("entitled"),
            expiresAt: try row.optionalDate("expires_at"),
            autoRenew: try row.optionalBool("auto_renew"),
            environment: try row.environment("environment"),
            gracePeriodExpiresAt: try row.optionalDate("grace_period_expires_at"),
            lastVerifiedAt: try row.optionalDate("last_verified_at"),
            nextCheckAt: try row.optionalDate("next_check_at"),
            ownershipType: try row.optionalText("ownership_type"),
            lastFailure: try row.optionalText("last_failure"),
            source: try row.optionalText("source").flatMap(CheckSource.init(rawValue:)),
            lastNotification: try row.optionalText("last_notification_type").map { type in
                StatusRow.LastNotification(
                    type: type, subtype: try row.optionalText("last_notification_subtype"),
                    signedAt: try row.date("last_notification_at"))
            },
            bundleID: try row.optionalText("bundle_id")
        )
    }
}
