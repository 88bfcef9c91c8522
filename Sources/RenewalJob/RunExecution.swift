import Foundation
import Logging
import RenewalAppleAPI
import RenewalCore
import RenewalStorage
import ServiceLifecycle

/// One run in progress: performs what `RunStateMachine` decides (claims, Apple requests, writes,
/// passes, drain) and keeps what only the executor holds: the results waiting to be written, the
/// outages held back, the counts and the report. Owned by the parent task; children only call Apple,
/// sleep or write a batch, and hand back an event through the task group.
struct RunExecution {
    let run: RenewalRun
    let runID: String
    let logger: Logger
    let report: ReportWriter?
    let startedAt: Date
    var counts = RenewalCounts()
    private var machine: RunStateMachine
    /// Outage failures not yet written: if the streak opens the breaker they are dropped and their
    /// rows stay exactly as they were; any usable answer from Apple writes them.
    private var heldOutages: [(StoredReceipt, EntitlementDecision)] = []
    private var lastProbe: Date?
    /// Results decided but not yet written: written together, one transaction per batch.
    private var pending: [PendingResult] = []
    typealias PendingResult = (receipt: StoredReceipt, save: PendingSave<EntitlementDecision>)
    var configuration: RenewalRun.Configuration { run.configuration }
    private var leaseOwner: String? { configuration.dryRun ? nil : configuration.workerID }

    init(run: RenewalRun, runID: String, logger: Logger, report: ReportWriter?, startedAt: Date) {
        self.run = run
        self.runID = runID
        self.logger = logger
        self.report = report
        self.startedAt = startedAt
        let configuration = run.configuration
        let dueRun = if case .run = configuration.command { true } else { false }
        let leases = !configuration.dryRun
        machine = RunStateMachine(
            limits: RunStateMachine.Limits(
                concurrency: max(1, configuration.concurrency), maximumBatch: Self.maximumBatch,
                maximumPending: Self.maximumPending, maximumRescans: Self.maximumRescans,
                mayRescan: leases && configuration.limit == nil && dueRun),
            breaker: configuration.circuitBreaker)
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
        // Claim small batches so a lease never runs out while its rows wait their turn.
        let pageSize =
            leaseOwner == nil ? configuration.pageSize : min(configuration.pageSize, machine.limits.concurrency * 2)
        let makeSource = { [run, configuration, leaseOwner] in
            ReceiptSource(
                store: run.store, selection: selection, pageSize: pageSize, limit: configuration.limit,
                leaseOwner: leaseOwner, leaseDuration: configuration.leaseDuration, now: run.now)
        }
        // A due run goes over the due rows again while a pass still finds work: rows a dead worker
        // held, or another worker released, behind this pass's cursor (`RunStateMachine.Limits.mayRescan`).
        var source = makeSource()
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
            loop: while true {
                switch machine.nextAction() {
                case .claim:
                    try await probeForDeadWorkers(every: configuration.livenessProbeInterval)
                    guard let receipt = try await source.next() else {
                        machine.sourceExhausted()
                        continue
                    }
                    machine.claimed()
                    group.addTask {
                        .answer(receipt, await verifier.verify(receipt.check, logger: logger))
                    }
                    continue
                case .write:
                    startWriting(in: &group)
                    continue
                case .rescan:
                    try await flush()
                    try await probeForDeadWorkers(every: 0)
                    source = makeSource()
                    continue
                case .scheduleFlush:
                    group.addTask {
                        try? await Task.sleep(for: Self.flushInterval)
                        return .flushDue
                    }
                    continue
                case .finish:
                    break loop
                case .scheduleDrainDeadline, .cancelInFlight:
                    // Answers to events, performed where the event is handled.
                    continue
                case .wait:
                    break
                }
                guard let event = try await group.next() else { break }
                switch event {
                case .none:
                    machine.idle()
                case .flushDue:
                    if machine.flushDue() == .write { startWriting(in: &group) }
                case .written(let batch, let results):
                    try await record(batch, results)
                    if machine.batchWritten(pending: pending.count) == .write { startWriting(in: &group) }
                case .shutdownRequested:
                    _ = machine.shutdownRequested()
                    logger.notice(
                        "Shutdown requested: no more receipts are claimed, retries stop, in-flight requests may finish",
                        metadata: [
                            LogKey.inFlight: "\(machine.inFlight)",
                            LogKey.drainSeconds: "\(drainTimeout.components.seconds)",
                        ])
                    group.addTask {
                        try? await Task.sleep(for: drainTimeout)
                        return .drainExpired
                    }
                case .drainExpired:
                    guard machine.drainExpired() == .cancelInFlight else { continue }
                    logger.warning(
                        "Drain time over: cancelling in-flight Apple requests; their receipts are released untouched",
                        metadata: [
                            LogKey.inFlight: "\(machine.inFlight)"
                        ])
                    group.cancelAll()
                case .answer(let receipt, let answer):
                    if case .misconfigured(let failure) = answer, machine.stop == nil {
                        logger.error(
                            "Apple says the configuration is wrong; stopping before writing anything else",
                            metadata: [
                                LogKey.reason: "\(failure.reason)"
                            ])
                        machine.misconfigured(
                            failure.reason == .appleStatus(.sharedSecretRejected)
                                ? .sharedSecretRejected : .credentialsRejected)
                    }
                    try await handle(receipt, answer)
                    if machine.resultsPending(pending.count) == .write { startWriting(in: &group) }
                }
            }
            group.cancelAll()
        }

        counts.skipped += try await source.releaseUnstarted()
        if machine.stop == nil {
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
        if machine.draining, machine.stop == nil {
            logger.warning(
                "Shutdown requested; in-flight receipts finished or released, the rest is left for the next run")
        }
        if machine.stop == nil, !machine.draining, machine.limits.mayRescan {
            counts.dueLeft = try await run.store.countDue(asOf: startedAt, unleasedAt: run.now())
            if counts.dueLeft > 0 {
                logger.warning(
                    "Due receipts are left that this run could have taken; the next run starts with them",
                    metadata: [
                        LogKey.dueLeft: "\(counts.dueLeft)"
                    ])
            }
        }
        return machine.outcome(dueLeft: counts.dueLeft, failed: counts.failed)
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
    /// goes on sending requests; its `.written` event counts, logs and reports them. The state
    /// machine starts one batch at a time and never ends the loop with one unwritten.
    private mutating func startWriting(in group: inout ThrowingTaskGroup<Event, any Error>) {
        guard !pending.isEmpty else { return }
        let batch = pending
        pending.removeAll(keepingCapacity: true)
        let store = run.store
        group.addTask {
            // Not cancelled with the group when the drain time runs out: a started write finishes.
            let write = Task { try await store.saveBatch(batch.map(\.save)) }
            return .written(batch, try await write.value)
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

    /// Does with one answer what the state machine's rules say: release the receipt untouched, hold
    /// an outage back, or write the held results and this one.
    private mutating func handle(_ receipt: StoredReceipt, _ answer: AppleAnswer) async throws {
        if case .verified(let evidence) = answer {
            switch machine.answered(evidence: true, outage: { false }) {
            case .release, .hold, .holdAndOpenBreaker:
                try await release(receipt)
            case .write:
                // Any usable answer from Apple writes the outages held so far.
                try await writeHeldOutages()
                try await commit(receipt, deciding: answer, claiming: claims(receipt, evidence))
            }
            return
        }
        // Decided only when the rules look at it (a receipt released untouched is not).
        var decided: EntitlementDecision?
        let (run, runID, leaseOwner) = (self.run, self.runID, self.leaseOwner)
        let disposition = machine.answered(evidence: false) {
            let decision = Self.decide(receipt, answer, owners: [:], run: run, runID: runID, leaseOwner: leaseOwner)
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
            heldOutages.append((receipt, decision))
        case .holdAndOpenBreaker:
            heldOutages.append((receipt, decision))
            logger.error(
                "Apple keeps failing; circuit breaker open, no more receipts are claimed",
                metadata: [
                    LogKey.consecutiveOutages: "\(machine.consecutiveOutages)"
                ])
            configuration.metrics?.breakerTripped()
            try await recordHeldOutagesAsFailures()
        case .write:
            try await writeHeldOutages()
            try await commit(receipt, decision)
        }
    }

    /// The breaker opened: the held receipts keep every column but their lease, and their failures
    /// are recorded (`run_failures` and the report) so the outage is visible.
    private mutating func recordHeldOutagesAsFailures() async throws {
        let held = heldOutages
        heldOutages.removeAll()
        let now = run.now()
        var failures: [RecordedFailure] = []
        for (receipt, decision) in held {
            let failure = decision.failure ?? CheckFailure(reason: .unknown, message: "No usable answer from Apple.")
            counts.checked += 1
            counts.failed += 1
            configuration.metrics?.receiptChecked(changes: [], failure: failure.reason, conflicts: 0)
            configuration.progress?.receiptDone(counts: counts)
            try await report?.append(failure: failure, userID: receipt.userID, receiptID: receipt.id)
            failures.append(
                RecordedFailure(receiptID: receipt.id, userID: receipt.userID, failure: failure, occurredAt: now))
        }
        guard !configuration.dryRun, !failures.isEmpty else { return }
        counts.leaseLost += try await run.store.recordFailures(failures, runID: runID, releasingLeasesOf: leaseOwner)
    }

    /// The pure decision for one receipt.
    private func decide(_ receipt: StoredReceipt, _ answer: AppleAnswer, owners: [String: SubscriptionOwner])
        -> EntitlementDecision
    {
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
    private mutating func commit(_ receipt: StoredReceipt, deciding answer: AppleAnswer, claiming ids: [String])
        async throws
    {
        if configuration.dryRun {
            let decision = decide(receipt, answer, owners: try await run.store.owners(ofOriginalTransactionIDs: ids))
            try await record(receipt, decision)
            return
        }
        let (run, runID, leaseOwner) = (self.run, self.runID, self.leaseOwner)
        pending.append(
            (
                receipt,
                PendingSave(receiptID: receipt.id, leaseOwner: leaseOwner, claiming: ids) { owners in
                    let decision = Self.decide(
                        receipt, answer, owners: owners, run: run, runID: runID, leaseOwner: leaseOwner)
                    return (decision.update, decision)
                }
            ))
    }

    private mutating func commit(_ receipt: StoredReceipt, _ decision: EntitlementDecision) async throws {
        if configuration.dryRun {
            try await record(receipt, decision)
            return
        }
        pending.append(
            (
                receipt,
                PendingSave(receiptID: receipt.id, leaseOwner: decision.update.leaseOwner) { _ in
                    (decision.update, decision)
                }
            ))
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
            subscriptionIDs: subscriptions.map(\.snapshot.originalTransactionID), environment: environment,
            source: source)
    }
}
