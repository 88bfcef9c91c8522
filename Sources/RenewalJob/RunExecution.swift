import Foundation
import Logging
import RenewalAppleAPI
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
    /// A graceful shutdown began: nothing more is claimed, and answers that are not evidence leave
    /// their receipts untouched (the stop, not Apple, cut their retries short).
    private var draining = false
    /// The drain time ran out and in-flight requests were cancelled.
    private var drainExpired = false
    private var lastProbe: Date?
    /// Results decided but not yet written: written together, one transaction per batch.
    private var pending: [PendingResult] = []
    private typealias PendingResult = (receipt: StoredReceipt, save: PendingSave<EntitlementDecision>)
    /// A child wakes the loop to write `pending` at most `flushInterval` after the first result.
    private var flushScheduled = false
    /// A batch is being written by a child while the loop goes on sending requests (one at a time).
    private var writing = false
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

    /// What the task group's children report: an answer from Apple, or a step of a graceful shutdown.
    private enum Event: Sendable {
        case answer(StoredReceipt, AppleAnswer)
        /// SIGTERM/SIGINT: stop claiming; in-flight requests get `drainTimeout` to finish.
        case shutdownRequested
        /// The drain time is over: in-flight requests are cancelled, their receipts released untouched.
        case drainExpired
        /// Results have waited `flushInterval`: write them.
        case flushDue
        /// A batch the writing child has saved: its items and what each decided (nil: lease lost).
        case written([PendingResult], [EntitlementDecision?])
        /// A child with nothing to report (the shutdown watcher of a run that ended normally).
        case none
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
        let makeSource = { [run, configuration, leaseOwner] in
            ReceiptSource(
                store: run.store, selection: selection, pageSize: pageSize, limit: configuration.limit,
                leaseOwner: leaseOwner, leaseDuration: configuration.leaseDuration, now: run.now)
        }
        var source = makeSource()
        // A due run goes over the due rows again while a pass still finds work: rows a dead worker
        // held, or another worker released, behind this pass's cursor. Backfills and dry runs make
        // one pass (their rows stay selected, so a second pass would take them again).
        var rescans = 0
        let mayRescan = leaseOwner != nil && configuration.limit == nil && { if case .due = selection { return true } else { return false } }()
        var claimedThisPass = 0
        let verifier = run.verifier
        let logger = self.logger
        let drainTimeout = configuration.drainTimeout

        try await withThrowingTaskGroup(of: Event.self) { group in
            group.addTask {
                do {
                    try await gracefulShutdown()
                    return .shutdownRequested
                } catch {
                    return .none
                }
            }
            var inFlight = 0
            // The first receipt goes alone: a wrong shared secret (21004) ends the run before any write.
            var window = 1
            while true {
                // While a slow write holds results back, at most `maximumPending` wait in memory.
                while stop == nil, !draining, inFlight < window, pending.count < Self.maximumPending {
                    try await probeForDeadWorkers(every: configuration.livenessProbeInterval)
                    guard let receipt = try await source.next() else { break }
                    claimedThisPass += 1
                    group.addTask {
                        .answer(receipt, await verifier.verify(receipt.check, logger: logger))
                    }
                    inFlight += 1
                }
                if inFlight == 0, !writing, pending.count >= Self.maximumPending {
                    startWriting(in: &group)
                } else if inFlight == 0, !writing {
                    guard stop == nil, !draining, mayRescan, source.exhausted, claimedThisPass > 0, rescans < Self.maximumRescans
                    else { break }
                    rescans += 1
                    claimedThisPass = 0
                    try await flush()
                    try await probeForDeadWorkers(every: 0)
                    source = makeSource()
                    continue
                }
                if !pending.isEmpty, !flushScheduled {
                    flushScheduled = true
                    group.addTask {
                        try? await Task.sleep(for: Self.flushInterval)
                        return .flushDue
                    }
                }
                guard let event = try await group.next() else { break }
                switch event {
                case .none:
                    continue
                case .flushDue:
                    flushScheduled = false
                    startWriting(in: &group)
                    continue
                case .written(let batch, let results):
                    writing = false
                    try await record(batch, results)
                    if pending.count >= min(Self.maximumBatch, max(1, inFlight)) { startWriting(in: &group) }
                    continue
                case .shutdownRequested:
                    draining = true
                    logger.notice("Shutdown requested: no more receipts are claimed, retries stop, in-flight requests may finish", metadata: [
                        LogKey.inFlight: "\(inFlight)", LogKey.drainSeconds: "\(drainTimeout.components.seconds)",
                    ])
                    group.addTask {
                        try? await Task.sleep(for: drainTimeout)
                        return .drainExpired
                    }
                    continue
                case .drainExpired:
                    guard inFlight > 0 else { continue }
                    logger.warning("Drain time over: cancelling in-flight Apple requests; their receipts are released untouched", metadata: [
                        LogKey.inFlight: "\(inFlight)"
                    ])
                    drainExpired = true
                    group.cancelAll()
                    continue
                case .answer(let receipt, let answer):
                    inFlight -= 1
                    window = concurrency
                    if case .misconfigured(let failure) = answer, stop == nil {
                        logger.error("Apple says the configuration is wrong; stopping before writing anything else", metadata: [
                            LogKey.reason: "\(failure.reason)"
                        ])
                        stop = failure.reason == AppStoreStatus.sharedSecretRejected.reason ? .sharedSecretRejected : .credentialsRejected
                    }
                    try await handle(receipt, answer)
                    // About half the window answered since the last write, or nothing left in flight.
                    if pending.count >= min(Self.maximumBatch, max(1, inFlight)) { startWriting(in: &group) }
                }
            }
            group.cancelAll()
        }

        counts.skipped += try await source.releaseUnstarted()
        if stop == nil {
            try await writeHeldOutages()
        } else {
            let held = heldOutages
            heldOutages.removeAll()
            for (receipt, _) in held { try await release(receipt) }
        }
        try await flush()
        if let leaseOwner {
            // Nothing of this run is still in flight: a lease left now is a stray (a claim whose
            // answer was lost with a dropped connection) and must not hold its row back.
            let strays = try await run.store.releaseEveryLease(of: leaseOwner)
            if strays > 0 { logger.notice("Released leases left by this run", metadata: [LogKey.leases: "\(strays)"]) }
        }
        if let stop { return stop }
        if draining {
            logger.warning("Shutdown requested; in-flight receipts finished or released, the rest is left for the next run")
            return .interrupted
        }
        if mayRescan {
            counts.dueLeft = try await run.store.countDue(asOf: startedAt, unleasedAt: run.now())
            if counts.dueLeft > 0 {
                logger.warning("Due receipts are left that this run could have taken; the next run starts with them", metadata: [
                    LogKey.dueLeft: "\(counts.dueLeft)"
                ])
                return .incomplete
            }
        }
        return counts.failed > 0 ? .completedWithFailures : .completed
    }

    /// At most this many extra passes over the due rows (each pass must still be finding work).
    static var maximumRescans: Int { 3 }

    /// Results written in one transaction at most.
    static var maximumBatch: Int { 64 }

    /// Results that may wait for a write in progress before no more receipts are claimed.
    static var maximumPending: Int { 2 * maximumBatch }

    /// The longest a decided result waits for the others of its batch.
    static var flushInterval: Duration { .milliseconds(100) }

    /// Writes the pending results in one transaction, then counts, logs and reports each.
    private mutating func flush() async throws {
        guard !pending.isEmpty else { return }
        let batch = pending
        pending.removeAll(keepingCapacity: true)
        try await record(batch, try await run.store.saveBatch(batch.map(\.save)))
    }

    /// Hands the pending results to a child that writes them in one transaction while the loop
    /// goes on sending requests; its `.written` event counts, logs and reports them. One batch is
    /// written at a time; the loop never ends with one unwritten (it waits while `writing`).
    private mutating func startWriting(in group: inout ThrowingTaskGroup<Event, any Error>) {
        guard !pending.isEmpty, !writing else { return }
        let batch = pending
        pending.removeAll(keepingCapacity: true)
        writing = true
        let store = run.store
        group.addTask {
            // Not cancelled with the group when the drain time runs out: a started write finishes.
            let write = Task { try await store.saveBatch(batch.map(\.save)) }
            return .written(batch, try await write.value)
        }
    }

    /// Counts, logs and reports the results of a written batch.
    private mutating func record(_ batch: [PendingResult], _ results: [EntitlementDecision?]) async throws {
        for ((receipt, _), decision) in zip(batch, results) {
            guard let decision else {
                recordLeaseLost(receipt)
                continue
            }
            try await record(receipt, decision)
        }
    }

    /// Takes back the leases of dead workers (and marks their runs `abandoned`), at most once per
    /// `interval` seconds. Dry runs take nothing.
    private mutating func probeForDeadWorkers(every interval: TimeInterval) async throws {
        guard let leaseOwner else { return }
        let now = run.now()
        if let lastProbe, now.timeIntervalSince(lastProbe) < interval { return }
        lastProbe = now
        let recovered = try await run.store.recoverAbandonedWork(except: leaseOwner, now: now)
        counts.recoveredLeases += recovered.releasedLeases
        RunExecution.log(recovered, logger: logger)
    }

    /// One line per dead process found, naming where it ran.
    static func log(_ recovered: RecoveredWork, logger: Logger) {
        for abandoned in recovered.abandonedRuns {
            logger.warning("A run whose process died was marked abandoned; its leases were taken back", metadata: [
                LogKey.abandonedRunID: "\(abandoned.runID)", LogKey.abandonedHost: "\(abandoned.host)",
                LogKey.abandonedPID: "\(abandoned.processID)",
                LogKey.abandonedWorker: "\(abandoned.workerID ?? "unknown")",
            ])
        }
        if recovered.releasedLeases > 0 {
            logger.notice("Took back leases held by dead processes", metadata: [LogKey.leases: "\(recovered.releasedLeases)"])
        }
    }

    private mutating func handle(_ receipt: StoredReceipt, _ answer: AppleAnswer) async throws {
        if stop == .sharedSecretRejected || stop == .credentialsRejected {
            try await release(receipt)
            return
        }
        if draining, !answer.isVerified {
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
                    LogKey.consecutiveOutages: "\(breaker.consecutiveOutages)"
                ])
                stop = .abortedAppleUnavailable
                configuration.metrics?.breakerTripped()
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
            configuration.metrics?.receiptChecked(changes: [], failure: failure.reason, conflicts: 0)
            configuration.progress?.receiptDone(counts: counts)
            try report?.append(failure: failure, userID: receipt.userID, receiptID: receipt.id)
            failures.append(RecordedFailure(receiptID: receipt.id, userID: receipt.userID, failure: failure, occurredAt: now))
        }
        guard !configuration.dryRun, !failures.isEmpty else { return }
        counts.leaseLost += try await run.store.recordFailures(failures, runID: runID, releasingLeasesOf: leaseOwner)
    }

    /// The pure decision for one receipt.
    private func decide(_ receipt: StoredReceipt, _ answer: AppleAnswer, owners: [String: SubscriptionOwner]) -> EntitlementDecision {
        Self.decide(receipt, answer, owners: owners, run: run, runID: runID, leaseOwner: leaseOwner)
    }

    private static func decide(
        _ receipt: StoredReceipt, _ answer: AppleAnswer, owners: [String: SubscriptionOwner], run: RenewalRun,
        runID: String, leaseOwner: String?
    ) -> EntitlementDecision {
        let configuration = run.configuration
        return EntitlementDecision(
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
    /// writes (with the batch), so exactly one receipt ends up owning each subscription.
    private mutating func commit(_ receipt: StoredReceipt, deciding answer: AppleAnswer, claiming ids: [String]) async throws {
        if configuration.dryRun {
            let decision = decide(receipt, answer, owners: try await run.store.owners(ofOriginalTransactionIDs: ids))
            try await record(receipt, decision)
            return
        }
        let (run, runID, leaseOwner) = (self.run, self.runID, self.leaseOwner)
        pending.append((receipt, PendingSave(receiptID: receipt.id, leaseOwner: leaseOwner, claiming: ids) { owners in
            let decision = Self.decide(receipt, answer, owners: owners, run: run, runID: runID, leaseOwner: leaseOwner)
            return (decision.update, decision)
        }))
    }

    private mutating func commit(_ receipt: StoredReceipt, _ decision: EntitlementDecision) async throws {
        if configuration.dryRun {
            try await record(receipt, decision)
            return
        }
        pending.append((receipt, PendingSave(receiptID: receipt.id, leaseOwner: decision.update.leaseOwner) { _ in (decision.update, decision) }))
    }

    /// The row's lease passed to another worker before this result could be written: nothing was
    /// written (the other worker's check stands), and the report counts it.
    private mutating func recordLeaseLost(_ receipt: StoredReceipt) {
        counts.leaseLost += 1
        configuration.metrics?.leaseWasLost()
        logger.debug("Lease lost before the result was written; another worker's check stands", metadata: [
            LogKey.receiptID: "\(receipt.id)", LogKey.userID: "\(receipt.userID)",
        ])
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
            if check.update.migrated {
                counts.migrated += 1
                metadata[LogKey.migrated] = "server_api"
            }
            metadata[LogKey.changes] = "\(check.changes.map(\.kind.rawValue).joined(separator: ","))"
            logger.debug("Verified receipt", metadata: metadata)
        case .failed:
            counts.failed += 1
            metadata[LogKey.reason] = "\(check.failure?.reason ?? "unknown")"
            logger.debug("Receipt could not be verified; state kept, retried later", metadata: metadata)
        }
        counts.conflicts += check.update.conflicts.count
        var failureReason: String?
        if case .failed = check.outcome { failureReason = check.failure?.reason ?? "unknown" }
        configuration.metrics?.receiptChecked(
            changes: check.changes.map(\.kind), failure: failureReason, conflicts: check.update.conflicts.count)
        configuration.progress?.receiptDone(counts: counts)
        for conflict in check.update.conflicts {
            logger.debug("Subscription already owned by another user (shared_apple_id); kept the first owner", metadata: [
                LogKey.userID: "\(conflict.claimantUserID)", LogKey.originalTransactionID: "\(conflict.originalTransactionID)",
                LogKey.subscriptionOwnerUserID: "\(conflict.ownerUserID)",
            ])
        }
        guard let report else { return }
        let ownership = Dictionary(
            check.update.subscriptions.map { ($0.snapshot.originalTransactionID, $0.snapshot.ownershipType ?? "") },
            uniquingKeysWith: { first, _ in first })
        try report.append(changes: check.changes, userID: receipt.userID, ownership: ownership, source: check.update.source)
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

extension StoredReceipt {
    /// The receipt as a verifier sees it: what the database knows of it.
    var check: ReceiptCheck {
        ReceiptCheck(
            receipt: latestReceipt, originalTransactionID: originalTransactionID,
            subscriptionIDs: subscriptions.map(\.snapshot.originalTransactionID), environment: environment, source: source)
    }
}

extension AppleAnswer {
    /// A valid answer with evidence (the only kind written once a shutdown has cut retries short).
    fileprivate var isVerified: Bool {
        if case .verified = self { return true }
        return false
    }
}
