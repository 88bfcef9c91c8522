import AsyncHTTPClient
import Logging
import NIOCore
import RenewalCore
import ServiceLifecycle

/// Verifies receipts with Apple's verifyReceipt endpoint over AsyncHTTPClient.
///
/// Production first; 21007 repeats against sandbox and 21008 against production (bounded). Temporary
/// failures are retried with exponential backoff and full jitter, up to `maxAttempts` requests.
/// Per-receipt problems are answers (`AppleAnswer.transient`, `.rejected`), never thrown.
public final class AppStoreClient: ReceiptVerifier {
    /// The HTTP client; owned by whoever created it.
    let httpClient: HTTPClient
    /// The endpoints, secret, timeouts and retry bounds.
    public let configuration: Configuration

    /// The most 21007/21008 redirects followed for one receipt before `.environmentLoop`.
    static let maxEnvironmentSwitches = 2

    /// Told about each exchange and retry (metrics); nil for none.
    let observer: (any AppStoreObserver)?

    /// Creates a client over an existing `HTTPClient`; the caller shuts that client down.
    public init(httpClient: HTTPClient, configuration: Configuration, observer: (any AppStoreObserver)? = nil) {
        self.httpClient = httpClient
        self.configuration = configuration
        self.observer = observer
    }

    /// Creates an `HTTPClient`, runs `body` with a client over it, and always shuts it down.
    public static func withAppStoreClient<T>(
        configuration: Configuration,
        observer: (any AppStoreObserver)? = nil,
        _ body: (AppStoreClient) async throws -> T
    ) async throws -> T {
        let httpConfiguration = AppleHTTP.configuration(
            requestTimeout: configuration.requestTimeout, connectionsPerHost: configuration.maxConnectionsPerHost)
        return try await HTTPClient.withHTTPClient(configuration: httpConfiguration) { httpClient in
            try await body(AppStoreClient(httpClient: httpClient, configuration: configuration, observer: observer))
        }
    }

    /// Verifies one receipt; see the type's documentation for the retry and environment rules.
    ///
    /// This is the one home of verifyReceipt's status codes: 0/21006 are evidence, 21007/21008 switch
    /// endpoints, 21004 is a configuration error, 21003/21010 and a 21002 on every attempt are
    /// rejections, 21005/21009/retryable 211xx are outages, anything else is a failure that is not.
    public func verify(receipt: String, logger: Logger) async -> AppleAnswer {
        let maxAttempts = max(1, configuration.maxAttempts)
        var environment = AppStoreEnvironment.production
        var attempt = 1
        var switches = 0
        var everyAttemptMalformed = true
        var lastAnswer = AppleAnswer.transient(AppStoreClientError.timeout.checkFailure, isOutage: true)

        while true {
            var logger = logger
            // Metadata costs a copy and a re-render of the handler's metadata: only when it can show.
            if logger.logLevel <= .debug { logger[metadataKey: LogKey.appStoreAttempt] = "\(attempt)" }
            let retryable: Bool
            let started = ContinuousClock.now
            let exchanged = await exchange(receipt: receipt, environment: environment, logger: logger)
            if let observer {
                let elapsed = ContinuousClock.now - started
                let status: String
                switch exchanged {
                case .answer(let response): status = "\(response.status.rawValue)"
                case .failure(let error): status = error.reason
                }
                observer.exchanged(status: status, environment: environment, seconds: elapsed.seconds)
            }
            switch exchanged {
            case .answer(let response):
                let answeredBy = response.environment ?? environment
                switch response.status.disposition(isRetryableFlag: response.isRetryable) {
                case .valid:
                    return .verified(AppleEvidence(verifyReceipt: response, answeredBy: answeredBy))
                case .useSandbox, .useProduction:
                    switches += 1
                    guard switches <= Self.maxEnvironmentSwitches else { return Self.failed(.environmentLoop) }
                    environment = environment == .production ? .sandbox : .production
                    continue
                case .sharedSecretRejected:
                    return .misconfigured(CheckFailure(
                        reason: "apple_status_21004",
                        message: "Apple rejected the shared secret (21004); set APPSTORE_SHARED_SECRET to the app's shared secret."))
                case .invalidReceipt:
                    let kind: AppleRejection.Kind = response.status == .accountNotFound ? .accountNotFound : .notAuthentic
                    return .rejected(AppleRejection(kind: kind, status: response.status, environment: answeredBy))
                case .malformedOrTemporary:
                    lastAnswer =
                        everyAttemptMalformed
                        ? .rejected(AppleRejection(kind: .malformedOrTemporary, status: response.status, environment: answeredBy))
                        : Self.failed(.temporaryStatus(response.status))
                    retryable = true
                case .temporary:
                    everyAttemptMalformed = false
                    lastAnswer = Self.failed(.temporaryStatus(response.status))
                    retryable = true
                case .permanentError:
                    return Self.failed(.unexpectedStatus(response.status))
                }
            case .failure(let error):
                everyAttemptMalformed = false
                lastAnswer = Self.failed(error)
                retryable = Self.isRetryable(error)
            }

            // A graceful shutdown stops retries: the run releases this receipt untouched.
            guard retryable, attempt < maxAttempts, !Task.isCancelled, !Task.isShuttingDownGracefully else { return lastAnswer }
            observer?.retrying()
            let delay = backoff(afterAttempt: attempt)
            logger.debug(
                "Retrying verifyReceipt",
                metadata: [
                    LogKey.appStoreFailure: "\(Self.reason(lastAnswer))",
                    LogKey.retryDelayMS: "\(delay.milliseconds)",
                ])
            do {
                try await cancelWhenGracefulShutdown { try await Task.sleep(for: delay) }
            } catch {
                return lastAnswer
            }
            attempt += 1
        }
    }

    /// A failed exchange as an answer: the state stays; outages feed the breaker.
    static func failed(_ error: AppStoreClientError) -> AppleAnswer {
        .transient(error.checkFailure, isOutage: error.isOutage)
    }

    /// Full jitter: a uniform delay in `[0, min(max, base * 2^(attempt-1))]`.
    func backoff(afterAttempt attempt: Int) -> Duration {
        Self.fullJitter(afterAttempt: attempt, base: configuration.retryBaseDelay, cap: configuration.retryMaxDelay)
    }

    /// A uniform delay in `[0, min(cap, base * 2^(attempt-1))]`.
    package static func fullJitter(afterAttempt attempt: Int, base: Duration, cap: Duration) -> Duration {
        let ceiling = min(cap.seconds, base.seconds * Double(1 << min(max(attempt - 1, 0), 30)))
        guard ceiling > 0, ceiling.isFinite else { return .zero }
        return .milliseconds(Int64((Double.random(in: 0...ceiling) * 1000).rounded()))
    }

    /// Failures worth another request: Apple or the way to it is having trouble.
    static func isRetryable(_ error: AppStoreClientError) -> Bool {
        switch error {
        case .timeout, .connection, .notJSON, .temporaryStatus: return true
        case .httpStatus(let code): return code >= 500 || code == 429
        case .responseTooLarge, .unexpectedStatus, .environmentLoop, .unreadableField: return false
        }
    }

    private static func reason(_ answer: AppleAnswer) -> String {
        switch answer {
        case .transient(let failure, _), .misconfigured(let failure): return failure.reason
        case .rejected(let rejection): return rejection.reason
        case .verified: return "verified"
        }
    }
}

extension Duration {
    /// The duration in seconds, as a floating-point number.
    package var seconds: Double {
        let (seconds, attoseconds) = components
        return Double(seconds) + Double(attoseconds) / 1e18
    }

    /// The duration in whole milliseconds.
    package var milliseconds: Int64 {
        Int64((seconds * 1000).rounded())
    }
}
