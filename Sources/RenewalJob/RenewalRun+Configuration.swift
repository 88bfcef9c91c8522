import Foundation
import Logging
import RenewalAppleAPI
import RenewalCore
import RenewalDelivery
import RenewalObservability
import RenewalStorage

extension RenewalRun {
    /// What a run does: plain values, resolved once by the CLI (the services it works with are
    /// `Dependencies`).
    public struct Configuration: Sendable {
        /// `run` (due receipts) or a backfill (the selected receipts, whatever their schedule).
        public var command: Command
        /// Receipts verified at the same time (sliding window). Default 16.
        public var concurrency: Int = 16
        /// Stop after claiming this many receipts. Default: no limit.
        public var limit: Int?
        /// Compute and report changes, write nothing. Default false.
        public var dryRun: Bool = false
        /// Receipts read per page. Default 200.
        public var pageSize: Int = 200
        /// How long a claim on a receipt lasts; a killed worker's rows are free again after it. Default 10 min.
        public var leaseDuration: TimeInterval = 600
        /// After SIGTERM, how long in-flight Apple requests may take before they are cancelled and
        /// their receipts released untouched. Default 20 s, so the partial report and the lease
        /// releases fit Kubernetes' default 30 s grace period.
        public var drainTimeout: Duration = .seconds(20)
        /// How often a run probes for dead workers whose leases it may take back. Default 15 s.
        public var livenessProbeInterval: TimeInterval = 15
        /// When to check next. Defaults: docs/design.md §4.
        public var schedule = SchedulePolicy()
        /// The app's bundle id and products (`APPSTORE_BUNDLE_ID`, `--products`). Default: any.
        public var identity = AppIdentity()
        /// When Apple's outages stop the run (or, with several apps, one app). Default 10 in a row.
        public var circuitBreaker = CircuitBreaker.Configuration()
        /// How far each pull reaches back before where the last one ended, for notifications Apple
        /// indexes late (their uuid keeps any from being acted on twice). Default 15 minutes.
        public var feedOverlap: TimeInterval = 900
        /// The feed counts as healthy while its last completed read ended at most this long before the
        /// run began (a failed read or two within it does not make the job poll everyone). Default 1 h.
        public var feedMaximumLag: TimeInterval = 3600
        /// Queue each change in the webhook outbox with the check that made it (a webhook URL is
        /// configured; `renewal deliver` sends them). Default false.
        public var queueWebhooks = false
        /// After the due work, a `run` completes the ledger's earlier transactions with Get Transaction
        /// History, sending at most this many requests (0: none). Default 200.
        public var historyRequestsPerRun = 200
        /// The refund the developer prefers, sent with each answer to a refund request; nil: none.
        public var refundPreference: RefundPreference?
        /// Where to write the JSON report; nil for none.
        public var reportPath: String?
        /// The catalogue and rates the daily series is refreshed with at the end of a run (the same files
        /// `renewal analytics` reads: `RENEWAL_CATALOGUE_FILE`, `RENEWAL_RATES_FILE`).
        public var analyticsCatalogue = ProductCatalogue()
        public var analyticsRates = ExchangeRates()
        /// Identifies this process in leases and the `runs` table.
        public var workerID: String
        public var host: String
        public var processID: Int

        public init(command: Command, workerID: String? = nil) {
            self.command = command
            let host = ProcessInfo.processInfo.hostName
            let pid = Int(ProcessInfo.processInfo.processIdentifier)
            self.host = host
            self.processID = pid
            self.workerID = workerID ?? "\(host)-\(pid)-\(UUID().uuidString.prefix(8))"
        }
    }

    /// The live services a run works with.
    public struct Dependencies: Sendable {
        public var store: any SubscriptionStore
        /// Apple, for a single app (with `apps`, each app's own verifier instead).
        public var verifier: any ReceiptVerifier
        public var logger: Logger
        /// The clock (injected so tests and the demo control time).
        public var now: @Sendable () -> Date
        /// Values in 0..<1 for backoff jitter.
        public var random: @Sendable () -> Double
        /// Several apps (the apps file): each receipt is checked with its own app's credentials and
        /// screened with its app's identity; a rejected secret or key stops that app's rows only.
        /// Nil: one app, `Configuration.identity` and `verifier`.
        public var apps: AppCatalogue?
        /// Apple's change feed, read at the start of each `run` (not backfills or dry runs) so the
        /// subscriptions it names are checked in the same run; nil (no Server API) for none. With
        /// several apps, each app's (`AppCatalogue.App.feed`) instead.
        public var feed: (any NotificationFeed)?
        /// Get Transaction History, asked after the due work to complete the ledger's earlier periods;
        /// nil (no Server API) for none. With several apps, each app's (`AppCatalogue.App.history`).
        public var history: (any TransactionHistory)?
        /// Answers refund requests (Send Consumption Information) and follows mass renewal-date extensions;
        /// nil (no Server API): requests stay unanswered. With several apps, each app's.
        public var operatorActions: (any OperatorActions)?
        /// After its checks, a `run` (not a dry run) delivers what is due in the outbox through this,
        /// within its time budget; the rest is left to `renewal deliver` and the next run. Nil: none.
        public var webhooks: WebhookDelivery?
        /// Prometheus metrics the run feeds as it goes (nil: none kept).
        public var metrics: RunMetrics?
        /// Told after each receipt (terminal progress); nil for none.
        public var progress: (any RunProgress)?

        public init(
            store: any SubscriptionStore, verifier: any ReceiptVerifier, logger: Logger,
            now: @escaping @Sendable () -> Date = { Date() },
            random: @escaping @Sendable () -> Double = { Jitter.shared.next() }
        ) {
            self.store = store
            self.verifier = verifier
            self.logger = logger
            self.now = now
            self.random = random
        }

        /// Each feed a `run` reads, by app (nil: the one app); an app without one is polled on the
        /// full schedule (`not_configured`).
        var feedSources: [(app: String?, feed: (any NotificationFeed)?)] {
            guard let apps else { return [(nil, feed)] }
            return apps.apps.map { ($0.bundleID, $0.feed) }
        }

        /// Each app's Send Consumption Information and renewal-date extensions, by bundle id (nil: the one
        /// app); apps without a Server API key are left out (their refund requests stay unanswered).
        var operatorActionSources: [String?: any OperatorActions] {
            guard let apps else { return operatorActions.map { [nil: $0] } ?? [:] }
            var sources: [String?: any OperatorActions] = [:]
            for app in apps.apps { sources[app.bundleID] = app.operatorActions }
            return sources
        }

        /// Each app's Get Transaction History, by bundle id (nil: the one app); apps without a Server API
        /// key are left out.
        var historySources: [String?: any TransactionHistory] {
            guard let apps else { return history.map { [nil: $0] } ?? [:] }
            var sources: [String?: any TransactionHistory] = [:]
            for app in apps.apps { sources[app.bundleID] = app.history }
            return sources
        }
    }

    public enum Command: Sendable, Hashable {
        case run
        case backfill(BackfillSelector)

        public var name: String {
            switch self {
            case .run: return "run"
            case .backfill: return "backfill"
            }
        }
    }
}

/// How a run ended; the CLI maps it onto the contract's exit codes.
public struct RenewalOutcome: Sendable, Hashable {
    /// How the run ended: one of `RunStatus.endings`.
    public typealias Status = RunStatus

    public var runID: String
    public var status: Status
    public var counts: RenewalCounts
    public var startedAt: Date
    public var finishedAt: Date
    public var reportPath: String?
}

/// Errors that end a whole run (per-receipt problems are outcomes, not errors).
public enum RenewalRunError: Error, Sendable, CustomStringConvertible {
    /// The database failed after the run had started working (exit 1); the start-up checks
    /// (open, schema, the first write) fail with the store's own error instead (exit 78 or 75).
    case databaseFailedMidRun(SubscriptionStoreError)

    public var description: String {
        switch self {
        case .databaseFailedMidRun(let error):
            return
                """
                The database failed during the run: \(error.description). Every result written before it failed \
                is kept; receipts not written are retried by the next run.
                """
        }
    }
}
