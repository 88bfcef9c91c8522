import Foundation
import Logging
import RenewalCore
import RenewalObservability
import RenewalStorage

/// A run's work besides the receipt checks: the refund requests answered before them, the ledger's
/// history and the mass extensions followed after them. A failure there leaves the receipts' results
/// standing but is counted (`RenewalCounts.otherFailures`) and ends the run `completed_with_failures`.
extension RenewalRun {
    /// Answers the refund requests still open (`RefundRequestAnswers`) and sets the metrics that watch them;
    /// a failure of the step itself is logged, counted as one failed answer and left to the next run.
    func answerRefundRequests(into counts: inout RenewalCounts, runID: String, logger: Logger) async {
        do {
            let answers = try await RefundRequestAnswers(
                store: store,
                sources: dependencies.operatorActionSources,
                preference: configuration.refundPreference, runID: runID, now: now, logger: logger
            ).run()
            answers.count(into: &counts)
            let backlog = try await store.refundRequestBacklog(now: now())
            dependencies.metrics?.refundRequests(
                answered: answers.answered, unanswered: answers.unanswered, missed: answers.missed,
                open: backlog.open, missedLastDay: backlog.missedLastDay)
        } catch {
            counts.refundRequestsFailed += 1
            logger.error("Refund requests not answered", metadata: ["error": "\(error)"])
        }
    }

    /// After the due work (a `run`, not a dry run): Get Transaction History completes the ledger when the
    /// due work completed, and the mass extensions in progress are followed. Returns the run's status:
    /// `completed_with_failures` instead of `completed` when any of the run's other work failed.
    func followUp(after status: RenewalOutcome.Status, counts: inout RenewalCounts, logger: Logger) async
        -> RenewalOutcome.Status
    {
        if case .run = configuration.command, !configuration.dryRun,
            [.completed, .completedWithFailures].contains(status)
        {
            // The run's history allowance completes the ledger's earlier periods. What it could not record
            // is asked again next run; the run's own results stand.
            do {
                let history = try await HistoryBackfill(
                    store: store, sources: dependencies.historySources,
                    requests: configuration.historyRequestsPerRun, now: now, logger: logger
                ).run()
                counts.historyTransactions = history.transactions
                counts.historyCompleted = history.completed
                counts.historyFailed = history.failed
            } catch {
                counts.historyFailed += 1
                logger.error("Transaction history not recorded", metadata: ["error": "\(error)"])
            }
        }
        if case .run = configuration.command, !configuration.dryRun {
            // Mass renewal-date extensions in progress: Apple's status, until complete.
            do {
                let followed = try await MassExtensionFollowUp(
                    store: store, extenders: dependencies.operatorActionSources, now: now, logger: logger
                ).run()
                counts.massExtensionsCompleted = followed.completed
                counts.massExtensionsFailed = followed.failed
            } catch {
                counts.massExtensionsFailed += 1
                logger.error("Mass renewal-date extensions not followed", metadata: ["error": "\(error)"])
            }
        }
        if case .run = configuration.command, !configuration.dryRun {
            dependencies.metrics?.otherWorkFailed([
                "refund_requests": counts.refundRequestsFailed, "transaction_history": counts.historyFailed,
                "mass_extensions": counts.massExtensionsFailed, "notifications": counts.notificationsFailed,
            ])
        }
        guard status == .completed, counts.otherFailures > 0 else { return status }
        logger.warning(
            "Some of the run's work besides the receipt checks failed; see the counts",
            metadata: [
                LogKey.reason:
                    """
                refund_requests_failed \(counts.refundRequestsFailed), \
                refund_requests_missed \(counts.refundRequestsMissed), history_failed \(counts.historyFailed), \
                mass_extensions_failed \(counts.massExtensionsFailed), \
                notifications_failed \(counts.notificationsFailed)
                """
            ])
        return .completedWithFailures
    }
}
