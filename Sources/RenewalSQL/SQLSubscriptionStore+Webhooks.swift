import Foundation
import RenewalCore
import RenewalStorage

extension SQLSubscriptionStore: WebhookOutboxStore {
    public func claimDeliveries(owner: String, now: Date, leaseExpiresAt: Date, limit: Int) async throws
        -> [PendingDelivery]
    {
        let dialect = database.dialect
        return try await inTransaction { connection in
            // Per user, the oldest undelivered change only; it goes when due and unleased.
            let claimed = try connection.execute(
                """
                UPDATE webhook_outbox SET lease_owner = $1, lease_expires_at = $2
                WHERE change_id IN (
                    SELECT o.change_id FROM webhook_outbox o
                    WHERE o.delivered_at IS NULL AND o.failed_at IS NULL AND o.next_attempt_at <= $3
                    AND (o.lease_expires_at IS NULL OR o.lease_expires_at <= $3)
                    AND NOT EXISTS (
                        SELECT 1 FROM webhook_outbox earlier
                        WHERE earlier.user_id = o.user_id AND earlier.change_id < o.change_id
                        AND earlier.delivered_at IS NULL AND earlier.failed_at IS NULL)
                    ORDER BY o.next_attempt_at, o.change_id LIMIT $4 \(dialect.lockingClause))
                RETURNING change_id
                """,
                [.text(owner), SQLValue(leaseExpiresAt), SQLValue(now), .int64(Int64(limit))])
            let ids = try claimed.map { try $0.int64("change_id") }.sorted()
            guard !ids.isEmpty else { return [] }
            var binds = SQLBinds()
            let list = binds.list(ids.map { .int64($0) })
            return try connection.execute(
                """
                SELECT c.*, o.attempts AS outbox_attempts, o.created_at AS outbox_created_at
                FROM webhook_outbox o JOIN entitlement_changes c ON c.id = o.change_id
                WHERE o.change_id IN (\(list)) ORDER BY o.change_id
                """, binds.values
            ).map { row in
                PendingDelivery(
                    changeID: try row.int64("id"), runID: try row.optionalText("run_id"),
                    change: try Self.recordedChange(row), attempts: try row.int("outbox_attempts"),
                    createdAt: try row.date("outbox_created_at"))
            }
        }
    }

    public func recordDeliveries(_ records: [DeliveryRecord], owner: String) async throws {
        guard !records.isEmpty else { return }
        try await inTransaction { connection in
            for record in records {
                // $1 change, $2 owner, $3 the attempt's time, then the outcome's own values.
                let (set, values): (String, [SQLValue]) =
                    switch record.outcome {
                    case .delivered: ("delivered_at = $3, last_error = NULL", [])
                    case .retry(let error, let next):
                        ("next_attempt_at = $5, last_error = $4", [.text(error), SQLValue(next)])
                    case .failed(let error): ("failed_at = $3, last_error = $4", [.text(error)])
                    }
                _ = try connection.execute(
                    """
                    UPDATE webhook_outbox SET \(set), attempts = attempts + 1, last_attempt_at = $3,
                        lease_owner = NULL, lease_expires_at = NULL
                    WHERE change_id = $1 AND lease_owner = $2
                    """,
                    [.int64(record.changeID), .text(owner), SQLValue(record.at)] + values)
            }
        }
    }

    public func markEndpointGone(digest: String, url: String, at: Date) async throws {
        try await inTransaction { connection in
            _ = try connection.execute(
                """
                INSERT INTO webhook_endpoints (url_digest, url, gone_at) VALUES ($1, $2, $3)
                ON CONFLICT (url_digest) DO UPDATE SET gone_at = excluded.gone_at
                """, [.text(digest), .text(url), SQLValue(at)])
        }
    }

    public func endpointGoneAt(digest: String) async throws -> Date? {
        try await onConnection { connection in
            try connection.execute("SELECT gone_at FROM webhook_endpoints WHERE url_digest = $1", [.text(digest)])
                .first?.date("gone_at")
        }
    }

    public func deliveryStatus(now: Date) async throws -> DeliveryStatus {
        try await onConnection { connection in
            var status = DeliveryStatus()
            // The view, so PostgreSQL reads its summary of finished deliveries instead of the whole outbox.
            for row in try connection.execute("SELECT state, changes, oldest_queued_at_ms FROM webhook_deliveries", [])
            {
                let changes = try row.int("changes")
                switch try row.text("state") {
                case "delivered": status.delivered += changes
                case "failed": status.failed += changes
                default:
                    status.pending += changes
                    if let oldest = try row.optionalDate("oldest_queued_at_ms") {
                        status.oldestPendingSince = min(status.oldestPendingSince ?? oldest, oldest)
                    }
                }
            }
            status.due =
                try connection.execute(
                    """
                    SELECT COUNT(*) AS due FROM webhook_outbox
                    WHERE delivered_at IS NULL AND failed_at IS NULL AND next_attempt_at <= $1
                    """, [SQLValue(now)]
                ).first?.int("due") ?? 0
            status.recentFailures = try connection.execute(
                """
                SELECT change_id, user_id, last_error, failed_at FROM webhook_outbox
                WHERE failed_at IS NOT NULL ORDER BY failed_at DESC, change_id DESC LIMIT 20
                """, []
            ).map { row in
                DeliveryFailure(
                    changeID: try row.int64("change_id"), userID: try row.text("user_id"),
                    error: try row.optionalText("last_error") ?? "", at: try row.date("failed_at"))
            }
            status.goneAt = try connection.execute("SELECT MAX(gone_at) AS gone FROM webhook_endpoints", [])
                .first?.optionalDate("gone")
            return status
        }
    }
}
