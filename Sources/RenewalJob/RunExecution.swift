import Foundation
import Logging
import RenewalAppStore
import RenewalCore
import RenewalStorage
import ServiceLifecycle

/// One run in progress: the mutable part of a `RenewalRun`, owned by the parent task. Children only
/// call Apple and hand the answer back through the task group, so nothing is shared between tasks.
struct RunExecution {
    let run: RenewalRun
    let runID: String
    let logger: Logger
    let report: ReportWriter?
    let startedAt: Date
    var counts = RenewalCounts()
    private var breaker: CircuitBreaker
    /// Outage failures not yet written: if the streak opens the breaker they are dropped and their
    /// rows stay exactly as they were; any usable answer from Apple writes them.
    private var heldOutages: [(StoredReceipt, EntitlementDecision)] = []
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

        try await withThrowingTaskGroup(of: (StoredReceipt, AppleAnswer).self) { group in
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
                guard inFlight > 0, let (receipt, answer) = try await group.next() else { break }
                inFlight -= 1
                window = concurrency
                if case .misconfigured(let failure) = answer, stop == nil {
                    logger.error("Apple says the configuration is wrong; stopping before writing anything else", metadata: [
                        LogKey.reason: "\(failure.reason)"
                    ])
                    stop = .sharedSecretRejected
                    group.cancelAll()
                }
                try await handle(receipt, answer)
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

    private mutating func handle(_ receipt: StoredReceipt, _ answer: AppleAnswer) async throws {
        if stop == .sharedSecretRejected {
            try await release(receipt)
            return
        }
        if case .verified(let evidence) = answer {
            // Any usable answer from Apple closes the streak and writes the outages held so far.
            breaker.record(outage: false)
            try await writeHeldOutages()
            try await commit(receipt, deciding: answer, claiming: claims(receipt, evidence))
            return
        }
        let decision = decide(receipt, answer, owners: [:])
        if case .failed(outage: true) = decision.outcome {
            if stop != nil {
                try await release(receipt)
                return
            }
            heldOutages.append((receipt, decision))
            if breaker.record(outage: true) {
                logger.error("Apple keeps failing; circuit breaker open, no more receipts are claimed", metadata: [
                    "renewal.consecutive_outages": "\(breaker.consecutiveOutages)"
                ])
                stop = .abortedAppleUnavailable
                try await recordHeldOutagesAsFailures()
            }
            return
        }
        breaker.record(outage: false)
        try await writeHeldOutages()
        try await commit(receipt, decision)
    }

    /// The breaker opened: the held receipts keep every column but their lease, and their failures
    /// are recorded (`run_failures` and the report) so the outage is visible.
    private mutating func recordHeldOutagesAsFailures() async throws {
        let held = heldOutages
        heldOutages.removeAll()
        let now = run.now()
        var failures: [RecordedFailure] = []
        for (receipt, decision) in held {
            let failure = decision.failure ?? CheckFailure(reason: "unknown", message: "No usable answer from Apple.")
            counts.checked += 1
            counts.failed += 1
            try report?.append(failure: failure, userID: receipt.userID, receiptID: receipt.id)
            failures.append(RecordedFailure(receiptID: receipt.id, userID: receipt.userID, failure: failure, occurredAt: now))
        }
        guard !configuration.dryRun, !failures.isEmpty else { return }
        try await run.store.recordFailures(failures, runID: runID, releasingLeasesOf: leaseOwner)
    }

    /// The pure decision for one receipt.
    private func decide(_ receipt: StoredReceipt, _ answer: AppleAnswer, owners: [String: SubscriptionOwner]) -> EntitlementDecision {
        EntitlementDecision(
            receipt: receipt, answer: answer, owners: owners, now: run.now(), rules: configuration.rules,
            random: run.random(), runID: configuration.dryRun ? nil : runID, leaseOwner: leaseOwner)
    }

    /// The subscriptions of a valid answer this receipt does not hold yet: their owner is settled in
    /// the transaction that writes the result.
    private func claims(_ receipt: StoredReceipt, _ evidence: AppleEvidence) -> [String] {
        guard case .success(let screened) = configuration.rules.identity.screen(evidence) else { return [] }
        let held = Set(receipt.subscriptions.map(\.snapshot.originalTransactionID))
        return screened.originalTransactionIDs.filter { !held.contains($0) }
    }

    private mutating func writeHeldOutages() async throws {
        let held = heldOutages
        heldOutages.removeAll()
        for (receipt, check) in held {
            try await commit(receipt, check)
        }
    }

    /// Decides with the owners read in the writing transaction (dry runs: read without one) and
    /// writes, so exactly one receipt ends up owning each subscription.
    private mutating func commit(_ receipt: StoredReceipt, deciding answer: AppleAnswer, claiming ids: [String]) async throws {
        let decision: EntitlementDecision
        if configuration.dryRun {
            decision = decide(receipt, answer, owners: try await run.store.owners(ofOriginalTransactionIDs: ids))
        } else {
            let execution = self
            decision = try await run.store.save(claiming: ids, forReceipt: receipt.id) { owners in
                let decision = execution.decide(receipt, answer, owners: owners)
                return (decision.update, decision)
            }
        }
        try await record(receipt, decision)
    }

    private mutating func commit(_ receipt: StoredReceipt, _ decision: EntitlementDecision) async throws {
        if !configuration.dryRun {
            try await run.store.save(decision.update)
        }
        try await record(receipt, decision)
    }

    /// Counts, logs and reports one written decision.
    private mutating func record(_ receipt: StoredReceipt, _ check: EntitlementDecision) async throws {
        counts.checked += 1
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
        counts.conflicts += check.update.conflicts.count
        for conflict in check.update.conflicts {
            logger.warning("Subscription already owned by another user (shared_apple_id); kept the first owner", metadata: [
                LogKey.userID: "\(conflict.claimantUserID)", LogKey.originalTransactionID: "\(conflict.originalTransactionID)",
                "subscription.owner_user_id": "\(conflict.ownerUserID)",
            ])
        }
        guard let report else { return }
        let ownership = Dictionary(
            check.update.subscriptions.map { ($0.snapshot.originalTransactionID, $0.snapshot.ownershipType ?? "") },
            uniquingKeysWith: { first, _ in first })
        try report.append(changes: check.changes, userID: receipt.userID, ownership: ownership)
        if let failure = check.failure {
            try report.append(failure: failure, userID: receipt.userID, receiptID: receipt.id)
        }
        for conflict in check.update.conflicts {
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
}
