import Foundation
import RenewalCore
import RenewalStorage

extension SQLSubscriptionStore {
    public func recoverAbandonedWork(except workerID: String, now: Date) async throws -> RecoveredWork {
        let database = self.database
        return try await inTransaction { connection in
            let running = try connection.execute(
                """
                SELECT id, worker_id, host, process_id, started_at FROM runs
                WHERE status = 'running' AND (worker_id IS NULL OR worker_id <> $1)
                ORDER BY started_at, id
                """,
                [.text(workerID)])
            var recovered = RecoveredWork()
            for row in running {
                let owner = try row.optionalText("worker_id")
                if !database.runLockOwnsEveryLease {
                    // A row from before version 3 names no worker: its liveness cannot be proven either way.
                    guard let owner, try !database.workerIsAlive(owner, on: connection) else { continue }
                }
                let run = RecoveredWork.AbandonedRun(
                    runID: try row.text("id"), workerID: owner, host: try row.text("host"),
                    processID: try row.int("process_id"), startedAt: try row.date("started_at"))
                _ = try connection.execute(
                    "UPDATE runs SET status = 'abandoned', finished_at = $2 WHERE id = $1 AND status = 'running'",
                    [.text(run.runID), SQLValue(now)])
                recovered.abandonedRuns.append(run)
                if let owner {
                    recovered.releasedLeases += try connection.execute(
                        """
                        UPDATE receipts SET lease_owner = NULL, lease_expires_at = NULL
                        WHERE lease_owner = $1 RETURNING id
                        """,
                        [.text(owner)]
                    ).count
                }
            }
            if database.runLockOwnsEveryLease {
                // The run lock proves that whoever wrote any other lease is gone.
                recovered.releasedLeases += try connection.execute(
                    """
                    UPDATE receipts SET lease_owner = NULL, lease_expires_at = NULL
                    WHERE lease_owner IS NOT NULL AND lease_owner <> $1 RETURNING id
                    """,
                    [.text(workerID)]
                ).count
            }
            return recovered
        }
    }

    public func releaseEveryLease(of owner: String) async throws -> Int {
        try await inTransaction { connection in
            try connection.execute(
                "UPDATE receipts SET lease_owner = NULL, lease_expires_at = NULL WHERE lease_owner = $1 RETURNING id",
                [.text(owner)]
            ).count
        }
    }

    public func countDue(asOf: Date, unleasedAt now: Date) async throws -> Int {
        try await onConnection { connection in
            let rows = try connection.execute(
                """
                SELECT COUNT(*) AS due FROM receipts
                WHERE next_check_at <= $1 AND (lease_owner IS NULL OR lease_expires_at <= $2)
                """,
                [SQLValue(asOf), SQLValue(now)])
            return try rows.first?.int("due") ?? 0
        }
    }

    public func countWithoutReceipt() async throws -> Int {
        try await onConnection { connection in
            let rows = try connection.execute("SELECT COUNT(*) AS n FROM receipts WHERE latest_receipt = ''", [])
            return try rows.first?.int("n") ?? 0
        }
    }
}
