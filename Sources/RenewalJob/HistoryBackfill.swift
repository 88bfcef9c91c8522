import Foundation
import Logging
import RenewalAppleAPI
import RenewalCore
import RenewalStorage

/// Completes the ledger with Get Transaction History after a run's due work: for each subscription not
/// completed yet, the pages from its stored revision on, oldest first, each page recorded with the
/// revision to resume from in one transaction. At most `requests` requests a run, drawn from the same
/// request budget as every Server API call, so the backfill spreads over runs and never delays a check.
struct HistoryBackfill {
    let store: any SubscriptionStore
    /// By bundle id; the nil key is the one app's.
    let sources: [String?: any TransactionHistory]
    let requests: Int
    let now: @Sendable () -> Date
    let logger: Logger

    struct Outcome {
        var requests = 0
        var transactions = 0
        var completed = 0
        /// Reads that failed: a page Apple did not give (an outage, a rate limit) or refused in part.
        var failed = 0
        /// Why the backfill stopped early (an outage, a rate limit), for the log.
        var stoppedBy: AppleAPIError?
    }

    /// How long a claim keeps other workers off a subscription; a worker that dies holding it delays that
    /// subscription's history by this much.
    static let claimDuration: TimeInterval = 900

    func run() async throws -> Outcome {
        var outcome = Outcome()
        guard requests > 0, !sources.isEmpty else { return outcome }
        while outcome.requests < requests, outcome.stoppedBy == nil, !Task.isCancelled {
            // Each subscription takes at least one request: never claim more than the allowance left.
            let claimed = try await store.claimHistoryCandidates(
                limit: min(100, requests - outcome.requests), now: now(),
                claimedUntil: now().addingTimeInterval(Self.claimDuration))
            let sent = outcome.requests
            var unfinished: [String] = []
            for candidate in claimed {
                guard outcome.requests < requests, outcome.stoppedBy == nil, !Task.isCancelled else {
                    unfinished.append(candidate.originalTransactionID)
                    continue
                }
                if try await complete(candidate, &outcome) == .unfinished {
                    unfinished.append(candidate.originalTransactionID)
                }
            }
            // What this worker did not finish, another may go on with at once; a held claim lapses.
            try await store.releaseHistoryClaims(unfinished)
            if claimed.isEmpty || outcome.requests == sent { break }
        }
        if outcome.requests > 0 {
            logger.info(
                "Transaction history read",
                metadata: [
                    LogKey.historyRequests: "\(outcome.requests)",
                    LogKey.historyTransactions: "\(outcome.transactions)",
                    LogKey.historyCompleted: "\(outcome.completed)",
                    LogKey.historyStoppedBy: "\(outcome.stoppedBy.map { "\($0.reason)" } ?? "none")",
                ])
        }
        return outcome
    }

    /// What became of a claimed subscription.
    enum Progress {
        case completed
        /// Stopped by the allowance or an outage: the claim is given back.
        case unfinished
        /// Not to be asked again in this run (no key for its app, a page refused): the claim is kept
        /// until it lapses.
        case held
    }

    /// Reads `candidate`'s pages until Apple says there is no more, the allowance is spent, or a page
    /// fails (the stored revision stays where the last recorded page left it).
    private func complete(_ candidate: HistoryCandidate, _ outcome: inout Outcome) async throws -> Progress {
        guard let source = sources[candidate.bundleID] ?? sources[nil] else { return .held }
        let environment = candidate.environment ?? .production
        var revision = candidate.revision
        while outcome.requests < requests {
            outcome.requests += 1
            let page: HistoryPage
            switch await source.historyPage(
                transactionID: candidate.originalTransactionID, environment: environment, revision: revision,
                logger: logger)
            {
            case .success(let read): page = read
            case .failure(.notFound):
                // Apple does not know it in this environment: nothing to complete from.
                try await store.recordHistoryPage(
                    of: candidate, transactions: [], environment: environment, revision: revision,
                    completedAt: now(), recordedAt: now())
                return .completed
            case .failure(let error):
                logger.warning(
                    "Transaction history not read; the next run resumes where this one stopped",
                    metadata: [LogKey.reason: "\(error.reason)"])
                outcome.stoppedBy = error
                outcome.failed += 1
                return .unfinished
            }
            guard page.refused.isEmpty else {
                // Never a page recorded in part: the next run asks it again.
                logger.warning(
                    "Transaction history page refused; its subscription is asked again in a later run",
                    metadata: [LogKey.reason: "\(page.refused.map(\.rawValue).joined(separator: ","))"])
                outcome.failed += 1
                return .held
            }
            let completedAt = page.hasMore ? nil : now()
            try await store.recordHistoryPage(
                of: candidate, transactions: page.transactions, environment: environment,
                revision: page.revision ?? revision, completedAt: completedAt, recordedAt: now())
            outcome.transactions += page.transactions.count
            guard page.hasMore else {
                outcome.completed += 1
                return .completed
            }
            revision = page.revision ?? revision
        }
        return .unfinished
    }
}
