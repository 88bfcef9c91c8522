import ArgumentParser
import AsyncHTTPClient
import Foundation
import Logging
import RenewalAppleAPI
import RenewalAppStore
import RenewalCore
import RenewalJob
import RenewalObservability
import RenewalReports
import RenewalServerAPI
import RenewalStorage

struct RunCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "run",
        abstract: "Verify every due receipt with Apple, update state, report changes (the cron job).",
        discussion: """
            Takes receipts whose next check is due, soonest first, verifies them with verifyReceipt \
            (production first, sandbox on 21007), writes each result and its entitlement changes in one \
            transaction, and schedules the next check. An outage, timeout, HTML answer or 21005 never \
            changes a subscription: the failure is recorded and the receipt retried later. On SQLite an \
            overlapping run exits 75 without touching anything. SIGTERM stops claiming, finishes in-flight \
            receipts and writes a partial report.
            """ + EnvironmentHelp.text(.database, .apple, .webhook, .logging))

    @OptionGroup var database: DatabaseOptions
    @OptionGroup var appStore: AppStoreOptions
    @OptionGroup var serverAPI: ServerAPIOptions
    @OptionGroup var options: RunOptions
    @OptionGroup var logging: LoggingOptions

    func run() async throws {
        try await JobRunner(
            database: database, appStore: appStore, serverAPI: serverAPI, options: options, logging: logging
        )
        .execute(.run)
    }
}

/// Wires the concrete store and Apple client into a `RenewalRun` (the composition root) and maps
/// its outcome onto the exit code.
struct JobRunner {
    var database: DatabaseOptions
    var appStore: AppStoreOptions
    var serverAPI: ServerAPIOptions
    var options: RunOptions
    var logging: LoggingOptions
    /// Work done under the run lock just before the run, with the run's Server API clients (its request
    /// budget): `renewal extend` sends its extensions there, so nothing is sent while another run holds the
    /// lock, and the run after checks what was extended.
    var beforeRun:
        (@Sendable (_ store: any RenewalStore, _ clients: [String?: ServerAPIClient]) async throws -> Void)? =
            nil

    func execute(_ command: RenewalRun.Command) async throws {
        try await ExitMapping.run {
            let logger = logging.makeLogger()
            var configuration = try options.configuration(command: command)
            var apple = try AppleSetup.resolve(
                appStore: appStore, serverAPI: serverAPI, concurrency: configuration.concurrency, logger: logger)
            let store = try StoreFactory.open(database.resolved, create: false)
            try await store.checkSchema()
            configuration.identity = try await apple.resolveIdentities(appStore: appStore, store: store)
            var metadata = apple.logMetadata
            metadata[LogKey.backend] = "\(store.backendName)"
            logger.info("Configuration", metadata: metadata)
            let outcome = try await run(configuration, apple: apple, store: store, logger: logger)
            try await writeHTMLReport(of: outcome, dryRun: configuration.dryRun, store: store, logger: logger)
            print(Self.summary(outcome, dryRun: configuration.dryRun, html: options.htmlReport))
            Self.explain(outcome, severalApps: apple.apps != nil)
            if outcome.status.exitCode != 0 { throw ExitCode(outcome.status.exitCode) }
        }
    }

    /// Runs with the live services around it: the metrics output, one HTTP client for both Apple APIs
    /// (their hosts differ, so each keeps its own connections), the webhook delivery and the run lock.
    /// The metrics hear how the run ended, even when it could not start or failed mid-run.
    private func run(
        _ configuration: RenewalRun.Configuration, apple: AppleSetup, store: any RenewalStore, logger: Logger
    ) async throws -> RenewalOutcome {
        let command = configuration.command
        let clock = options.clock
        let budget = AppleSetup.requestBudget(serverAPI: serverAPI, store: store, logger: logger)
        let metricsOutput = options.metrics.output(host: configuration.host)
        let metrics =
            metricsOutput.isEnabled
            ? RunMetrics(command: command.name, apps: apple.apps?.compactMap(\.identity.bundleID) ?? []) : nil
        let progress = TerminalProgress.make(quiet: options.quiet)
        let warn: @Sendable (String) -> Void = { logger.warning("Metrics not delivered", metadata: ["error": "\($0)"]) }
        let startedAt = clock()
        let outcome: RenewalOutcome
        do {
            outcome = try await metricsOutput.around(metrics, warn: warn) {
                try await AppleTransport.withAppleTransport(
                    requestTimeout: apple.verifyReceipt.requestTimeout,
                    connectionsPerHost: apple.verifyReceipt.maxConnectionsPerHost, observer: metrics
                ) { transport in
                    try await options.withWebhooks(
                        store: store, owner: configuration.workerID, logger: logger, clock: clock
                    ) { webhooks in
                        let (verifier, feed, history, operatorActions, catalogue) = apple.makeVerifier(
                            transport: transport, budget: budget)
                        var dependencies = RenewalRun.Dependencies(
                            store: store, verifier: verifier, logger: logger, now: clock)
                        dependencies.feed = feed
                        dependencies.history = history
                        dependencies.operatorActions = operatorActions
                        dependencies.apps = catalogue
                        dependencies.webhooks = webhooks
                        dependencies.metrics = metrics
                        dependencies.progress = progress
                        let run = RenewalRun(configuration: configuration, dependencies: dependencies)
                        let clients =
                            beforeRun == nil ? [:] : apple.serverAPIClients(transport: transport, budget: budget)
                        return try await store.withRunLock(owner: configuration.workerID) { [beforeRun] in
                            try await beforeRun?(store, clients)
                            return try await run.runUntilDone()
                        }
                    }
                }
            }
        } catch {
            if let metrics {
                let (code, _) = ExitMapping.classify(error)
                metrics.finish(
                    status: code == RunStatus.locked.exitCode ? .locked : .failed, exitCode: code,
                    startedAt: startedAt, finishedAt: clock(), dueAtStart: nil, dueLeft: nil,
                    lastSuccess: try? await store.lastSuccess())
                // Purchases wait however the run ended: counted whenever the database can still be read.
                if command == .run { await Self.pushUnclaimed(metrics, store: store, now: clock()) }
                await metricsOutput.write(metrics, warn: warn)
            }
            throw error
        }
        if let metrics {
            metrics.finish(
                status: outcome.status, exitCode: outcome.status.exitCode, startedAt: outcome.startedAt,
                finishedAt: clock(), dueAtStart: outcome.counts.dueAtStart,
                dueLeft: command == .run ? outcome.counts.dueLeft : nil, lastSuccess: try? await store.lastSuccess())
            if command == .run { await Self.pushUnclaimed(metrics, store: store, now: clock()) }
            await metricsOutput.write(metrics, warn: warn)
        }
        return outcome
    }

    /// The unclaimed-purchase gauges (docs/design.md §7), when the database answers: a run that ended in
    /// failures, or stopped on an error, still says how many customers' purchases wait, so
    /// `RenewalUnclaimedPurchaseWaiting` keeps seeing them; a database that cannot be read writes none.
    private static func pushUnclaimed(_ metrics: RunMetrics, store: any RenewalStore, now: Date) async {
        guard let unclaimed = try? await (store as? any UnclaimedPurchaseStore)?.unclaimedSummary() else { return }
        metrics.unclaimedPurchases(unclaimed, now: now)
    }

    /// `--html FILE`: the run's page, from what it stored (a dry run stores nothing).
    private func writeHTMLReport(of outcome: RenewalOutcome, dryRun: Bool, store: any RenewalStore, logger: Logger)
        async throws
    {
        guard let html = options.htmlReport else { return }
        guard !dryRun else {
            logger.warning(
                """
                A dry run stores nothing, so there is no HTML report; use --report FILE.json for the dry \
                run's JSON.
                """
            )
            return
        }
        let output = try ReportOutput(path: html)
        do {
            try await StoredReport(store: store).render(.run(outcome.runID), format: .html, to: output)
            try await output.finish()
        } catch {
            await output.discard()
            throw error
        }
    }

    /// What to do about a run that stopped on a rejected credential or a stopped app, on standard error.
    private static func explain(_ outcome: RenewalOutcome, severalApps: Bool) {
        if outcome.status == .appsStopped, let stopped = outcome.counts.appsStopped {
            let named = stopped.sorted { $0.key < $1.key }.map { "\($0.key) (\($0.value))" }
            FileHandle.standardError.write(
                Data(
                    """
                    renewal: stopped checking \(named.joined(separator: ", ")) for this run; their receipts were \
                    left untouched and the other apps' were checked. shared_secret_rejected (21004) or \
                    credentials_rejected (401): fix that app's shared_secret_file or Server API key in the apps \
                    file. apple_unavailable: Apple kept failing for that app (an outage of its own, or its rate \
                    limit spent elsewhere); the next run tries it again.\n
                    """
                    .utf8))
        }
        if outcome.status == .sharedSecretRejected, severalApps {
            FileHandle.standardError.write(
                Data(
                    """
                    renewal: Apple rejected the shared secret (21004) of every app in the apps file; nothing was \
                    changed. Point each app's shared_secret_file at its App Store Connect shared secret.\n
                    """
                    .utf8))
        } else if outcome.status == .sharedSecretRejected {
            FileHandle.standardError.write(
                Data(
                    """
                    renewal: Apple rejected the shared secret (21004); nothing was changed. Set \
                    APPSTORE_SHARED_SECRET to the app's shared secret from App Store Connect.\n
                    """
                    .utf8))
        }
        if outcome.status == .credentialsRejected {
            FileHandle.standardError.write(
                Data(
                    """
                    renewal: the App Store Server API refused the API key (HTTP 401 in production and \
                    sandbox); nothing was changed. Check APPSTORE_KEY_ID, APPSTORE_ISSUER_ID, \
                    APPSTORE_BUNDLE_ID and APPSTORE_PRIVATE_KEY_FILE.\n
                    """
                    .utf8))
        }
    }

    static func summary(_ outcome: RenewalOutcome, dryRun: Bool, html: String? = nil) -> String {
        let c = outcome.counts
        // Each count under its report key. Receipts first (receipts_changed + unchanged + failed =
        // checked), then the entitlement changes they made (`changed`, the entries of `changes`).
        var line = "\(dryRun ? "dry run" : "run") \(outcome.runID): \(outcome.status.rawValue); checked \(c.checked), "
        line += "receipts_changed \(c.receiptsChanged), unchanged \(c.unchanged), failed \(c.failed); "
        line += "changed \(c.changed), invalid \(c.invalid), conflicts \(c.conflicts), skipped \(c.skipped)"
        if c.migrated > 0 { line += ", migrated \(c.migrated)" }
        if let stopped = c.appsStopped { line += ", apps stopped \(stopped.keys.sorted().joined(separator: ","))" }
        if let report = outcome.reportPath { line += "; report: \(report)" }
        if let html, !dryRun { line += "; html: \(html)" }
        return line
    }
}
