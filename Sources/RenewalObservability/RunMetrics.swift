import Foundation
import Prometheus
import RenewalAppleAPI
import RenewalCore
import RenewalStorage

/// The run's Prometheus metrics, the batch-job way: counters grow while the run goes (a push during
/// a long run shows progress), gauges describe the run when it ends. Every series carries the
/// `command` label; none carries a user, receipt or transaction id.
///
/// Built on swift-prometheus's registry and text format. The metrics are registered here with
/// their help text rather than through swift-metrics: swift-metrics has no help text, and
/// `promtool check metrics` rejects a family without one.
public final class RunMetrics: AppStoreObserver, Sendable {
    public let registry = PrometheusCollectorRegistry()
    let command: String
    /// Several apps (the apps file): the receipt counters carry an `app` label, one of these or
    /// `unknown` (a receipt whose app is not known yet). Empty: one app, no such label.
    let apps: Set<String>

    private let retries: Counter
    private let breakerTrips: Counter
    private let conflicts: Counter
    private let leaseLost: Counter
    private let latency: ValueHistogram

    /// Apple answers' latency buckets, in seconds: from a fast loopback to past Apple's slow tail.
    static let latencyBuckets: [Double] = [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30]

    /// `checksReceipts: false` (for `deliver`) leaves out the families about checking receipts,
    /// which such a command would only ever report as zero. `apps`: the bundle ids of the apps file,
    /// which the receipt counters are labelled by (none for one app).
    public init(command: String, checksReceipts: Bool = true, apps: [String] = []) {
        self.command = command
        self.apps = Set(apps)
        let labels = [("command", command)]
        // A command that checks no receipt registers those families in a registry nobody reads.
        let registry = checksReceipts ? self.registry : PrometheusCollectorRegistry()
        retries = registry.makeCounter(
            descriptor: Self.name("apple_retries", "total", "Requests to Apple repeated after a temporary failure."),
            labels: labels)
        breakerTrips = registry.makeCounter(
            descriptor: Self.name(
                "breaker_trips", "total",
                "Times the circuit breaker opened because Apple kept failing (the run then exits 4)."), labels: labels)
        conflicts = registry.makeCounter(
            descriptor: Self.name(
                "conflicts", "total",
                "Subscriptions claimed by a second user (shared Apple ID); the first owner was kept."), labels: labels)
        leaseLost = registry.makeCounter(
            descriptor: Self.name(
                "lease_lost", "total", "Results not written because another worker had taken the receipt's lease."),
            labels: labels)
        latency = registry.makeValueHistogram(
            descriptor: Self.name(
                "apple_request_duration", "seconds", "Time of one HTTP request to Apple's verifyReceipt, answer read."),
            labels: labels, buckets: Self.latencyBuckets)
        // Families that exist before their first event, so dashboards and alerts see zeros, not gaps.
        if checksReceipts {
            let apps: [String?] = self.apps.isEmpty ? [nil] : self.apps.sorted()
            for app in apps {
                _ = checked(app: app)
                _ = changes(kind: "renewed", app: app)
                _ = failures(reason: .timeout, app: app)
            }
        }
    }

    /// The labels of a receipt counter: `command`, then `app` with several apps.
    private func labels(app: String?, _ more: [(String, String)] = []) -> [(String, String)] {
        guard !apps.isEmpty else { return [("command", command)] + more }
        let known = app.flatMap { apps.contains($0) ? $0 : nil } ?? "unknown"
        return [("command", command), ("app", known)] + more
    }

    private func checked(app: String?) -> Counter {
        registry.makeCounter(
            descriptor: Self.name("receipts_checked", "total", "Receipts Apple was asked about in this run."),
            labels: labels(app: app))
    }

    static func name(_ metric: String, _ unit: String, _ help: String) -> MetricNameDescriptor {
        MetricNameDescriptor(namespace: "renewal", metricName: metric, unitName: unit, helpText: help)
    }

    private func changes(kind: String, app: String?) -> Counter {
        registry.makeCounter(
            descriptor: Self.name("changes", "total", "Entitlement changes recorded, by kind."),
            labels: labels(app: app, [("kind", kind)]))
    }

    private func failures(reason: FailureReason, app: String?) -> Counter {
        registry.makeCounter(
            descriptor: Self.name(
                "failures", "total", "Receipts that could not be verified (state kept, retried later), by reason."),
            labels: labels(app: app, [("reason", reason.rawValue)]))
    }

    // MARK: During the run

    /// One receipt checked; `app` is its bundle id (several apps), nil when not known.
    package func receiptChecked(
        changes kinds: [SubscriptionEvent.Kind], failure: FailureReason?, conflicts count: Int, app: String?
    ) {
        checked(app: app).increment()
        for kind in kinds { changes(kind: kind.rawValue, app: app).increment() }
        if let failure { failures(reason: failure, app: app).increment() }
        if count > 0 { conflicts.increment(by: Int64(count)) }
    }

    /// A notification's signed data was applied: its changes count like a check's, under the same kinds.
    package func notificationApplied(changes kinds: [SubscriptionEvent.Kind], app: String?) {
        for kind in kinds { changes(kind: kind.rawValue, app: app).increment() }
    }

    /// What the run's read of the feed did with its new notifications about known subscriptions:
    /// `applied`, `known` (nothing newer), or why one made its receipt due instead (`unmodelled_type`, …).
    package func feedUse(_ counts: [String: Int]) {
        for (use, count) in counts.sorted(by: { $0.key < $1.key }) {
            registry.makeCounter(
                descriptor: Self.name(
                    "feed_notification_uses", "total",
                    """
                    New notifications about known subscriptions by what the run did with them: applied from their \
                    signed data, known (nothing newer than the database), or why their receipt was checked instead.
                    """
                ),
                labels: [("command", command), ("use", use)]
            ).increment(by: Int64(count))
        }
    }

    package func breakerTripped() { breakerTrips.increment() }
    package func leaseWasLost() { leaseLost.increment() }

    public func exchanged(status: String, environment: AppStoreEnvironment, seconds: Double) {
        registry.makeCounter(
            descriptor: Self.name(
                "apple_responses", "total",
                """
                Answers from Apple by status (Apple's status code, or the failure reason such as http_503 or \
                timeout) and environment asked.
                """
            ),
            labels: [("command", command), ("status", status), ("environment", environment.rawValue)]
        ).increment()
        latency.record(seconds)
    }

    public func retrying() { retries.increment() }

    /// The change feed read at the start of a `run`: new notifications by type, and whether every
    /// environment was read to the end (0 means the run fell back to its schedule alone).
    package func feedRead(byType: [String: Int], healthy: Bool, lagSeconds: Double) {
        for (type, count) in byType.sorted(by: { $0.key < $1.key }) {
            registry.makeCounter(
                descriptor: Self.name(
                    "feed_notifications", "total",
                    "Notifications read from Apple's change feed (Notification History) for the first time, by type."),
                labels: [("command", command), ("type", type)]
            ).increment(by: Int64(count))
        }
        feedHealth(healthy: healthy)
        registry.makeGauge(
            descriptor: Self.name(
                "feed_lag", "seconds",
                "How far behind Apple's change feed the last run was: now minus the end of the last completed read."),
            labels: [("command", command)]
        ).set(to: lagSeconds)
    }

    /// Whether the last run trusted Apple's change feed in every environment (polled on the feed's
    /// long schedule), or fell back to the full schedule somewhere.
    package func feedHealth(healthy: Bool) {
        registry.makeGauge(
            descriptor: Self.name(
                "feed_healthy", "",
                """
                1 when the last run found Apple's change feed current in every environment and polled on its long \
                schedule, 0 when it fell back to the full schedule.
                """),
            labels: [("command", command)]
        ).set(to: healthy ? 1 : 0)
    }

    /// Webhook attempts of the run by result: `delivered`, `retried`, `failed` (given up).
    public func webhooksDelivered(delivered: Int, retried: Int, failed: Int) {
        for (result, count) in [("delivered", delivered), ("retried", retried), ("failed", failed)] {
            registry.makeCounter(
                descriptor: Self.name(
                    "webhook_deliveries", "total", "Webhook delivery attempts, by result (delivered, retried, failed)."),
                labels: [("command", command), ("result", result)]
            ).increment(by: Int64(count))
        }
    }

    /// Refund requests: this run's answers by result (`answered`, `unanswered` without consent,
    /// `missed`), the requests still open, and those missed in the last day (what the alert reads).
    package func refundRequests(answered: Int, unanswered: Int, missed: Int, open: Int, missedLastDay: Int) {
        for (result, count) in [("answered", answered), ("unanswered", unanswered), ("missed", missed)] {
            registry.makeCounter(
                descriptor: Self.name(
                    "refund_requests", "total",
                    "Apple refund requests (CONSUMPTION_REQUEST) handled, by result (answered, unanswered, missed)."),
                labels: [("command", command), ("result", result)]
            ).increment(by: Int64(count))
        }
        registry.makeGauge(
            descriptor: Self.name(
                "refund_requests_open", "",
                "Apple refund requests recorded and not answered yet, within their 12 hours."),
            labels: [("command", command)]
        ).set(to: Double(open))
        registry.makeGauge(
            descriptor: Self.name(
                "refund_requests_missed_last_day", "",
                "Apple refund requests whose 12 hours ended in the last day without an answer."),
            labels: [("command", command)]
        ).set(to: Double(missedLastDay))
    }

    /// Failures of a run's work besides the receipt checks, by step (`refund_requests`: answers Apple refused
    /// or that must be tried again; `transaction_history`: history reads; `mass_extensions`: follow-ups;
    /// `notifications`: verified notifications whose data could not be decoded). Any ends the run with exit 3.
    package func otherWorkFailed(_ failures: [String: Int]) {
        for (step, count) in failures.sorted(by: { $0.key < $1.key }) {
            registry.makeCounter(
                descriptor: Self.name(
                    "work_failures", "total",
                    "Failures of a run's work besides the receipt checks, by step (the run then exits 3)."),
                labels: [("command", command), ("step", step)]
            ).increment(by: Int64(count))
        }
    }

    /// How long the oldest change not yet delivered has waited (0 when the outbox is empty).
    public func webhookOutbox(oldestUndeliveredSeconds: Double) {
        registry.makeGauge(
            descriptor: Self.name(
                "webhook_oldest_undelivered", "seconds",
                "How long the oldest entitlement change not yet delivered by webhook has waited."),
            labels: [("command", command)]
        ).set(to: oldestUndeliveredSeconds)
    }

    // MARK: At the end

    /// Sets the gauges that describe the finished run. `lastSuccess` is the end of the last run
    /// that exited 0 (this one or an earlier one, from the database).
    public func finish(
        status: RunStatus, exitCode: Int32, startedAt: Date, finishedAt: Date, dueAtStart: Int?, dueLeft: Int?,
        lastSuccess: Date?
    ) {
        let labels = [("command", command)]
        finish(exitCode: exitCode, startedAt: startedAt, finishedAt: finishedAt)
        // One-hot over every status a run can end with (`RunStatus.endings`), so the set of series is stable.
        for known in RunStatus.endings + (RunStatus.endings.contains(status) ? [] : [status]) {
            registry.makeGauge(
                descriptor: Self.name(
                    "last_run_status", "", "1 for the status the last run ended with, 0 for the others."),
                labels: [("command", command), ("status", known.rawValue)]
            ).set(to: known == status ? 1.0 : 0.0)
        }
        // 0 when no run ever exited 0, so "time() - renewal_last_success_timestamp_seconds" alerts on it.
        registry.makeGauge(
            descriptor: Self.name(
                "last_success", "timestamp_seconds",
                "When the last run that exited 0 ended (Unix time; 0 if none ever did)."), labels: labels
        )
        .set(to: lastSuccess?.timeIntervalSince1970 ?? 0)
        let due = Self.name(
            "due_receipts", "", "Receipts due for a check: at the start and at the end of the last run.")
        if let dueAtStart {
            registry.makeGauge(descriptor: due, labels: [("command", command), ("at", "start")]).set(Double(dueAtStart))
        }
        if let dueLeft {
            registry.makeGauge(descriptor: due, labels: [("command", command), ("at", "end")]).set(Double(dueLeft))
        }
    }

    /// The gauges every command ends with: its wall time, when it ended, its exit code. `deliver`
    /// sets only these (with its webhook counts); `run` and `backfill` set them through the other
    /// `finish`.
    public func finish(exitCode: Int32, startedAt: Date, finishedAt: Date) {
        let labels = [("command", command)]
        registry.makeGauge(
            descriptor: Self.name("run_duration", "seconds", "Wall time of the last run."), labels: labels
        )
        .set(to: finishedAt.timeIntervalSince(startedAt))
        registry.makeGauge(
            descriptor: Self.name("last_run", "timestamp_seconds", "When the last run ended (Unix time)."),
            labels: labels
        )
        .set(to: finishedAt.timeIntervalSince1970)
        registry.makeGauge(
            descriptor: Self.name(
                "last_run_exit_code", "",
                """
                Exit code of the last run (0 all due work done, 3 some receipts not verified, 4 Apple \
                unavailable, 75 lock held, 78 configuration, 1 internal).
                """
            ), labels: labels
        )
        .set(to: Double(exitCode))
    }

    /// The Prometheus text exposition of every metric.
    public func text() -> String {
        registry.emitToString()
    }
}
