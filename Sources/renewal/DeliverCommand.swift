import ArgumentParser
import Foundation
import Logging
import RenewalCore
import RenewalDelivery
import RenewalJob
import RenewalObservability
import RenewalStorage

struct DeliverCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "deliver",
        abstract: "Deliver the webhook outbox: every entitlement change not yet delivered, signed.",
        discussion: """
            Sends what is due (each user's changes in the order they happened), retries failures with \
            exponential backoff and jitter until --max-age-hours, then lists them as failed. Exit 0: every \
            due change delivered; 3: some failed (retried later, or given up: see --status); 78: no URL or \
            secret, or the endpoint answered 410 Gone. --status prints the outbox instead.
            """ + EnvironmentHelp.text(.database, .webhook))

    @Flag(name: .long, help: "Print the outbox (pending, due, delivered, failed, oldest undelivered) and exit.")
    var status = false

    @Flag(name: .long, help: "With --status: JSON.")
    var json = false

    @Option(name: .long, help: "Deliveries in flight at once.")
    var concurrency = 8

    @Option(name: .long, help: ArgumentHelp("Per request.", valueName: "seconds"))
    var timeout = 10.0

    @Option(
        name: .long,
        help: ArgumentHelp("Retry a change this long after it was queued, then give it up.", valueName: "hours"))
    var maxAgeHours = 72.0

    @Option(name: .long, help: .hidden)
    var now: String?

    @OptionGroup var webhook: WebhookOptions
    @OptionGroup var metrics: MetricsOptions
    @OptionGroup var database: DatabaseOptions
    @OptionGroup var logging: LoggingOptions

    func validate() throws {
        guard (1...256).contains(concurrency) else { throw ValidationError("--concurrency must be 1 to 256.") }
        guard timeout > 0, timeout <= 300 else { throw ValidationError("--timeout must be over 0 and at most 300.") }
        guard maxAgeHours > 0 else { throw ValidationError("--max-age-hours must be over 0.") }
        if let now, Timestamp.date(now) == nil {
            throw ValidationError("--now must be an RFC 3339 time like 2026-01-31T12:00:00Z.")
        }
    }

    var clock: @Sendable () -> Date {
        guard let now, let fixed = Timestamp.date(now) else { return { Date() } }
        let offset = fixed.timeIntervalSinceNow
        return { Date().addingTimeInterval(offset) }
    }

    func run() async throws {
        try await ExitMapping.run {
            let logger = logging.makeLogger()
            // Deliver talks to no Apple URL, but shares the others' environment file: a half-set pair
            // there is the same mistake, caught by whichever command runs first.
            try EndpointPairs(appStore: nil, serverAPI: nil).check()
            let store = try StoreFactory.open(database.resolved, create: false)
            try await store.checkSchema()
            let outbox = store
            if status {
                try await Self.printStatus(try await outbox.deliveryStatus(now: clock()), json: json, now: clock())
                return
            }
            var configuration = WebhookDelivery.Configuration(url: try webhook.url(), signer: try webhook.signer())
            configuration.concurrency = concurrency
            configuration.requestTimeout = .milliseconds(Int64(timeout * 1000))
            configuration.maxAge = maxAgeHours * 3600
            let host = ProcessInfo.processInfo.hostName
            let owner = "\(host)-\(ProcessInfo.processInfo.processIdentifier)-deliver"
            // Its own Pushgateway group (command=deliver), so it never replaces a run's metrics.
            let metricsOutput = metrics.output(host: host, group: [("command", "deliver")])
            let runMetrics = metricsOutput.isEnabled ? RunMetrics(command: "deliver", checksReceipts: false) : nil
            let warn: @Sendable (String) -> Void = {
                logger.warning("Metrics not delivered", metadata: ["error": "\($0)"])
            }
            let startedAt = Date()
            let delivery = configuration
            let exitCode: Int32
            do {
                exitCode = try await metricsOutput.around(runMetrics, warn: warn) {
                    // Refused (exit 75) before anything is sent while copy-database copies the database.
                    try await store.withWriterLock {
                        try await deliver(delivery, outbox: outbox, owner: owner, metrics: runMetrics, logger: logger)
                    }
                }
            } catch {
                if let runMetrics {
                    runMetrics.finish(
                        exitCode: ExitMapping.classify(error).0, startedAt: startedAt, finishedAt: Date())
                    await metricsOutput.write(runMetrics, warn: warn)
                }
                throw error
            }
            if let runMetrics {
                runMetrics.finish(exitCode: exitCode, startedAt: startedAt, finishedAt: Date())
                await metricsOutput.write(runMetrics, warn: warn)
            }
            if exitCode != 0 { throw ExitCode(exitCode) }
        }
    }

    /// One pass over the due outbox; prints the summary and returns the exit code (0, or 3 when some
    /// change was not delivered); throws a configuration error when the endpoint answered 410.
    private func deliver(
        _ configuration: WebhookDelivery.Configuration, outbox: any WebhookOutboxStore, owner: String,
        metrics: RunMetrics?, logger: Logger
    ) async throws -> Int32 {
        let clock = self.clock
        let (outcome, left) = try await WebhookDelivery.withHTTPClient(connections: concurrency) { client in
            let delivery = WebhookDelivery(
                configuration: configuration, store: outbox, client: client, owner: owner, logger: logger, now: clock)
            let outcome = try await delivery.deliverDue()
            metrics?.webhooksDelivered(
                delivered: outcome.delivered, retried: outcome.retried, failed: outcome.failed)
            return (outcome, try await delivery.outboxStatus(metrics: metrics).0)
        }
        print(
            """
            delivered \(outcome.delivered), retried \(outcome.retried), failed \(outcome.failed); \
            \(left.pending) pending (\(left.due) due now)
            """)
        if outcome.gone {
            throw ConfigurationError(
                """
                The webhook endpoint answered 410 Gone: nothing more is delivered to it. Set a new \
                RENEWAL_WEBHOOK_URL (changes wait in the outbox), or delete its row from webhook_endpoints to \
                resume.
                """)
        }
        return outcome.failed > 0 || outcome.retried > 0 || outcome.breakerOpened
            ? ExitStatus.someFailed.rawValue : ExitStatus.success.rawValue
    }

    static func printStatus(_ status: DeliveryStatus, json: Bool, now: Date) async throws {
        let oldestAge = status.oldestPendingSince.map { max(0, now.timeIntervalSince($0)) }
        if json {
            var object: [String: Any] = [
                "pending": status.pending, "due": status.due, "delivered": status.delivered, "failed": status.failed,
                "oldest_undelivered_seconds": oldestAge.map { Int($0) } as Any,
                "endpoint_gone_at": status.goneAt.map(Timestamp.string) as Any,
            ]
            object["recent_failures"] = status.recentFailures.map {
                [
                    "change_id": $0.changeID, "user_id": $0.userID, "error": $0.error,
                    "failed_at": Timestamp.string($0.at),
                ]
                    as [String: Any]
            }
            let data = try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])
            print(String(decoding: data, as: UTF8.self))
            return
        }
        print(
            "pending \(status.pending) (due now \(status.due)), delivered \(status.delivered), failed \(status.failed)")
        if let oldestAge { print("oldest undelivered: queued \(Int(oldestAge)) s ago") }
        if let gone = status.goneAt { print("endpoint answered 410 Gone at \(Timestamp.string(gone))") }
        for failure in status.recentFailures {
            print(
                "failed: change \(failure.changeID) of \(failure.userID) at \(Timestamp.string(failure.at)): \(failure.error)"
            )
        }
    }
}
