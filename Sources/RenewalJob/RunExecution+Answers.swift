import Foundation
import Logging
import RenewalCore
import RenewalObservability
import RenewalReports
import RenewalStorage

/// What the run does with each answer from Apple: the breaker's rules applied (through the state
/// machine), the pure decision taken, and the result queued for the next batch or the receipt
/// released untouched.
extension RunExecution {
    /// Does with one answer what the state machine's rules say: release the receipt untouched, hold
    /// an outage back, or write the held results and this one.
    mutating func handle(_ receipt: StoredReceipt, _ answer: AppleAnswer, app: String? = nil) async throws {
        // Screened once: the decision and the claims both read this.
        let request = EntitlementDecision.Request(
            receipt: receipt, answer: rules.screen(answer, of: receipt), context: decisionContext())
        if case .verified(let evidence) = answer {
            if !evidence.unmatchedRenewalInfo.isEmpty {
                logger.debug(
                    "Renewal info names subscriptions no transaction in the answer shows; no subscription made from it",
                    metadata: [
                        LogKey.receiptID: "\(receipt.id)",
                        LogKey.originalTransactionID: "\(evidence.unmatchedRenewalInfo.joined(separator: ","))",
                    ])
            }
            switch machine.answered(evidence: true, app: app, outage: { false }) {
            case .release, .hold, .holdAndOpenBreaker, .holdAndStopApp:
                try await release(receipt)
            case .write:
                // Any usable answer from Apple writes the outages held so far.
                try await writeHeldOutages()
                try await commit(request)
            }
            return
        }
        // Decided only when the rules look at it (a receipt released untouched is not).
        var decided: EntitlementDecision?
        let disposition = machine.answered(evidence: false, app: app) {
            let decision = request.decide(owners: [:])
            decided = decision
            return decision.outcome == .failed(outage: true)
        }
        guard disposition != .release, let decision = decided else {
            try await release(receipt)
            return
        }
        switch disposition {
        case .release:
            try await release(receipt)
        case .hold:
            heldOutages.append((receipt, decision, app))
        case .holdAndStopApp:
            heldOutages.append((receipt, decision, app))
            guard let app else { break }
            logger.error(
                "Apple keeps failing for this app; its breaker is open and its receipts are left untouched, the other apps go on",
                metadata: [
                    LogKey.app: "\(app)", LogKey.consecutiveOutages: "\(machine.consecutiveOutages)",
                ])
            dependencies.metrics?.breakerTripped()
            try await recordHeldOutagesAsFailures(of: app)
        case .holdAndOpenBreaker:
            heldOutages.append((receipt, decision, app))
            logger.error(
                "Apple keeps failing; circuit breaker open, no more receipts are claimed",
                metadata: [
                    LogKey.consecutiveOutages: "\(machine.consecutiveOutages)"
                ])
            dependencies.metrics?.breakerTripped()
            try await recordHeldOutagesAsFailures()
        case .write:
            try await writeHeldOutages()
            try await commit(receipt, decision)
        }
    }

    /// The breaker opened (of `app` only, with several apps): the held receipts keep every column but
    /// their lease, and their failures are recorded (`run_failures` and the report) so the outage is
    /// visible.
    mutating func recordHeldOutagesAsFailures(of app: String? = nil) async throws {
        let held = heldOutages.filter { app == nil || $0.app == app }
        heldOutages.removeAll { app == nil || $0.app == app }
        let now = run.now()
        var failures: [RecordedFailure] = []
        for (receipt, decision, _) in held {
            let failure = decision.failure ?? CheckFailure(reason: .unknown, message: "No usable answer from Apple.")
            counts.checked += 1
            counts.failed += 1
            dependencies.metrics?.receiptChecked(
                changes: [], failure: failure.reason, conflicts: 0, app: receipt.bundleID)
            dependencies.progress?.receiptDone(counts: counts)
            try await report?.append(
                failure: failure, userID: receipt.userID, receiptID: receipt.id, bundleID: receipt.bundleID)
            failures.append(
                RecordedFailure(
                    receiptID: receipt.id, userID: receipt.userID, failure: failure, occurredAt: now,
                    bundleID: receipt.bundleID))
        }
        guard !configuration.dryRun, !failures.isEmpty else { return }
        counts.leaseLost += try await run.store.recordFailures(failures, runID: runID, releasingLeasesOf: leaseOwner)
    }

    /// What every decision of this run reads besides the receipt and the answer, at this instant.
    func decisionContext() -> EntitlementDecision.Context {
        EntitlementDecision.Context(
            now: run.now(), random: run.random(), runID: configuration.dryRun ? nil : runID, leaseOwner: leaseOwner,
            queueWebhooks: configuration.queueWebhooks && !configuration.dryRun, rules: rules)
    }

    mutating func writeHeldOutages() async throws {
        let held = heldOutages
        heldOutages.removeAll()
        for (receipt, check, _) in held {
            try await commit(receipt, check)
        }
    }

    /// A valid answer: decided with the owners read in the writing transaction (dry runs: read
    /// without one), so exactly one receipt ends up owning each subscription.
    mutating func commit(_ request: EntitlementDecision.Request) async throws {
        if configuration.dryRun {
            let owners = try await run.store.owners(ofOriginalTransactionIDs: request.claims)
            try await record(request.receipt, request.decide(owners: owners))
            return
        }
        pending.append((request.receipt, .deciding(request)))
    }

    mutating func commit(_ receipt: StoredReceipt, _ decision: EntitlementDecision) async throws {
        if configuration.dryRun {
            try await record(receipt, decision)
            return
        }
        pending.append((receipt, .decided(decision)))
    }

    /// Leaves a claimed receipt exactly as it was, but for its lease.
    mutating func release(_ receipt: StoredReceipt, countSkipped: Bool = true) async throws {
        if countSkipped { counts.skipped += 1 }
        if let leaseOwner {
            try await run.store.releaseLeases(receiptIDs: [receipt.id], owner: leaseOwner)
        }
    }
}
