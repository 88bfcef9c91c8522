import ArgumentParser
import Foundation
import Logging
import RenewalCore
import RenewalDelivery
import RenewalJob
import RenewalStorage

/// Options shared by `run` and `backfill`.
struct RunOptions: ParsableArguments {
    @Option(name: .long, help: ArgumentHelp("Write the JSON report of this run to this file.", valueName: "file"))
    var report: String?

    @Option(name: .long, help: "Receipts verified at the same time.")
    var concurrency: Int = 16

    @Option(name: .long, help: "Check at most this many receipts in this run.")
    var limit: Int?

    @Flag(name: .long, help: "Verify and report changes, but write nothing to the database.")
    var dryRun = false

    @Option(
        name: .long,
        help: ArgumentHelp(
            "JSON file overriding schedule defaults (seconds), e.g. {\"entitled_maximum_interval\": 86400}.",
            valueName: "file"))
    var schedule: String?

    @Option(name: .long, help: "Consecutive Apple outages (after retries) that stop the run with exit code 4.")
    var breakerThreshold: Int = 10

    @Option(
        name: .long,
        help: ArgumentHelp(
            "How long a claim on a receipt lasts before another worker may take it.", valueName: "seconds"))
    var leaseSeconds: Double = 600

    @Option(
        name: .long,
        help: ArgumentHelp(
            """
            How far each read of Apple's change feed (Notification History, `run` with Server API credentials) \
            reaches back before the last one ended, for notifications Apple indexes late.
            """,
            valueName: "minutes"))
    var feedOverlapMinutes: Double = 15

    @Option(
        name: .long,
        help: ArgumentHelp(
            """
            While the last completed read of Apple's change feed ended at most this long ago, Server API \
            subscriptions are polled on the feed's long schedule (safety net: the schedule file's \
            feed_safety_net_interval); past it, on the full schedule.
            """,
            valueName: "minutes"))
    var feedMaxLagMinutes: Double = 60

    @Option(
        name: .long,
        help: ArgumentHelp(
            """
            With the Server API, after the due work a `run` completes the transaction ledger's earlier periods \
            with Get Transaction History, sending at most this many requests (0: none); later runs go on from \
            where it stopped.
            """,
            valueName: "requests"))
    var historyRequests: Int = 200

    @Option(
        name: .long,
        help: ArgumentHelp(
            """
            The refund the developer prefers, sent with each answer to Apple's refund requests \
            (CONSUMPTION_REQUEST): DECLINE, GRANT_FULL or GRANT_PRORATED. Default: none sent.
            """,
            valueName: "preference"))
    var refundPreference: String?

    @Option(
        name: .long,
        help: ArgumentHelp(
            """
            After SIGTERM/SIGINT, how long in-flight Apple requests may finish before they are cancelled and \
            their receipts released untouched (a second signal exits at once).
            """,
            valueName: "seconds"))
    var drainSeconds: Double = 20

    @Option(
        name: .long,
        help: ArgumentHelp(
            "Also write the run as one self-contained HTML page with charts (--report FILE.html does the same).",
            valueName: "file"))
    var reportHtml: String?

    @OptionGroup var metrics: MetricsOptions

    @Flag(
        name: .long,
        help: "No progress line on standard error (it only shows on a terminal anyway, and not with NO_COLOR).")
    var quiet = false

    @Option(name: .long, help: .hidden)
    var now: String?

    @OptionGroup var webhook: WebhookOptions

    @Option(
        name: .long,
        help: ArgumentHelp(
            """
            With a webhook URL: how long a `run` may spend delivering the changes it wrote (8 at a time); the rest \
            waits in the outbox for `renewal deliver` and the next run.
            """,
            valueName: "seconds"))
    var webhookSeconds: Double = 10

    /// The JSON report file, unless `--report` names an `.html` file.
    var jsonReport: String? {
        guard let report, !report.lowercased().hasSuffix(".html") else { return nil }
        return report
    }

    /// The HTML report file: `--report-html`, or `--report` naming an `.html` file.
    var htmlReport: String? {
        reportHtml ?? report.flatMap { $0.lowercased().hasSuffix(".html") ? $0 : nil }
    }

    func validate() throws {
        guard (1...512).contains(concurrency) else { throw ValidationError("--concurrency must be between 1 and 512.") }
        if let limit, limit < 1 { throw ValidationError("--limit must be at least 1.") }
        guard breakerThreshold >= 1 else { throw ValidationError("--breaker-threshold must be at least 1.") }
        guard leaseSeconds >= 1 else { throw ValidationError("--lease-seconds must be at least 1.") }
        guard (0...1_440).contains(feedOverlapMinutes) else {
            throw ValidationError("--feed-overlap-minutes must be between 0 and 1440.")
        }
        guard (0...43_200).contains(feedMaxLagMinutes) else {
            throw ValidationError("--feed-max-lag-minutes must be between 0 and 43200 (30 days).")
        }
        guard (0...100_000).contains(historyRequests) else {
            throw ValidationError("--history-requests must be between 0 and 100000.")
        }
        if let refundPreference, RefundPreference(rawValue: refundPreference) == nil {
            throw ValidationError(
                "--refund-preference must be DECLINE, GRANT_FULL or GRANT_PRORATED (got \(refundPreference)).")
        }
        guard (0...600).contains(drainSeconds) else {
            throw ValidationError("--drain-seconds must be between 0 and 600.")
        }
        guard (0...600).contains(webhookSeconds) else {
            throw ValidationError("--webhook-seconds must be between 0 and 600.")
        }
        if let now, Timestamp.date(now) == nil {
            throw ValidationError("--now must be an RFC 3339 time like 2026-01-31T12:00:00Z.")
        }
        _ = try loadSchedule()
    }

    /// The schedule policy: defaults, overridden by `--schedule FILE`.
    func loadSchedule() throws -> SchedulePolicy {
        guard let schedule else { return SchedulePolicy() }
        guard let data = FileManager.default.contents(atPath: schedule) else {
            throw ValidationError("--schedule: cannot read \(schedule). Give a readable JSON file.")
        }
        do {
            return try JSONDecoder().decode(SchedulePolicy.self, from: data)
        } catch {
            throw ValidationError("--schedule: \(schedule) is not a valid schedule JSON object (\(error)).")
        }
    }

    /// The clock: the system clock, or the hidden `--now` used by tests to evaluate at a fixed instant.
    var clock: @Sendable () -> Date {
        if let now, let fixed = Timestamp.date(now) {
            let offset = fixed.timeIntervalSinceNow
            return { Date().addingTimeInterval(offset) }
        }
        return { Date() }
    }

    /// Runs `body` with the run's webhook delivery (nil without a webhook URL), over an HTTP client of its own.
    func withWebhooks<T: Sendable>(
        store: any RenewalStore, owner: String, logger: Logger, clock: @escaping @Sendable () -> Date,
        _ body: (WebhookDelivery?) async throws -> T
    ) async throws -> T {
        guard webhook.resolvedURL != nil else {
            return try await body(nil)
        }
        var configuration = WebhookDelivery.Configuration(url: try webhook.url(), signer: try webhook.signer())
        configuration.timeBudget = .milliseconds(Int64(webhookSeconds * 1000))
        // A hanging endpoint costs the run its budget, not a request timeout on top of it.
        configuration.requestTimeout = min(
            configuration.requestTimeout, .milliseconds(Int64(max(webhookSeconds, 0.1) * 1000)))
        return try await WebhookDelivery.withHTTPClient { client in
            try await body(
                WebhookDelivery(
                    configuration: configuration, store: store, client: client, owner: owner + "-webhooks",
                    logger: logger, now: clock))
        }
    }

    func configuration(command: RenewalRun.Command) throws -> RenewalRun.Configuration {
        var configuration = RenewalRun.Configuration(command: command)
        configuration.concurrency = concurrency
        configuration.limit = limit
        configuration.dryRun = dryRun
        configuration.schedule = try loadSchedule()
        configuration.circuitBreaker = CircuitBreaker.Configuration(threshold: breakerThreshold)
        configuration.leaseDuration = leaseSeconds
        configuration.drainTimeout = .milliseconds(Int64(drainSeconds * 1000))
        configuration.reportPath = jsonReport
        configuration.feedOverlap = feedOverlapMinutes * 60
        configuration.historyRequestsPerRun = historyRequests
        configuration.refundPreference = refundPreference.flatMap(RefundPreference.init(rawValue:))
        configuration.feedMaximumLag = feedMaxLagMinutes * 60
        if let file = Environment.value("RENEWAL_CATALOGUE_FILE") {
            configuration.analyticsCatalogue = try AnalyticsFiles.catalogue(path: file)
        }
        if let file = Environment.value("RENEWAL_RATES_FILE") { configuration.analyticsRates = try AnalyticsFiles.rates(path: file) }
        // Changes are queued only where they can be signed and sent: the secret is checked now.
        if webhook.resolvedURL != nil {
            _ = try webhook.url()
            _ = try webhook.signer()
            configuration.queueWebhooks = true
        }
        return configuration
    }
}
