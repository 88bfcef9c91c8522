import AsyncHTTPClient
import Crypto
import Foundation
import Logging
import NIOCore
import NIOHTTP1
import RenewalCore
import RenewalObservability
import RenewalReports
import RenewalStorage

/// Delivers the webhook outbox: claims due changes (each user's oldest first, so a user's changes
/// arrive in order), POSTs each signed, and records every attempt. 2xx is delivered; 410 Gone stops
/// delivery to the URL until an operator acts (the changes wait in the outbox); anything else (an error status, a timeout, a refused
/// connection) is retried with exponential backoff and full jitter until `maxAge`, then given up and
/// listed. Redirects are not followed, TLS is verified, the answer's body is read up to a cap.
public struct WebhookDelivery: Sendable {
    public struct Configuration: Sendable {
        /// Where changes are POSTed (`--webhook-url` / `RENEWAL_WEBHOOK_URL`).
        public var url: String
        public var signer: WebhookSigner
        /// Changes in flight at once. Default 8.
        public var concurrency = 8
        /// Per request. Default 10 s.
        public var requestTimeout: Duration = .seconds(10)
        /// How long a change is retried, from when it was queued, before it is given up. Default 3 days.
        public var maxAge: TimeInterval = 3 * 86_400
        /// The first retry waits up to this, doubling per attempt. Default 30 s.
        public var backoffBase: TimeInterval = 30
        /// Up to this. Default 6 h.
        public var backoffMaximum: TimeInterval = 6 * 3600
        /// How long a claimed change is reserved for this worker. Default 2 min.
        public var leaseDuration: TimeInterval = 120
        /// This many failed attempts in a row (no success between) and the endpoint counts as down:
        /// delivery stops for now, the rest waits for the next `deliver` or run. Default 8.
        public var breakerThreshold = 8
        /// Stop claiming after this long (a run delivering what it produced). Default: no limit.
        public var timeBudget: Duration?
        /// The answer's body is read up to this many bytes. Default 64 KiB.
        public var maxResponseBytes = 64 * 1024

        public init(url: String, signer: WebhookSigner) {
            self.url = url
            self.signer = signer
        }

        /// A digest of the URL, so the database can remember a gone endpoint without keying on secrets.
        var urlDigest: String {
            SHA256.hash(data: Data(url.utf8)).map { String(format: "%02x", $0) }.joined()
        }
    }

    /// What one call of `deliverDue` did.
    public struct Outcome: Sendable, Hashable {
        public var delivered = 0
        /// Attempts that failed and are scheduled again.
        public var retried = 0
        /// Changes given up this time (retried for longer than `maxAge`).
        public var failed = 0
        /// The endpoint answered 410 Gone (now or before): nothing more is sent to it.
        public var gone = false
        /// Stopped early: the endpoint failed `breakerThreshold` attempts in a row.
        public var breakerOpened = false
        public init() {}
    }

    let configuration: Configuration
    let store: any WebhookOutboxStore
    let client: HTTPClient
    let owner: String
    let logger: Logger
    let now: @Sendable () -> Date
    let random: @Sendable () -> Double

    public init(
        configuration: Configuration, store: any WebhookOutboxStore, client: HTTPClient, owner: String,
        logger: Logger, now: @escaping @Sendable () -> Date = { Date() },
        random: @escaping @Sendable () -> Double = { Double.random(in: 0..<1) }
    ) {
        self.configuration = configuration
        self.store = store
        self.client = client
        self.owner = owner
        self.logger = logger
        self.now = now
        self.random = random
    }

    /// An HTTP client for webhooks: no redirects, verified TLS, connect timeout bounded, `connections`
    /// to the endpoint at most; shut down after `body`. A connection that cannot be made fails its
    /// request at once (no reconnecting inside the client): the attempt is retried with the outbox's
    /// backoff, and a dead endpoint trips the breaker in milliseconds.
    public static func withHTTPClient<T>(connections: Int = 8, _ body: (HTTPClient) async throws -> T) async throws
        -> T
    {
        var configuration = HTTPClient.Configuration(redirectConfiguration: .disallow)
        configuration.timeout = HTTPClient.Configuration.Timeout(connect: .seconds(5), read: .seconds(30))
        configuration.connectionPool.retryConnectionEstablishment = false
        configuration.connectionPool.concurrentHTTP1ConnectionsPerHostSoftLimit = max(1, connections)
        let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
        do {
            let result = try await body(client)
            try await client.shutdown()
            return result
        } catch {
            try? await client.shutdown()
            throw error
        }
    }

    private enum Attempt: Sendable {
        case delivered
        case gone
        case failed(String)
    }

    /// Delivers what is due until nothing is, the time budget ends, the breaker opens or the
    /// endpoint is gone.
    public func deliverDue() async throws -> Outcome {
        var outcome = Outcome()
        let digest = configuration.urlDigest
        if try await store.endpointGoneAt(digest: digest) != nil {
            outcome.gone = true
            return outcome
        }
        let started = ContinuousClock.now
        // Attempts that failed in a row, whatever their change: the endpoint's trouble, not one change's.
        var breaker = CircuitBreaker(configuration: .init(threshold: configuration.breakerThreshold))
        while configuration.timeBudget.map({ ContinuousClock.now - started < $0 }) ?? true {
            let claimedAt = now()
            let batch = try await store.claimDeliveries(
                owner: owner, now: claimedAt, leaseExpiresAt: claimedAt.addingTimeInterval(configuration.leaseDuration),
                limit: max(1, configuration.concurrency))
            guard !batch.isEmpty else { break }
            let attempts = try await withThrowingTaskGroup(of: (PendingDelivery, Attempt).self) { group in
                for delivery in batch {
                    group.addTask { (delivery, try await send(delivery)) }
                }
                return try await group.reduce(into: [(PendingDelivery, Attempt)]()) { $0.append($1) }
            }
            let records = attempts.sorted(by: { $0.0.changeID < $1.0.changeID }).map { delivery, attempt in
                record(attempt, of: delivery, outcome: &outcome, breaker: &breaker)
            }
            // One transaction for the batch's outcomes.
            try await store.recordDeliveries(records, owner: owner)
            if outcome.gone {
                try await store.markEndpointGone(digest: digest, url: Self.redacted(configuration.url), at: now())
                logger.error(
                    """
                    The webhook endpoint answered 410 Gone: nothing more is delivered to it. Set a new \
                    RENEWAL_WEBHOOK_URL (changes wait in the outbox) or remove webhook_endpoints' row to resume.
                    """)
                break
            }
            if breaker.isOpen {
                outcome.breakerOpened = true
                logger.warning(
                    "The webhook endpoint keeps failing; delivery stops until the next deliver or run",
                    metadata: [LogKey.webhookAttempts: "\(breaker.consecutiveOutages)"])
                break
            }
        }
        return outcome
    }

    /// What one attempt means for its change: delivered, waiting for a new URL (410), retried later
    /// with backoff, or given up once it is older than `maxAge`.
    private func record(
        _ attempt: Attempt, of delivery: PendingDelivery, outcome: inout Outcome, breaker: inout CircuitBreaker
    ) -> DeliveryRecord {
        let at = now()
        switch attempt {
        case .delivered:
            breaker.record(outage: false)
            outcome.delivered += 1
            return DeliveryRecord(changeID: delivery.changeID, outcome: .delivered, at: at)
        case .gone:
            // Not the change's fault: it waits in the outbox for the URL the operator sets next.
            outcome.gone = true
            return DeliveryRecord(
                changeID: delivery.changeID,
                outcome: .retry(error: "HTTP 410 Gone: the endpoint asked for no more deliveries", next: at), at: at)
        case .failed(let error):
            breaker.record(outage: true)
            logger.warning(
                "Webhook delivery failed; retried later",
                metadata: [
                    LogKey.webhookChangeID: "\(delivery.changeID)", LogKey.webhookError: "\(error)",
                    LogKey.webhookAttempts: "\(delivery.attempts + 1)",
                ])
            if at.timeIntervalSince(delivery.createdAt) >= configuration.maxAge {
                outcome.failed += 1
                return DeliveryRecord(
                    changeID: delivery.changeID,
                    outcome: .failed(error: "\(error); given up after \(delivery.attempts + 1) attempts"), at: at)
            }
            outcome.retried += 1
            return DeliveryRecord(
                changeID: delivery.changeID,
                outcome: .retry(error: error, next: at.addingTimeInterval(backoff(after: delivery.attempts))), at: at)
        }
    }

    /// Exponential from `backoffBase`, capped, with full jitter (at least a second).
    func backoff(after attempts: Int) -> TimeInterval {
        let backoff = Backoff(base: configuration.backoffBase, maximum: configuration.backoffMaximum, jitter: .full)
        return max(1, backoff.delay(afterRetries: attempts, random: random()))
    }

    private func send(_ delivery: PendingDelivery) async throws -> Attempt {
        try await Self.post(
            id: WebhookEvent.id(of: delivery), body: try WebhookEvent.body(of: delivery), configuration: configuration,
            client: client)
    }

    /// Sends a signed `webhook.test` event (as `renewal check` does) and says what the endpoint answered:
    /// nil when it took it (2xx), else why not.
    public static func sendTest(configuration: Configuration, client: HTTPClient) async throws -> String? {
        let id = "test_" + UUID().uuidString.lowercased()
        let body = try WebhookEvent.test(id: id)
        switch try await post(id: id, body: body, configuration: configuration, client: client) {
        case .delivered: return nil
        case .gone: return "HTTP 410 Gone"
        case .failed(let error): return error
        }
    }

    private static func post(id: String, body: Data, configuration: Configuration, client: HTTPClient)
        async throws -> Attempt
    {
        // The receiver checks the timestamp against its own clock: the real one, whatever `now` is.
        let timestamp = Int64(Date().timeIntervalSince1970)
        var request = HTTPClientRequest(url: configuration.url)
        request.method = .POST
        request.headers.add(name: "content-type", value: "application/json")
        request.headers.add(name: "user-agent", value: "renewal-webhooks")
        request.headers.add(name: "webhook-id", value: id)
        request.headers.add(name: "webhook-timestamp", value: String(timestamp))
        request.headers.add(
            name: "webhook-signature", value: configuration.signer.signature(id: id, timestamp: timestamp, body: body))
        request.body = .bytes(ByteBuffer(bytes: body))
        do {
            let response = try await client.execute(request, timeout: .init(configuration.requestTimeout))
            // Read (and drop) at most the cap, so a large answer costs nothing.
            _ = try? await response.body.collect(upTo: configuration.maxResponseBytes)
            switch response.status.code {
            case 200..<300: return .delivered
            case 410: return .gone
            default: return .failed("HTTP \(response.status.code)")
            }
        } catch let error as HTTPClientError where error == .deadlineExceeded || error == .readTimeout {
            return .failed("timed out")
        } catch is CancellationError {
            throw CancellationError()
        } catch {
            return .failed("connection failed (\(Self.describe(error)))")
        }
    }

    /// An error's kind, never its text (which may carry the URL and its credentials); a TLS failure
    /// says so, with the TLS library's reason (which names no URL).
    static func describe(_ error: any Error) -> String {
        if let error = error as? HTTPClientError { return "\(error)".prefix(60).description }
        let kind = String(describing: type(of: error))
        if kind.contains("SSL") {
            return """
                TLS handshake failed: the endpoint's certificate is not trusted by this host or not for its name; \
                \(kind): \("\(error)".prefix(200))
                """
        }
        return kind
    }

    /// The URL without user and password, for the database and logs.
    static func redacted(_ url: String) -> String {
        guard var components = URLComponents(string: url) else { return "(unparseable URL)" }
        if components.user != nil || components.password != nil {
            components.user = nil
            components.password = nil
        }
        components.query = components.query == nil ? nil : "…"
        return components.string ?? "(unparseable URL)"
    }
}

extension TimeAmount {
    init(_ duration: Duration) {
        let (seconds, attoseconds) = duration.components
        self = .nanoseconds(seconds * 1_000_000_000 + attoseconds / 1_000_000_000)
    }
}

extension WebhookDelivery {
    /// What a run's delivery did, for its report and metrics.
    package struct RunDelivery {
        package var delivered = 0
        /// Attempts that did not deliver (retried later, or given up).
        package var failed = 0
        package var oldestUndeliveredSeconds: Double?
    }

    /// Delivers what is due after a run's checks. Never fails the run: a database or endpoint
    /// problem is logged, and the outbox keeps everything for `renewal deliver` and the next run.
    package func deliverForRun(logger: Logger, metrics: RunMetrics?) async -> RunDelivery {
        var result = RunDelivery()
        do {
            // deliverDue logs a 410 and an open breaker itself.
            let outcome = try await deliverDue()
            result.delivered = outcome.delivered
            result.failed = outcome.retried + outcome.failed
            metrics?.webhooksDelivered(
                delivered: outcome.delivered, retried: outcome.retried, failed: outcome.failed)
        } catch {
            logger.warning(
                "Webhook delivery stopped; the outbox keeps the changes for renewal deliver and the next run",
                metadata: [LogKey.webhookError: "\(error)"])
        }
        if let (_, oldest) = try? await outboxStatus(metrics: metrics) {
            result.oldestUndeliveredSeconds = (oldest * 1000).rounded() / 1000
        }
        return result
    }

    /// The outbox now, and how long its oldest undelivered change has waited (0 when none), which
    /// `metrics` is told too.
    public func outboxStatus(metrics: RunMetrics?) async throws -> (DeliveryStatus, oldestUndeliveredSeconds: Double) {
        let at = now()
        let status = try await store.deliveryStatus(now: at)
        let oldest = status.oldestPendingSince.map { max(0, at.timeIntervalSince($0)) } ?? 0
        metrics?.webhookOutbox(oldestUndeliveredSeconds: oldest)
        return (status, oldest)
    }
}
