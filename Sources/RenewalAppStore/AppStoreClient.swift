import AsyncHTTPClient
import Logging
import NIOCore
import RenewalCore

/// Verifies receipts with Apple's verifyReceipt endpoint over AsyncHTTPClient.
///
/// Production first; 21007 repeats against sandbox and 21008 against production (bounded). Temporary
/// failures are retried with exponential backoff and full jitter, up to `maxAttempts` requests.
/// Per-receipt problems are outcomes (`ReceiptVerification`), never thrown.
public final class AppStoreClient: ReceiptVerifier {
    /// The HTTP client; owned by whoever created it.
    let httpClient: HTTPClient
    /// The endpoints, secret, timeouts and retry bounds.
    public let configuration: Configuration

    /// The most 21007/21008 redirects followed for one receipt before `.environmentLoop`.
    static let maxEnvironmentSwitches = 2

    /// Creates a client over an existing `HTTPClient`; the caller shuts that client down.
    public init(httpClient: HTTPClient, configuration: Configuration) {
        self.httpClient = httpClient
        self.configuration = configuration
    }

    /// Creates an `HTTPClient`, runs `body` with a client over it, and always shuts it down.
    public static func withAppStoreClient<T>(
        configuration: Configuration,
        _ body: (AppStoreClient) async throws -> T
    ) async throws -> T {
        var httpConfiguration = HTTPClient.Configuration()
        httpConfiguration.redirectConfiguration = .disallow
        // AHC keeps retrying a refused connection until the connect timeout: keep it within one request.
        let connectTimeout = min(configuration.requestTimeout, .seconds(10))
        httpConfiguration.timeout = .init(connect: .nanoseconds(max(1, connectTimeout.nanoseconds)))
        httpConfiguration.connectionPool = HTTPClient.Configuration.ConnectionPool(
            idleTimeout: .seconds(60),
            concurrentHTTP1ConnectionsPerHostSoftLimit: max(1, configuration.maxConnectionsPerHost))
        return try await HTTPClient.withHTTPClient(configuration: httpConfiguration) { httpClient in
            try await body(AppStoreClient(httpClient: httpClient, configuration: configuration))
        }
    }

    /// Verifies one receipt; see the type's documentation for the retry and environment rules.
    public func verify(receipt: String, logger: Logger) async -> ReceiptVerification {
        let maxAttempts = max(1, configuration.maxAttempts)
        var environment = AppStoreEnvironment.production
        var attempt = 1
        var switches = 0
        var everyAttemptMalformed = true
        var lastFailure = ReceiptVerification.failed(.timeout)

        while true {
            var logger = logger
            logger[metadataKey: LogKey.appStoreAttempt] = "\(attempt)"
            switch await exchange(receipt: receipt, environment: environment, logger: logger) {
            case .answer(let response):
                let answeredBy = response.environment ?? environment
                switch response.status.disposition(isRetryableFlag: response.isRetryable) {
                case .valid:
                    return .valid(response, answeredBy: answeredBy)
                case .useSandbox, .useProduction:
                    switches += 1
                    guard switches <= Self.maxEnvironmentSwitches else { return .failed(.environmentLoop) }
                    environment = environment == .production ? .sandbox : .production
                    continue
                case .sharedSecretRejected:
                    return .sharedSecretRejected
                case .invalidReceipt:
                    return .rejected(response.status, answeredBy: answeredBy)
                case .malformedOrTemporary:
                    lastFailure =
                        everyAttemptMalformed
                        ? .malformed(answeredBy: answeredBy) : .failed(.temporaryStatus(response.status))
                case .temporary:
                    everyAttemptMalformed = false
                    lastFailure = .failed(.temporaryStatus(response.status))
                case .permanentError:
                    return .failed(.unexpectedStatus(response.status))
                }
            case .failure(let error):
                everyAttemptMalformed = false
                lastFailure = .failed(error)
                guard Self.isRetryable(error) else { return lastFailure }
            }

            guard attempt < maxAttempts, !Task.isCancelled else { return lastFailure }
            let delay = backoff(afterAttempt: attempt)
            logger.debug(
                "Retrying verifyReceipt",
                metadata: [
                    LogKey.appStoreFailure: "\(Self.reason(lastFailure))",
                    LogKey.retryDelayMS: "\(delay.milliseconds)",
                ])
            do {
                try await Task.sleep(for: delay)
            } catch {
                return lastFailure
            }
            attempt += 1
        }
    }

    /// Full jitter: a uniform delay in `[0, min(max, base * 2^(attempt-1))]`.
    func backoff(afterAttempt attempt: Int) -> Duration {
        let base = configuration.retryBaseDelay.seconds
        let cap = configuration.retryMaxDelay.seconds
        let ceiling = min(cap, base * Double(1 << min(max(attempt - 1, 0), 30)))
        guard ceiling > 0, ceiling.isFinite else { return .zero }
        return .milliseconds(Int64((Double.random(in: 0...ceiling) * 1000).rounded()))
    }

    /// Failures worth another request: Apple or the way to it is having trouble.
    static func isRetryable(_ error: AppStoreClientError) -> Bool {
        switch error {
        case .timeout, .connection, .notJSON, .temporaryStatus: return true
        case .httpStatus(let code): return code >= 500 || code == 429
        case .responseTooLarge, .unexpectedStatus, .environmentLoop: return false
        }
    }

    private static func reason(_ verification: ReceiptVerification) -> String {
        switch verification {
        case .failed(let error): return error.reason
        case .malformed: return "apple_status_21002"
        default: return "unknown"
        }
    }
}

extension Duration {
    /// The duration in seconds, as a floating-point number.
    var seconds: Double {
        let (seconds, attoseconds) = components
        return Double(seconds) + Double(attoseconds) / 1e18
    }

    /// The duration in whole milliseconds.
    var milliseconds: Int64 {
        Int64((seconds * 1000).rounded())
    }
}
