import Foundation
import Logging
import RenewalCore
import RenewalObservability
import RenewalReports
import RenewalStorage

/// Counting, logging and reporting what the run wrote: the report file, the metrics, the progress
/// line and the per-receipt log lines.
extension RunExecution {
    /// Counts, logs and reports the results of a written batch.
    mutating func record(_ batch: [PendingResult], _ results: [EntitlementDecision?]) async throws {
        for ((receipt, _), decision) in zip(batch, results) {
            guard let decision else {
                recordLeaseLost(receipt)
                continue
            }
            try await record(receipt, decision)
        }
    }

    /// One line per dead process found, naming where it ran.
    static func log(_ recovered: RecoveredWork, logger: Logger) {
        for abandoned in recovered.abandonedRuns {
            logger.warning(
                "A run whose process died was marked abandoned; its leases were taken back",
                metadata: [
                    LogKey.abandonedRunID: "\(abandoned.runID)", LogKey.abandonedHost: "\(abandoned.host)",
                    LogKey.abandonedPID: "\(abandoned.processID)",
                    LogKey.abandonedWorker: "\(abandoned.workerID ?? "unknown")",
                ])
        }
        if recovered.releasedLeases > 0 {
            logger.notice(
                "Took back leases held by dead processes", metadata: [LogKey.leases: "\(recovered.releasedLeases)"])
        }
    }

    /// The row's lease passed to another worker before this result could be written: nothing was
    /// written (the other worker's check stands), and the report counts it.
    mutating func recordLeaseLost(_ receipt: StoredReceipt) {
        counts.leaseLost += 1
        dependencies.metrics?.leaseWasLost()
        logger.debug(
            "Lease lost before the result was written; another worker's check stands",
            metadata: [
                LogKey.receiptID: "\(receipt.id)", LogKey.userID: "\(receipt.userID)",
            ])
    }

    /// Counts, logs and reports one written decision.
    mutating func record(_ receipt: StoredReceipt, _ check: EntitlementDecision) async throws {
        counts.checked += 1
        var metadata: Logger.Metadata = [LogKey.receiptID: "\(receipt.id)", LogKey.userID: "\(receipt.userID)"]
        switch check.outcome {
        case .verified, .invalid:
            if check.outcome == .invalid { counts.invalid += 1 }
            if check.changes.isEmpty { counts.unchanged += 1 } else { counts.receiptsChanged += 1 }
            counts.changed += check.changes.count
            if check.update.migrated {
                counts.migrated += 1
                metadata[LogKey.migrated] = "server_api"
            }
            metadata[LogKey.changes] = "\(check.changes.map(\.kind.rawValue).joined(separator: ","))"
            logger.debug("Verified receipt", metadata: metadata)
        case .failed:
            counts.failed += 1
            metadata[LogKey.reason] = "\(check.failure?.reason ?? .unknown)"
            logger.debug("Receipt could not be verified; state kept, retried later", metadata: metadata)
        }
        counts.conflicts += check.update.conflicts.count
        var failureReason: FailureReason?
        if case .failed = check.outcome { failureReason = check.failure?.reason ?? .unknown }
        dependencies.metrics?.receiptChecked(
            changes: check.changes.map(\.kind), failure: failureReason, conflicts: check.update.conflicts.count,
            app: check.update.bundleID)
        dependencies.progress?.receiptDone(counts: counts)
        for conflict in check.update.conflicts {
            logger.debug(
                "Subscription already owned by another user (shared_apple_id); kept the first owner",
                metadata: [
                    LogKey.userID: "\(conflict.claimantUserID)",
                    LogKey.originalTransactionID: "\(conflict.originalTransactionID)",
                    LogKey.subscriptionOwnerUserID: "\(conflict.ownerUserID)",
                ])
        }
        guard let report else { return }
        try await report.append(
            changes: check.changes, userID: receipt.userID, bundleID: check.update.bundleID,
            ownership: check.update.ownershipTypes, source: check.update.source)
        if let failure = check.failure {
            try await report.append(
                failure: failure, userID: receipt.userID, receiptID: receipt.id, bundleID: check.update.bundleID)
        }
        for conflict in check.update.conflicts {
            try await report.append(conflict: conflict)
        }
    }
}
