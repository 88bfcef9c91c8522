import Foundation
import RenewalCore
import RenewalStorage

/// The `runs` table: a run recorded as it starts and again as it ends.
extension SQLSubscriptionStore {
    public func beginRun(_ run: RunRecord) async throws {
        try await inTransaction { connection in
            _ = try connection.execute(
                // Idempotent, so a retry after a lost COMMIT finds the row already there.
                """
                INSERT INTO runs (\(Self.runColumns)) VALUES (\(Self.placeholders(Self.runValues(of: run).count)))
                ON CONFLICT (id) DO NOTHING
                """,
                Self.runValues(of: run)
            )
        }
    }

    public func finishRun(_ run: RunRecord) async throws {
        let updated = Self.runColumns.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter {
            $0 != "id"
        }
        try await inTransaction { connection in
            _ = try connection.execute(
                """
                INSERT INTO runs (\(Self.runColumns)) VALUES (\(Self.placeholders(Self.runValues(of: run).count)))
                ON CONFLICT (id) DO UPDATE SET \(updated.map { "\($0) = excluded.\($0)" }.joined(separator: ", "))
                """,
                Self.runValues(of: run)
            )
        }
    }

    private static var runColumns: String {
        """
        id, command, started_at, finished_at, status, exit_code, checked, changed, unchanged, failed, conflicts, \
        host, process_id, worker_id, lease_lost, receipts_changed, invalid, skipped, recovered_leases, due_at_start, \
        due_left, migrated, notifications, notifications_unmatched, feed_lag_ms, feed_fallback, webhooks_delivered, \
        webhooks_failed, webhook_oldest_undelivered_ms, apps_stopped, notifications_applied, history_transactions, \
        history_completed, refund_requests, refund_requests_answered, refund_requests_unanswered, refund_requests_missed, \
        mass_extensions_completed
        """
    }

    private static func runValues(of run: RunRecord) -> [SQLValue] {
        [
            .text(run.id), .text(run.command), SQLValue(run.startedAt), SQLValue(run.finishedAt),
            .text(run.status.rawValue),
            SQLValue(run.exitCode), SQLValue(run.checked), SQLValue(run.changed), SQLValue(run.unchanged),
            SQLValue(run.failed), SQLValue(run.conflicts), .text(run.host), SQLValue(run.processID),
            SQLValue(run.workerID), SQLValue(run.leaseLost), SQLValue(run.counts.receiptsChanged),
            SQLValue(run.counts.invalid),
            SQLValue(run.counts.skipped), SQLValue(run.counts.recoveredLeases), SQLValue(run.counts.dueAtStart),
            SQLValue(run.counts.dueLeft), SQLValue(run.counts.migrated), SQLValue(run.counts.notifications),
            SQLValue(run.counts.notificationsUnmatched),
            run.counts.feedLagSeconds.map { SQLValue.int64(Int64(($0 * 1000).rounded())) } ?? .null,
            SQLValue(run.counts.feedFallbackText), SQLValue(run.counts.delivered), SQLValue(run.counts.deliveryFailed),
            run.counts.oldestUndeliveredSeconds.map { SQLValue.int64(Int64(($0 * 1000).rounded())) } ?? .null,
            SQLValue(run.counts.appsStoppedText), SQLValue(run.counts.notificationsApplied),
            SQLValue(run.counts.historyTransactions), SQLValue(run.counts.historyCompleted),
            SQLValue(run.counts.refundRequests), SQLValue(run.counts.refundRequestsAnswered),
            SQLValue(run.counts.refundRequestsUnanswered), SQLValue(run.counts.refundRequestsMissed),
            SQLValue(run.counts.massExtensionsCompleted),
        ]
    }

    /// `$1, $2, … $count`.
    static func placeholders(_ count: Int) -> String {
        (1...max(count, 1)).map { "$\($0)" }.joined(separator: ", ")
    }
}
