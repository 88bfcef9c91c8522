import Foundation
import Logging
import RenewalAppleAPI
import RenewalCore
import RenewalReports
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
    /// A `run` takes the receipts due at this time (its start, or the end of its feed read).
    let dueAsOf: Date
    /// The policies every decision of this run follows, resolved once.
    let rules: EntitlementDecision.Rules
    var counts = RenewalCounts()
    var machine: RunStateMachine
    /// Outage failures not yet written: if the streak opens the breaker they are dropped and their
    /// rows stay exactly as they were; any usable answer from Apple writes them.
    var heldOutages: [HeldOutage] = []
    /// An outage result held back, and the app whose credentials asked (several apps).
    typealias HeldOutage = (receipt: StoredReceipt, decision: EntitlementDecision, app: String?)
    private var lastProbe: Date?
    /// Results decided (or waiting for their owners, `PendingSave.deciding`) but not yet written:
    /// written together, one transaction per batch.
    var pending: [PendingResult] = []
    typealias PendingResult = (receipt: StoredReceipt, save: PendingSave)
    /// The receipts of the current pass.
    private var source: ReceiptSource
    /// Due rows no lease held when the loop ended on its own (`RunStateMachine.endedOnItsOwn`).
    private var dueAtFinish: Int?
    var configuration: RenewalRun.Configuration { run.configuration }
    var dependencies: RenewalRun.Dependencies { run.dependencies }
    var leaseOwner: String? { configuration.dryRun ? nil : configuration.workerID }

    /// - Parameter feedScheduled: the change feeds this run found current or only down
    ///   (`EntitlementDecision.Rules.feedStreams`).
    init(
        run: RenewalRun, runID: String, logger: Logger, report: ReportWriter?, dueAsOf: Date,
        feedScheduled: Set<FeedStream> = []
    ) {
        self.run = run
        self.runID = runID
        self.logger = logger
        self.report = report
        self.dueAsOf = dueAsOf
        let configuration = run.configuration
        rules = EntitlementDecision.Rules(
            schedule: configuration.schedule, identity: configuration.identity,
            apps: run.dependencies.apps?.identities ?? [:], feedStreams: feedScheduled)
        let dueRun = if case .run = configuration.command { true } else { false }
        let leases = !configuration.dryRun
        machine = RunStateMachine(
            limits: RunStateMachine.Limits(
                concurrency: max(1, configuration.concurrency), maximumBatch: Self.maximumBatch,
                maximumPending: Self.maximumPending, maximumRescans: Self.maximumRescans,
                mayRescan: leases && configuration.limit == nil && dueRun),
            breaker: configuration.circuitBreaker, apps: run.dependencies.apps?.apps.count ?? 1)
        source = Self.source(of: run, dueAsOf: dueAsOf, concurrency: machine.limits.concurrency)
    }

    /// The receipts of one pass: the due rows (a `run`) or the selected ones (a backfill).
    private static func source(of run: RenewalRun, dueAsOf: Date, concurrency: Int) -> ReceiptSource {
        let configuration = run.configuration
        let selection: ReceiptSelection
        switch configuration.command {
        case .run: selection = .due(asOf: dueAsOf)
        case .backfill(let selector): selection = .backfill(selector)
        }
        let leaseOwner = configuration.dryRun ? nil : configuration.workerID
        // Claim small batches so a lease never runs out while its rows wait their turn.
        let pageSize = leaseOwner == nil ? configuration.pageSize : min(configuration.pageSize, concurrency * 2)
        return ReceiptSource(
            store: run.store, selection: selection, pageSize: pageSize, limit: configuration.limit,
            leaseOwner: leaseOwner, leaseDuration: configuration.leaseDuration, now: run.now)
    }

    /// What the task group's children report: an answer from Apple, or a step of a graceful shutdown.
    enum Event: Sendable {
        /// `app`: the app whose credentials asked (several apps); nil with one app.
        case answer(StoredReceipt, AppleAnswer, app: String?)
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

    typealias TaskGroup = ThrowingTaskGroup<Event, any Error>

    /// Runs the loop to its end, then writes or releases what is left and says how the run ended.
    mutating func process() async throws -> RenewalOutcome.Status {
        try await withThrowingTaskGroup(of: Event.self) { group in
            group.addTask {
                do {
                    try await gracefulShutdown()
                    return .shutdownRequested
                } catch {
                    return .none
                }
            }
            while try await perform(machine.nextAction(), in: &group) {
                guard let event = try await group.next() else { break }
                try await handle(event, in: &group)
            }
            group.cancelAll()
        }
        return try await finish()
    }

    /// Performs the state machine's actions until it says to wait (true) or the loop is over (false).
    private mutating func perform(_ first: RunStateMachine.Action, in group: inout TaskGroup) async throws -> Bool {
        var action = first
        while true {
            switch action {
            case .claim:
                try await claim(in: &group)
            case .write:
                startWriting(in: &group)
            case .rescan:
                try await rescan()
            case .scheduleFlush:
                group.addTask {
                    try? await Task.sleep(for: Self.flushInterval)
                    return .flushDue
                }
            case .finish:
                // Due rows another worker made due (or released) behind this pass get another one;
                // counted once, so what the run reports as left is what it chose not to take.
                guard machine.endedOnItsOwn else { return false }
                let due = try await run.store.countDue(asOf: dueAsOf, unleasedAt: run.now())
                guard due > 0, machine.dueRowsRemain() == .rescan else {
                    dueAtFinish = due
                    return false
                }
                try await rescan()
            case .scheduleDrainDeadline, .cancelInFlight:
                // Answers to events, performed where the event is handled.
                break
            case .wait:
                return true
            }
            action = machine.nextAction()
        }
    }

    /// Claims the next receipt of the pass and asks Apple about it in a child task.
    private mutating func claim(in group: inout TaskGroup) async throws {
        try await probeForDeadWorkers(every: configuration.livenessProbeInterval)
        guard let receipt = try await source.next() else {
            machine.sourceExhausted()
            return
        }
        if let app = receipt.bundleID, machine.isStopped(app) {
            try await release(receipt)
            return
        }
        machine.claimed()
        let logger = self.logger
        if let apps = dependencies.apps {
            let stopped = machine.stoppedApps
            group.addTask {
                let (answer, app) = await apps.verify(receipt.check, skipping: stopped, logger: logger)
                return .answer(receipt, answer, app: app)
            }
        } else {
            let verifier = run.verifier
            group.addTask { .answer(receipt, await verifier.verify(receipt.check, logger: logger), app: nil) }
        }
    }

    /// Another pass over the due rows, after writing what is pending.
    private mutating func rescan() async throws {
        try await flush()
        try await probeForDeadWorkers(every: 0)
        source = Self.source(of: run, dueAsOf: dueAsOf, concurrency: machine.limits.concurrency)
    }

    /// Hands one child's event to the state machine and performs what it says.
    private mutating func handle(_ event: Event, in group: inout TaskGroup) async throws {
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
            let drainTimeout = configuration.drainTimeout
            logger.notice(
                "Shutdown requested: no more receipts are claimed, retries stop, in-flight requests may finish",
                metadata: [
                    LogKey.inFlight: "\(machine.inFlight)", LogKey.drainSeconds: "\(drainTimeout.components.seconds)",
                ])
            group.addTask {
                try? await Task.sleep(for: drainTimeout)
                return .drainExpired
            }
        case .drainExpired:
            guard machine.drainExpired() == .cancelInFlight else { return }
            logger.warning(
                "Drain time over: cancelling in-flight Apple requests; their receipts are released untouched",
                metadata: [LogKey.inFlight: "\(machine.inFlight)"])
            group.cancelAll()
        case .answer(let receipt, let answer, let app):
            if case .misconfigured(let failure) = answer {
                guard try await misconfigured(receipt, failure, app: app) else { return }
            }
            try await handle(receipt, answer, app: app)
            if machine.resultsPending(pending.count) == .write { startWriting(in: &group) }
        }
    }

    /// Apple says the configuration is wrong. With several apps, only that app stops while another
    /// still runs (the answer is dropped: returns false); otherwise the run stops before writing
    /// anything else, and the answer is handled (true).
    private mutating func misconfigured(_ receipt: StoredReceipt, _ failure: CheckFailure, app: String?)
        async throws -> Bool
    {
        let reason = AppStopReason(failure)
        if let app, let apps = dependencies.apps {
            let rejection = machine.credentialsRejected(app: app, reason: reason)
            if rejection != .alreadyStopped {
                logger.error(
                    "Apple rejected this app's credentials; its receipts are left untouched, the other apps' go on",
                    metadata: [
                        LogKey.app: "\(app)", LogKey.reason: "\(failure.reason)",
                        LogKey.appsStopped: "\(machine.stoppedApps.count)/\(apps.apps.count)",
                    ])
            }
            if rejection != .noAppLeft {
                try await release(receipt)
                machine.answerDropped()
                return false
            }
        }
        if machine.stop == nil {
            logger.error(
                "Apple says the configuration is wrong; stopping before writing anything else",
                metadata: [LogKey.reason: "\(failure.reason)"])
            machine.misconfigured(reason == .sharedSecretRejected ? .sharedSecretRejected : .credentialsRejected)
        }
        return true
    }

    /// The loop is over: releases what was claimed and not started, writes (or, when the run stopped
    /// early, releases) the held outages, writes what is pending, and says how the run ended.
    private mutating func finish() async throws -> RenewalOutcome.Status {
        counts.skipped += try await source.releaseUnstarted()
        if machine.writesHeldOutagesAtEnd {
            try await writeHeldOutages()
        } else {
            let held = heldOutages
            heldOutages.removeAll()
            for (receipt, _, _) in held { try await release(receipt) }
        }
        try await flush()
        var strays = 0
        if let leaseOwner {
            // Nothing of this run is still in flight: a lease left now is a stray (a claim whose
            // answer was lost with a dropped connection) and must not hold its row back.
            strays = try await run.store.releaseEveryLease(of: leaseOwner)
            if strays > 0 { logger.notice("Released leases left by this run", metadata: [LogKey.leases: "\(strays)"]) }
        }
        if machine.draining, machine.stop == nil {
            logger.warning(
                "Shutdown requested; in-flight receipts finished or released, the rest is left for the next run")
        }
        if !machine.stopReasons.isEmpty { counts.appsStopped = machine.stopReasons.mapValues(\.rawValue) }
        if machine.endedOnItsOwn {
            // The count the loop ended on, and the strays just released (their rows are still due).
            // Counting again now would also count rows another worker made due since (the feed's
            // reader, before it claims them), which this run never chose to leave.
            if let dueAtFinish {
                counts.dueLeft = dueAtFinish + strays
            } else {
                counts.dueLeft = try await run.store.countDue(asOf: dueAsOf, unleasedAt: run.now())
            }
            if counts.dueLeft > 0 {
                logger.warning(
                    "Due receipts are left that this run could have taken; the next run starts with them",
                    metadata: [LogKey.dueLeft: "\(counts.dueLeft)"])
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
}

extension StoredReceipt {
    /// The receipt as a verifier sees it: what the database knows of it.
    var check: ReceiptCheck {
        var check = ReceiptCheck(
            receipt: latestReceipt, originalTransactionID: originalTransactionID,
            subscriptionIDs: subscriptions.map(\.snapshot.originalTransactionID), environment: environment,
            source: source, bundleID: bundleID)
        check.wantsHistory = lacksTransactionHistory
        return check
    }
}
