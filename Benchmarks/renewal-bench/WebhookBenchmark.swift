import AppStoreSimulator
import ArgumentParser
import Foundation
import Hummingbird
import Logging
import RenewalCore
import RenewalDelivery
import RenewalJob
import RenewalSQL
import RenewalSQLite
import RenewalStorage

/// Webhook delivery: changes per second to a receiver that answers after a fixed latency, and what an
/// endpoint that is down costs the delivery a run makes.
struct WebhookBenchmark: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "webhooks",
        abstract: "Deliver queued changes to a local receiver; time a run's delivery against a dead endpoint.")

    @Option(help: "Changes queued.")
    var changes = 2_000

    @Option(help: "The receiver answers 204 after this many milliseconds.")
    var latencyMS = 50

    @Option(help: "Deliveries in flight (comma-separated list to compare).")
    var concurrency = "8,32"

    func run() async throws {
        let levels = concurrency.split(separator: ",").compactMap { Int($0) }.filter { $0 > 0 }
        let quiet = Logger(label: "renewal-bench", factory: { _ in SwiftLogNoOpLogHandler() })
        let secret = "whsec_" + Data(repeating: 9, count: 32).base64EncodedString()
        let signer = try WebhookSigner(secret: secret)
        print("webhooks benchmark: \(changes) changes, receiver latency \(latencyMS) ms, SQLite")
        try await Self.withReceiver(latency: .milliseconds(latencyMS), logger: quiet) { url in
            for level in levels {
                let store = try await Self.queued(changes)
                var configuration = WebhookDelivery.Configuration(url: url, signer: signer)
                configuration.concurrency = level
                let started = ContinuousClock.now
                let outcome = try await WebhookDelivery.withHTTPClient(connections: level) { client in
                    try await WebhookDelivery(
                        configuration: configuration, store: store, client: client, owner: "bench", logger: quiet
                    ).deliverDue()
                }
                let seconds = (ContinuousClock.now - started).seconds
                print(
                    String(
                        format: "  concurrency %d: %d delivered in %.2f s: %.0f changes/s (ideal %.0f)",
                        level, outcome.delivered, seconds, Double(outcome.delivered) / seconds,
                        Double(level) * 1000 / Double(latencyMS)))
            }
        }
        // A dead endpoint (nothing listens): what the run's delivery costs before its breaker opens.
        let store = try await Self.queued(changes)
        var configuration = WebhookDelivery.Configuration(url: "http://127.0.0.1:9/hooks", signer: signer)
        configuration.timeBudget = .seconds(10)
        let started = ContinuousClock.now
        let outcome = try await WebhookDelivery.withHTTPClient { client in
            try await WebhookDelivery(
                configuration: configuration, store: store, client: client, owner: "bench", logger: quiet
            ).deliverDue()
        }
        print(
            String(
                format: "  endpoint down (connection refused): %.3f s spent, %d attempts, breaker %@",
                (ContinuousClock.now - started).seconds, outcome.retried + outcome.failed,
                outcome.breakerOpened ? "open" : "closed"))
    }

    /// A fresh SQLite database holding `count` queued changes of `count` users.
    static func queued(_ count: Int) async throws -> SQLiteSubscriptionStore {
        let path = NSTemporaryDirectory() + "renewal-webhooks-" + UUID().uuidString + ".sqlite"
        let store = try SQLiteSubscriptionStore.open(path: path, create: true)
        _ = try await store.migrate()
        let now = Date()
        _ = try await store.importReceipts(
            (0..<count).map { ReceiptImport(userID: "user-\($0)", latestReceipt: "receipt-\($0)") }, now: now)
        var cursor: ReceiptCursor?
        while true {
            let page = try await store.nextBatch(
                .backfill(BackfillSelector(all: true)), after: cursor, limit: 500, lease: nil)
            for receipt in page {
                var update = ReceiptUpdate(unchanged: receipt, runID: "bench", checkedAt: now, leaseOwner: nil)
                update.changes = [
                    SubscriptionEvent(
                        kind: .renewed, originalTransactionID: "otid-\(receipt.id)", productID: "p", fromState: .active,
                        toState: .active, oldExpiresAt: now, newExpiresAt: now.addingTimeInterval(30 * 86_400),
                        environment: .production)
                ]
                update.queueWebhooks = true
                try await store.save(update)
            }
            guard page.count == 500, let last = page.last else { return store }
            cursor = last.cursor
        }
    }

    static func withReceiver(latency: Duration, logger: Logger, _ body: (String) async throws -> Void) async throws {
        let router = Router()
        router.post("hooks") { request, _ -> Response in
            _ = try await request.body.collect(upTo: 1 << 20)
            try await Task.sleep(for: latency)
            return Response(status: .noContent)
        }
        try await withLoopbackServer(router, logger: logger) { port in
            try await body("http://127.0.0.1:\(port)/hooks")
        }
    }
}
