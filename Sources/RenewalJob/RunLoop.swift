import Foundation
import Logging
import RenewalAppStore
import RenewalCore
import RenewalStorage
import ServiceLifecycle

/// The mutable part of one run, owned by the parent task: children only call Apple and hand the
/// answer back through the task group, so nothing is shared between tasks.
struct RunLoop {
    let run: RenewalRun
    let runID: String
    let logger: Logger
    let report: ReportWriter?
    let startedAt: Date
    var counts = RenewalCounts()
    private var breaker: CircuitBreaker
    /// Outage failures not yet written: if the streak opens the breaker they are dropped and their
    /// rows stay exactly as they were; any usable answer from Apple writes them.
    private var heldOutages: [(StoredReceipt, ReceiptCheck)] = []
    private var stop: RenewalOutcome.Status?
    private var configuration: RenewalRun.Configuration { run.configuration }
    private var leaseOwner: String? { configuration.dryRun ? nil : configuration.workerID }

    init(run: RenewalRun, runID: String, logger: Logger, report: ReportWriter?, startedAt: Date) {
        self.run = run
        self.runID = runID
        self.logger = logger
        self.report = report
        self.startedAt = startedAt
        self.breaker = CircuitBreaker(configuration: run.configuration.circuitBreaker)
    }

    mutating func process() async throws -> RenewalOutcome.Status {
        let selection: ReceiptSelection
        switch configuration.command {
        case .run: selection = .due(asOf: startedAt)
        case .backfill(let selector): selection = .backfill(selector)
        }
        let concurrency = max(1, configuration.concurrency)
        // Claim small batches so a lease never runs out while its rows wait their turn.
        let pageSize = leaseOwner == nil ? configuration.pageSize : min(configuration.pageSize, concurrency * 2)
        var source = ReceiptSource(
            store: run.store, selection: selection, pageSize: pageSize, limit: configuration.limit,
            leaseOwner: leaseOwner, leaseDuration: configuration.leaseDuration, now: run.now)
        let verifier = run.verifier
        let logger = self.logger

        try await withThrowingTaskGroup(of: (StoredReceipt, ReceiptVerification).self) { group in
            var inFlight = 0
            // The first receipt goes alone: a wrong shared secret (21004) ends the run before any write.
            var window = 1
            while true {
                while stop == nil, !Task.isShuttingDownGracefully, inFlight < window, let receipt = try await source.next() {
                    group.addTask {
                        (receipt, await verifier.verify(receipt: receipt.latestReceipt, logger: logger))
                    }
                    inFlight += 1
                }
                guard inFlight > 0, let (receipt, verification) = try await group.next() else { break }
                inFlight -= 1
                window = concurrency
                if case .sharedSecretRejected = verification, stop == nil {
                    logger.error("Apple rejected the shared secret (21004); stopping before writing anything else")
                    stop = .sharedSecretRejected
                    group.cancelAll()
                }
                try await handle(receipt, verification)
            }
        }

        counts.skipped += try await source.releaseUnstarted()
        if stop == nil {
            try await writeHeldOutages()
        } else {
            let held = heldOutages
            heldOutages.removeAll()
            for (receipt, _) in held { try await release(receipt) }
        }
        if let stop { return stop }
        if !source.exhausted, Task.isShuttingDownGracefully {
            logger.warning("Shutdown requested; in-flight receipts finished, the rest is left for the next run")
            return .interrupted
        }
        return counts.failed > 0 ? .completedWithFailures : .completed
    }

    private mutating func handle(_ receipt: StoredReceipt, _ verification: ReceiptVerification) async throws {
        if stop == .sharedSecretRejected {
            try await release(receipt)
            return
        }
        let owners = try await foreignOwners(receipt, verification)
        let check = ReceiptCheck(
            receipt: receipt, verification: verification, owners: owners, now: run.now(),
            policy: configuration.schedule, random: run.random(), runID: configuration.dryRun ? nil : runID,
            leaseOwner: leaseOwner)
        if case .failed(outage: true) = check.outcome {
            if stop != nil {
                try await release(receipt)
                return
            }
            heldOutages.append((receipt, check))
            if breaker.record(outage: true) {
                logger.error("Apple keeps failing; circuit breaker open, no more receipts are claimed", metadata: [
                    "renewal.consecutive_outages": "\(breaker.consecutiveOutages)"
                ])
                stop = .abortedAppleUnavailable
                for (held, check) in heldOutages {
                    counts.checked += 1
                    counts.failed += 1
                    try report?.append(failure: check.failure ?? CheckFailure(reason: "unknown", message: ""), userID: held.userID, receiptID: held.id)
                    try await release(held, countSkipped: false)
                }
                heldOutages.removeAll()
            }
            return
        }
        breaker.record(outage: false)
        try await writeHeldOutages()
        try await commit(receipt, check)
    }

    private mutating func writeHeldOutages() async throws {
        let held = heldOutages
        heldOutages.removeAll()
        for (receipt, check) in held {
            try await commit(receipt, check)
        }
    }

    private mutating func commit(_ receipt: StoredReceipt, _ check: ReceiptCheck) async throws {
        counts.checked += 1
        if !configuration.dryRun {
            try await run.store.save(check.write)
        }
        var metadata: Logger.Metadata = [LogKey.receiptID: "\(receipt.id)", LogKey.userID: "\(receipt.userID)"]
        switch check.outcome {
        case .verified, .invalid:
            if check.outcome == .invalid { counts.invalid += 1 }
            if check.changes.isEmpty { counts.unchanged += 1 } else { counts.receiptsChanged += 1 }
            counts.changed += check.changes.count
            metadata["renewal.changes"] = "\(check.changes.map(\.kind.rawValue).joined(separator: ","))"
            logger.debug("Verified receipt", metadata: metadata)
        case .failed:
            counts.failed += 1
            metadata[LogKey.reason] = "\(check.failure?.reason ?? "unknown")"
            logger.warning("Receipt could not be verified; state kept, retried later", metadata: metadata)
        }
        counts.conflicts += check.write.conflicts.count
        for conflict in check.write.conflicts {
            logger.warning("Subscription already owned by another user (shared_apple_id); kept the first owner", metadata: [
                LogKey.userID: "\(conflict.claimantUserID)", LogKey.originalTransactionID: "\(conflict.originalTransactionID)",
                "subscription.owner_user_id": "\(conflict.ownerUserID)",
            ])
        }
        guard let report else { return }
        let ownership = Dictionary(
            check.write.subscriptions.map { ($0.snapshot.originalTransactionID, $0.snapshot.ownershipType ?? "") },
            uniquingKeysWith: { first, _ in first })
        try report.append(changes: check.changes, userID: receipt.userID, ownership: ownership)
        if let failure = check.failure {
            try report.append(failure: failure, userID: receipt.userID, receiptID: receipt.id)
        }
        for conflict in check.write.conflicts {
            try report.append(conflict: conflict)
        }
    }

    /// Leaves a claimed receipt exactly as it was, but for its lease.
    private mutating func release(_ receipt: StoredReceipt, countSkipped: Bool = true) async throws {
        if countSkipped { counts.skipped += 1 }
        if let leaseOwner {
            try await run.store.releaseLeases(receiptIDs: [receipt.id], owner: leaseOwner)
        }
    }

    /// Owners of subscriptions in a valid answer that this receipt does not hold yet.
    private func foreignOwners(_ receipt: StoredReceipt, _ verification: ReceiptVerification) async throws -> [String: SubscriptionOwner] {
        guard case .valid(let response, _) = verification else { return [:] }
        let held = Set(receipt.subscriptions.map(\.snapshot.originalTransactionID))
        var rows = response.latestReceiptInfo + (response.receipt?.inApp ?? [])
        if let expired = response.latestExpiredReceiptInfo { rows.append(expired) }
        let ids = Set(rows.compactMap { $0.originalTransactionID ?? $0.transactionID }).subtracting(held)
        guard !ids.isEmpty else { return [:] }
        return try await run.store.owners(ofOriginalTransactionIDs: ids.sorted())
    }
}
