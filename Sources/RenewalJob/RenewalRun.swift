import Foundation
import Logging
import RenewalAppleAPI
import RenewalCore
import RenewalDelivery
import RenewalObservability
import RenewalReports
import RenewalStorage
import ServiceLifecycle

/// One run of the job: takes the due (or selected) receipts, verifies them with Apple through a
/// bounded sliding window, writes the results in batches (each result whole or not at all, one
/// transaction per batch), and reports every change.
///
/// What it does is set by `Configuration`, plain values resolved once; what it works with is
/// `Dependencies`, the live services (the store, Apple, the feeds, webhooks, metrics, the clock).
public struct RenewalRun: Sendable {
    public let configuration: Configuration
    public let dependencies: Dependencies
    var store: any SubscriptionStore { dependencies.store }
    var verifier: any ReceiptVerifier { dependencies.verifier }
    var logger: Logger { dependencies.logger }
    var now: @Sendable () -> Date { dependencies.now }
    var random: @Sendable () -> Double { dependencies.random }

    public init(configuration: Configuration, dependencies: Dependencies) {
        self.configuration = configuration
        self.dependencies = dependencies
    }

    /// A run with no feed, webhooks, metrics or progress line besides the store and Apple.
    ///
    /// - Parameters:
    ///   - now: the clock (injected so tests and the demo control time). Default: the system clock.
    ///   - random: values in 0..<1 for backoff jitter. Default: a generator seeded once by the system's (`Jitter`).
    public init(
        configuration: Configuration, store: any SubscriptionStore, verifier: any ReceiptVerifier, logger: Logger,
        now: @escaping @Sendable () -> Date = { Date() },
        random: @escaping @Sendable () -> Double = { Jitter.shared.next() }
    ) {
        self.init(
            configuration: configuration,
            dependencies: Dependencies(store: store, verifier: verifier, logger: logger, now: now, random: random))
    }

    /// Runs to the end of the selection, the limit, a stop condition or graceful shutdown.
    ///
    /// Throws only when the whole run fails (database errors, an unwritable report).
    public func run() async throws -> RenewalOutcome {
        let runID = RunIdentifier.next()
        var logger = self.logger
        logger[metadataKey: LogKey.runID] = "\(runID)"
        logger[metadataKey: LogKey.backend] = "\(store.backendName)"
        let startedAt = now()
        let started = ContinuousClock.now
        /// The end of the run: at least the time it really took after `startedAt`, even when the
        /// clock it reads stands still (the demo's simulated days) or steps back.
        func finishTime() -> Date { max(now(), startedAt.addingTimeInterval((ContinuousClock.now - started).seconds)) }
        var record = RunRecord(
            id: runID, command: configuration.command.name, startedAt: startedAt, host: configuration.host,
            processID: configuration.processID, workerID: configuration.dryRun ? nil : configuration.workerID)
        logStart(logger: logger)
        let (recovered, report) = try await startUp(record, logger: logger)
        // Apple's change feed first: what it announces is applied, or made due so this run checks it;
        // then whether the feed can be trusted decides this run's schedule for Server API subscriptions.
        let feeds = try await readFeeds(runID: runID, startedAt: startedAt, report: report, logger: logger)
        // Due rows are those due once the feed was read: it may have made some due after `startedAt`.
        let dueAsOf = max(startedAt, now())
        var dueAtStart: Int?
        if case .run = configuration.command, !configuration.dryRun {
            dueAtStart = try await store.countDue(asOf: dueAsOf, unleasedAt: dueAsOf)
            record.counts.dueAtStart = dueAtStart
        }

        var loop = RunExecution(
            run: self, runID: runID, logger: logger, report: report, dueAsOf: dueAsOf,
            feedScheduled: feeds.health?.scheduling ?? [])
        loop.counts.recoveredLeases = recovered.releasedLeases
        feeds.count(into: &loop.counts)
        loop.counts.dueAtStart = dueAtStart
        if case .run = configuration.command, !configuration.dryRun {
            // Refund requests the feed brought are answered before the due work, so a long backlog never
            // holds them past Apple's 12 hours.
            await answerRefundRequests(into: &loop.counts, runID: runID, logger: logger)
        }
        dependencies.progress?.started(total: dueAtStart.map { min($0, configuration.limit ?? $0) })
        defer { dependencies.progress?.finished() }
        var status: RenewalOutcome.Status
        do {
            status = try await loop.process()
        } catch {
            await report?.discard()
            logger.error("Run failed", metadata: ["error": "\(error)"])
            try await recordFailure(&record, finishedAt: finishTime(), leaseLost: loop.counts.leaseLost)
            // Past start-up a failing database is an internal error (exit 1), not a configuration one.
            if let error = error as? SubscriptionStoreError { throw RenewalRunError.databaseFailedMidRun(error) }
            throw error
        }

        // The ledger's history and the mass extensions in progress; a failure there, in the refund answers
        // or in the feed's notifications is work the operator must know about: the run ends with exit 3.
        status = await followUp(after: status, counts: &loop.counts, logger: logger)
        await deliverWebhooks(counts: &loop.counts, logger: logger)
        let finishedAt = finishTime()
        let counts = loop.counts
        try await report?.finish(finishedAt: finishedAt, status: status, exitCode: Int(status.exitCode), counts: counts)
        try await recordEnd(&record, status: status, counts: counts, finishedAt: finishedAt, logger: logger)
        logEnd(status: status, counts: counts, seconds: finishedAt.timeIntervalSince(startedAt), logger: logger)
        return RenewalOutcome(
            runID: runID, status: status, counts: counts, startedAt: startedAt, finishedAt: finishedAt,
            reportPath: configuration.reportPath)
    }

    /// Start-up: the run recorded, work of processes that died holding it taken back before anything
    /// is claimed, and the report opened. A database that refuses these fails with its own error
    /// (exit 78 or 75).
    private func startUp(_ record: RunRecord, logger: Logger) async throws -> (RecoveredWork, ReportWriter?) {
        var recovered = RecoveredWork()
        if !configuration.dryRun {
            try await store.beginRun(record)
            recovered = try await store.recoverAbandonedWork(except: configuration.workerID, now: record.startedAt)
            RunExecution.log(recovered, logger: logger)
        }
        var report: ReportWriter?
        if let reportPath = configuration.reportPath {
            report = try await ReportWriter(
                path: reportPath, runID: record.id, command: record.command, dryRun: configuration.dryRun,
                startedAt: record.startedAt)
        }
        return (recovered, report)
    }

    /// The changes just written go out now, within the delivery's own time budget and breaker (a run
    /// that checks, not a dry run).
    private func deliverWebhooks(counts: inout RenewalCounts, logger: Logger) async {
        guard let webhooks = dependencies.webhooks, case .run = configuration.command, !configuration.dryRun else {
            return
        }
        let delivery = await webhooks.deliverForRun(logger: logger, metrics: dependencies.metrics)
        counts.delivered = delivery.delivered
        counts.deliveryFailed = delivery.failed
        counts.oldestUndeliveredSeconds = delivery.oldestUndeliveredSeconds
    }

    private func logStart(logger: Logger) {
        logger.info(
            "Run started",
            metadata: [
                LogKey.command: "\(configuration.command.name)", LogKey.dryRun: "\(configuration.dryRun)",
                LogKey.concurrency: "\(configuration.concurrency)",
                LogKey.limit: "\(configuration.limit.map(String.init) ?? "none")",
                LogKey.worker: "\(configuration.workerID)",
                LogKey.appstoreBundleID:
                    "\(dependencies.apps.map { $0.bundleIDs.joined(separator: ",") } ?? configuration.identity.bundleID ?? "unchecked")",
                LogKey.products:
                    "\(configuration.identity.productIDs.map { $0.sorted().joined(separator: ",") } ?? "any")",
            ])
        if configuration.identity.bundleID == nil, dependencies.apps == nil {
            logger.warning(
                """
                APPSTORE_BUNDLE_ID is not set: answers for another app's receipts (same shared secret) are not \
                caught. Set it to the app's bundle id.
                """
            )
        }
    }

    /// What the change feeds said at the start of the run: nil outcome when none was read (a
    /// backfill, a dry run, no feed), nil health for dry runs.
    private struct FeedReading {
        var outcome: FeedPull.Outcome?
        var health: FeedHealth?

        /// The run's counts of what the feeds said and what their notifications changed.
        func count(into counts: inout RenewalCounts) {
            counts.notifications = outcome?.notifications ?? 0
            counts.notificationsApplied = outcome?.applied ?? 0
            counts.notificationsUnmatched = outcome?.unmatched ?? 0
            counts.changed += outcome?.changes ?? 0
            counts.migrated += outcome?.migrated ?? 0
            counts.refundRequests = outcome?.refundRequests ?? 0
            counts.notificationsFailed = outcome?.undecodable ?? 0
            counts.feedLagSeconds = health?.lagSeconds
            counts.feedFallback = health.map(\.fallbackNames)
        }
    }

    /// Reads each app's change feed (a `run` only), applying what it can, and judges which feeds
    /// this run may trust.
    private func readFeeds(runID: String, startedAt: Date, report: ReportWriter?, logger: Logger) async throws
        -> FeedReading
    {
        guard !configuration.dryRun else { return FeedReading() }
        let sources = dependencies.feedSources
        let feeds = sources.compactMap { source in source.feed.map { (app: source.app, feed: $0) } }
        var outcome: FeedPull.Outcome?
        if case .run = configuration.command, !feeds.isEmpty {
            var pull = FeedPull(
                feeds: feeds, store: store, overlap: configuration.feedOverlap, runID: runID, logger: logger, clock: now
            )
            pull.rules = EntitlementDecision.Rules(
                schedule: configuration.schedule, identity: configuration.identity,
                apps: dependencies.apps?.identities ?? [:])
            pull.queueWebhooks = configuration.queueWebhooks
            outcome = try await pull.pull(environments: AppStoreEnvironment.feedEnvironments, now: startedAt)
            if let outcome {
                dependencies.metrics?.feedUse(outcome.uses)
                for item in outcome.changed {
                    let update = item.decision.update
                    dependencies.metrics?.notificationApplied(
                        changes: item.decision.changes.map(\.kind), app: update.bundleID)
                    try await report?.append(
                        changes: item.decision.changes, userID: item.receipt.userID, bundleID: update.bundleID,
                        ownership: update.ownershipTypes, source: update.source)
                }
                for change in outcome.purchaseChanges {
                    try await report?.append(
                        changes: [change.event], userID: change.userID, bundleID: change.bundleID, ownership: [:],
                        source: .serverAPI)
                }
            }
        }
        let health = try await FeedHealth.assess(
            sources: sources.map { ($0.app, $0.feed != nil) }, outcome: outcome,
            environments: AppStoreEnvironment.feedEnvironments, maximumLag: configuration.feedMaximumLag,
            store: store, now: startedAt, logger: logger)
        if let outcome {
            dependencies.metrics?.feedRead(
                byType: outcome.byType, healthy: health.fallbacks.isEmpty, lagSeconds: health.lagSeconds ?? 0)
            logger.info(
                "Change feed read",
                metadata: [
                    LogKey.feedNotifications: "\(outcome.notifications)",
                    LogKey.feedApplied: "\(outcome.applied)", LogKey.feedKnown: "\(outcome.known)",
                    LogKey.feedRechecked: "\(outcome.rechecked.values.reduce(0, +))",
                    LogKey.feedUnmatched: "\(outcome.unmatched)",
                    LogKey.feedFallback: "\(health.fallbackNames.sorted { $0.key < $1.key })",
                ])
        } else if !feeds.isEmpty {
            dependencies.metrics?.feedHealth(healthy: health.fallbacks.isEmpty)
        }
        return FeedReading(outcome: outcome, health: health)
    }

    /// The run failed past start-up: it is recorded `failed` (exit 1) and its leases released, so
    /// they do not hold their rows until they expire. Best effort: the database may be what failed.
    private func recordFailure(_ record: inout RunRecord, finishedAt: Date, leaseLost: Int) async throws {
        guard !configuration.dryRun else { return }
        record.finishedAt = finishedAt
        record.status = .failed
        record.exitCode = Int(ExitStatus.internalError.rawValue)
        record.leaseLost = leaseLost
        try? await store.finishRun(record)
        _ = try? await store.releaseEveryLease(of: configuration.workerID)
    }

    /// Records how the run ended, then compacts the dashboards' summaries.
    private func recordEnd(
        _ record: inout RunRecord, status: RunStatus, counts: RenewalCounts, finishedAt: Date, logger: Logger
    ) async throws {
        guard !configuration.dryRun else { return }
        record.finishedAt = finishedAt
        record.status = status
        record.exitCode = Int(status.exitCode)
        record.counts = counts
        do {
            try await store.finishRun(record)
        } catch let error as SubscriptionStoreError {
            throw RenewalRunError.databaseFailedMidRun(error)
        }
        do {
            try await store.compactSummaries()
        } catch {
            // The views stay right, only slower to read, and the next run compacts again.
            logger.warning("Dashboard summaries not compacted", metadata: ["error": "\(error)"])
        }
        await refreshDailySeries(logger: logger)
    }

    private func logEnd(status: RunStatus, counts: RenewalCounts, seconds: TimeInterval, logger: Logger) {
        logger.info(
            "Run finished",
            metadata: [
                LogKey.status: "\(status.rawValue)", LogKey.checked: "\(counts.checked)",
                LogKey.changed: "\(counts.changed)", LogKey.receiptsChanged: "\(counts.receiptsChanged)",
                LogKey.unchanged: "\(counts.unchanged)",
                LogKey.failed: "\(counts.failed)", LogKey.invalid: "\(counts.invalid)",
                LogKey.conflicts: "\(counts.conflicts)", LogKey.skipped: "\(counts.skipped)",
                LogKey.leaseLost: "\(counts.leaseLost)", LogKey.recoveredLeases: "\(counts.recoveredLeases)",
                LogKey.migrated: "\(counts.migrated)",
                LogKey.seconds: "\(String(format: "%.3f", seconds))",
            ])
    }
}
