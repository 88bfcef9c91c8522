import Logging
import RenewalAppleAPI
import RenewalCore

/// Verifies receipts with Apple's verifyReceipt endpoint, through the shared `AppleTransport`.
///
/// Production first; 21007 repeats against sandbox and 21008 against production (bounded). Temporary
/// failures are retried by the shared `RetryPolicy`. Per-receipt problems are answers
/// (`AppleAnswer.transient`, `.rejected`), never thrown.
public final class AppStoreClient: ReceiptVerifier {
    /// The HTTP layer shared with the other Apple clients; owned by whoever created it.
    let transport: AppleTransport
    /// The endpoints, secret, timeouts and retry bounds.
    public let configuration: Configuration

    /// The most 21007/21008 redirects followed for one receipt before `.environmentLoop`.
    static let maxEnvironmentSwitches = 2

    /// Creates a client over an existing transport; the caller shuts that transport's client down.
    public init(transport: AppleTransport, configuration: Configuration) {
        self.transport = transport
        self.configuration = configuration
    }

    /// Creates a transport of its own, runs `body` with a client over it, and always shuts it down.
    public static func withAppStoreClient<T>(
        configuration: Configuration,
        observer: (any AppStoreObserver)? = nil,
        _ body: (AppStoreClient) async throws -> T
    ) async throws -> T {
        try await AppleTransport.withAppleTransport(
            requestTimeout: configuration.requestTimeout, connectionsPerHost: configuration.maxConnectionsPerHost,
            observer: observer
        ) { transport in
            try await body(AppStoreClient(transport: transport, configuration: configuration))
        }
    }

    /// Verifies one receipt; see the type's documentation for the retry and environment rules.
    ///
    /// This is the one home of verifyReceipt's status codes: 0/21006 are evidence, 21007/21008 switch
    /// endpoints, 21004 is a configuration error, 21003/21010 and a 21002 on every attempt are
    /// rejections, 21005/21009/retryable 211xx are outages, anything else is a failure that is not.
    public func verify(receipt: String, logger: Logger) async -> AppleAnswer {
        await verify(receipt: receipt, excludingOld: configuration.excludeOldTransactions, logger: logger)
    }

    /// Asks with every transaction listed when the ledger lacks the receipt's history.
    public func verify(_ check: ReceiptCheck, logger: Logger) async -> AppleAnswer {
        guard let receipt = check.receipt else { return .transient(.needsServerAPI, isOutage: false) }
        let excludingOld = check.wantsHistory ? false : configuration.excludeOldTransactions
        return await verify(receipt: receipt, excludingOld: excludingOld, logger: logger)
    }

    private func verify(receipt: String, excludingOld: Bool, logger: Logger) async -> AppleAnswer {
        var environment = AppStoreEnvironment.production
        var switches = 0
        var everyAttemptMalformed = true
        return await configuration.retryPolicy.run(
            observer: transport.observer, logger: logger, reason: \.failureReason
        ) {
            attempt in
            var logger = logger
            // Metadata costs a copy and a re-render of the handler's metadata: only when it can show.
            if logger.logLevel <= .debug { logger[metadataKey: LogKey.appStoreAttempt] = "\(attempt)" }
            switch await exchange(
                receipt: receipt, environment: environment, excludingOld: excludingOld, logger: logger)
            {
            case .success(let response):
                let answeredBy = response.environment ?? environment
                switch response.status.disposition(isRetryableFlag: response.isRetryable) {
                case .valid:
                    return .finish(.verified(AppleEvidence(verifyReceipt: response, answeredBy: answeredBy)))
                case .useSandbox, .useProduction:
                    switches += 1
                    guard switches <= Self.maxEnvironmentSwitches else {
                        return .finish(AppleAPIError.environmentLoop.answer(.verifyReceipt))
                    }
                    environment = environment == .production ? .sandbox : .production
                    return .redirect
                case .sharedSecretRejected:
                    return .finish(
                        .misconfigured(
                            CheckFailure(
                                reason: .appleStatus(.sharedSecretRejected),
                                message:
                                    """
                                    Apple rejected the shared secret (21004); set APPSTORE_SHARED_SECRET to the \
                                    app's shared secret.
                                    """
                            )))
                case .invalidReceipt:
                    let kind: AppleRejection.Kind =
                        response.status == .accountNotFound ? .accountNotFound : .notAuthentic
                    return .finish(
                        .rejected(AppleRejection(kind: kind, status: response.status, environment: answeredBy)))
                case .malformedOrTemporary:
                    return .retry(
                        everyAttemptMalformed
                            ? .rejected(
                                AppleRejection(
                                    kind: .malformedOrTemporary, status: response.status, environment: answeredBy))
                            : AppleAPIError.temporaryStatus(response.status).answer(.verifyReceipt))
                case .temporary:
                    everyAttemptMalformed = false
                    return .retry(AppleAPIError.temporaryStatus(response.status).answer(.verifyReceipt))
                case .permanentError:
                    return .finish(AppleAPIError.unexpectedStatus(response.status).answer(.verifyReceipt))
                }
            case .failure(let error):
                everyAttemptMalformed = false
                return error.isRetryable ? .retry(error.answer(.verifyReceipt)) : .finish(error.answer(.verifyReceipt))
            }
        }
    }
}
