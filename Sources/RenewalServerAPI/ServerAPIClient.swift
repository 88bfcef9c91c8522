import AsyncHTTPClient
import Crypto
import Foundation
import Logging
import NIOCore
import NIOHTTP1
import RenewalAppleAPI
import RenewalCore
import Synchronization

/// Checks subscriptions with the App Store Server API's Get All Subscription Statuses
/// (`GET /inApps/v1/subscriptions/{transactionId}`) through the shared `AppleTransport`, and verifies
/// every signed part of the answer.
///
/// - The environment stored for the row first (production when none); the other one on a 404 (an id
///   the environment does not know, 4040010) and on a 401 from production (an app not released yet).
///   A 401 from both is a configuration error (`.misconfigured`): the run stops and writes nothing.
/// - Apple's retryable codes (4040002, 4040004, 4040006, 5000001), HTTP 5xx, timeouts and broken
///   connections are retried by the shared `RetryPolicy`.
/// - A 429 pauses that environment until `Retry-After` (UNIX milliseconds) for every check of this
///   client, then the request is retried; a pause over `maxRetryAfter` fails the check as an outage.
/// - Every request waits for the `RequestBudget` first.
public final class ServerAPIClient: Sendable {
    /// The HTTP layer shared with the other Apple clients.
    let transport: AppleTransport
    public let configuration: Configuration
    /// Verifies the signed transactions and renewal infos; its chain cache lives as long as the client.
    public let verifier: SignedDataVerifier
    let budget: any RequestBudget
    private let token = Mutex<(value: String, renewAt: Date)?>(nil)
    private let pausedUntil = Mutex<[AppStoreEnvironment: ContinuousClock.Instant]>([:])

    /// The endpoint budgets are kept for.
    static let statusEndpoint = "subscriptions"

    public init(transport: AppleTransport, configuration: Configuration, budget: (any RequestBudget)? = nil) {
        self.transport = transport
        self.configuration = configuration
        self.verifier = SignedDataVerifier(
            rootCertificates: configuration.rootCertificates, bundleID: configuration.bundleID)
        self.budget = budget ?? LocalRequestBudget(rates: RequestRates())
    }

    /// Creates a transport of its own, runs `body` with a client over it, and always shuts it down.
    public static func withServerAPIClient<T>(
        configuration: Configuration, budget: (any RequestBudget)? = nil, observer: (any AppStoreObserver)? = nil,
        _ body: (ServerAPIClient) async throws -> T
    ) async throws -> T {
        try await AppleTransport.withAppleTransport(
            requestTimeout: configuration.requestTimeout, connectionsPerHost: configuration.maxConnectionsPerHost,
            observer: observer
        ) { transport in
            try await body(ServerAPIClient(transport: transport, configuration: configuration, budget: budget))
        }
    }

    /// The bearer token, signed again a minute before it expires.
    func bearerToken(now: Date = Date()) throws -> String {
        try token.withLock { cached in
            if let cached, now < cached.renewAt { return cached.value }
            let claims = ServerAPIToken(
                keyID: configuration.keyID, issuerID: configuration.issuerID, bundleID: configuration.bundleID,
                lifetime: configuration.tokenLifetime)
            let value = try claims.signed(with: configuration.privateKey, now: now)
            cached = (value, now.addingTimeInterval(max(claims.lifetime - 60, claims.lifetime / 2)))
            return value
        }
    }

    /// All subscription statuses of the customer who owns `transactionID`, as evidence.
    public func statuses(
        transactionID: String, preferring preferred: AppStoreEnvironment? = nil, logger: Logger
    ) async -> AppleAnswer {
        var environment = preferred == .sandbox ? AppStoreEnvironment.sandbox : .production
        var unauthorized: Set<AppStoreEnvironment> = []
        var notFound: Set<AppStoreEnvironment> = []
        var rateLimitedRetries = 0
        return await configuration.retryPolicy.run(
            observer: transport.observer, logger: logger, reason: \.failureReason
        ) {
            _ in
            let other: AppStoreEnvironment = environment == .production ? .sandbox : .production
            switch await exchange(transactionID: transactionID, environment: environment, logger: logger) {
            case .success(let response):
                return .finish(await evidence(response, transactionID: transactionID, environment: environment))
            case .failure(.notFound):
                notFound.insert(environment)
                guard notFound.contains(other) || unauthorized.contains(other) else {
                    environment = other
                    return .redirect
                }
                return .finish(AppleAPIError.notFound.answer(.serverAPI))
            case .failure(.unauthorized):
                unauthorized.insert(environment)
                if unauthorized.contains(other) {
                    return .finish(.misconfigured(AppleAPIError.unauthorized.checkFailure(.serverAPI)))
                }
                // A 401 from production may be an app not yet released: sandbox decides.
                guard environment == .production, !notFound.contains(other) else {
                    return .finish(AppleAPIError.unauthorized.answer(.serverAPI))
                }
                environment = other
                return .redirect
            case .failure(.rateLimited(let until)):
                // A 429 costs no attempt: the request waits out Retry-After plus up to a second of
                // jitter (so the checks it paused do not all return at once), at most eight times.
                rateLimitedRetries += 1
                let limited = AppleAPIError.rateLimited(until: until).answer(.serverAPI)
                guard until - ContinuousClock.now <= configuration.maxRetryAfter, rateLimitedRetries <= 8 else {
                    return .finish(limited)
                }
                return .wait(until: until + .milliseconds(Int64.random(in: 0...1_000)), limited)
            case .failure(let error):
                return error.isRetryable ? .retry(error.answer(.serverAPI)) : .finish(error.answer(.serverAPI))
            }
        }
    }

    /// Every signed part verified and mapped; any part that fails verification fails the check.
    private func evidence(_ response: StatusResponse, transactionID: String, environment: AppStoreEnvironment) async
        -> AppleAnswer
    {
        do {
            var evidence = try await verifier.evidence(from: response, environment: environment.rawValue)
            evidence.source = .serverAPI
            evidence.lookupTransactionID = transactionID
            return .verified(evidence)
        } catch {
            return .transient(
                CheckFailure(
                    reason: error.reason,
                    message:
                        """
                        The App Store Server API's signed answer failed verification (\(error)); the subscription \
                        keeps its state and is retried later.
                        """
                ),
                isOutage: false)
        }
    }

    /// Get All Subscription Statuses for `transactionID` in one environment: one request.
    func exchange(transactionID: String, environment: AppStoreEnvironment, logger: Logger) async -> Result<
        StatusResponse, AppleAPIError
    > {
        let path =
            "/inApps/v1/subscriptions/"
            + (transactionID.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? "")
        return await exchange(path, environment: environment, logger: logger, as: StatusResponse.self)
    }

    /// Waits for the budget (every endpoint draws on the status budget, which the app's own traffic
    /// shares) and any 429 pause, sends one request (a POST when `body` is given) and reads the answer.
    func exchange<Answer: Decodable>(
        _ path: String, method: HTTPMethod? = nil, body: Data? = nil, environment: AppStoreEnvironment,
        logger: Logger, as: Answer.Type
    ) async -> Result<Answer, AppleAPIError> {
        let url = configuration.baseURL(environment) + path
        do {
            if let until = pausedUntil.withLock({ $0[environment] }), until > .now {
                guard until - .now <= configuration.maxRetryAfter else { return .failure(.rateLimited(until: until)) }
                try await Task.sleep(until: until, clock: .continuous)
            }
            try await budget.admit(
                RequestBucket(endpoint: Self.statusEndpoint, environment: environment, app: configuration.budgetApp))
        } catch {
            return .failure(.connection("cancelled"))
        }
        let bearer: String
        do {
            bearer = try bearerToken()
        } catch {
            return .failure(.connection("the API token could not be signed"))
        }
        var request = HTTPClientRequest(url: url)
        request.method = method ?? (body == nil ? .GET : .POST)
        request.headers.add(name: "Authorization", value: "Bearer " + bearer)
        request.headers.add(name: "Accept", value: "application/json")
        if let body {
            request.headers.add(name: "Content-Type", value: "application/json")
            request.body = .bytes(ByteBuffer(bytes: body))
        }

        var logger = logger
        logger[metadataKey: LogKey.appStoreEndpoint] = environment == .sandbox ? "sandbox" : "production"
        return await transport.timed(environment, status: Self.observedStatus) {
            await send(request, environment: environment, logger: logger, as: Answer.self)
        }
    }

    /// `200` for an answer, the failure's reason otherwise.
    static func observedStatus<Answer>(_ exchanged: Result<Answer, AppleAPIError>) -> String {
        switch exchanged {
        case .success: "200"
        case .failure(let error): error.reason.rawValue
        }
    }

    private func send<Answer: Decodable>(
        _ request: HTTPClientRequest, environment: AppStoreEnvironment, logger: Logger, as: Answer.Type
    ) async -> Result<Answer, AppleAPIError> {
        let response: HTTPClientResponse
        let buffer: ByteBuffer
        switch await transport.fetch(
            request, timeout: configuration.requestTimeout, maxBytes: configuration.maxResponseBytes, logger: logger)
        {
        case .success(let fetched):
            (response, buffer) = fetched
        case .failure(let failure):
            return .failure(failure)
        }
        let code = Int(response.status.code)
        let body = Data(buffer.readableBytesView)
        logger.trace(
            "Server API answered", metadata: [LogKey.httpStatus: "\(code)", LogKey.responseBytes: "\(body.count)"])
        switch code {
        case 200, 202:
            // An answer without a body (Send Consumption Information's 202).
            if let empty = NoContent() as? Answer { return .success(empty) }
            guard let decoded = try? JSONDecoder().decode(Answer.self, from: body) else {
                return .failure(.notJSON(contentType: response.headers.first(name: "Content-Type"), bytes: body.count))
            }
            return .success(decoded)
        case 401:
            return .failure(.unauthorized)
        case 429:
            let until = Self.retryAfter(response.headers.first(name: "Retry-After"), now: Date())
            pausedUntil.withLock { paused in
                paused[environment] = max(paused[environment] ?? until, until)
            }
            return .failure(.rateLimited(until: until))
        default:
            let apiCode = (try? JSONDecoder().decode(ErrorBody.self, from: body))?.errorCode
            if let apiCode, Self.retryableCodes.contains(apiCode) {
                return .failure(.retryableCode(apiCode, httpStatus: code))
            }
            if code == 404 { return .failure(.notFound) }
            return .failure(.httpStatus(code, apiCode: apiCode))
        }
    }

    /// Apple's retryable error codes: account, app and original transaction not found yet, and
    /// general internal errors.
    static let retryableCodes: Set<Int> = [4_040_002, 4_040_004, 4_040_006, 5_000_001]

    struct ErrorBody: Decodable {
        var errorCode: Int?
    }

    /// The answer of a call whose success carries no body.
    struct NoContent: Decodable {}

    /// Apple sends `Retry-After` as a UNIX time in milliseconds; a small number is read as seconds
    /// to wait (HTTP's own meaning), and none as one second.
    static func retryAfter(_ header: String?, now: Date) -> ContinuousClock.Instant {
        let clockNow = ContinuousClock.now
        guard let text = header?.trimmingCharacters(in: .whitespaces), let value = Double(text), value.isFinite,
            value >= 0
        else {
            return clockNow + .seconds(1)
        }
        let seconds = value > 1e11 ? value / 1000 - now.timeIntervalSince1970 : value
        return clockNow + .milliseconds(Int64((max(0, min(seconds, 86_400)) * 1000).rounded()))
    }
}

extension ServerAPIClient: TransactionVerifier {
    public func transactionID(for check: ReceiptCheck) -> String? {
        Self.lookupID(for: check)
    }

    public func verify(transactionID: String, preferring environment: AppStoreEnvironment?, logger: Logger) async
        -> AppleAnswer
    {
        await statuses(transactionID: transactionID, preferring: environment, logger: logger)
    }

    /// Without a transaction id there is nothing to ask the Server API by.
    public func verify(receipt: String, logger: Logger) async -> AppleAnswer {
        await verify(ReceiptCheck(receipt: receipt), logger: logger)
    }

    /// Asks by the stored transaction id, else one of the stored subscriptions', else the one read
    /// out of the receipt itself.
    public func verify(_ check: ReceiptCheck, logger: Logger) async -> AppleAnswer {
        guard let id = Self.lookupID(for: check) else {
            return AppleAPIError.noTransactionID.answer(.serverAPI)
        }
        return await statuses(transactionID: id, preferring: check.environment, logger: logger)
    }

    /// The transaction id a check asks by, without asking Apple.
    public static func lookupID(for check: ReceiptCheck) -> String? {
        check.originalTransactionID ?? check.subscriptionIDs.first
            ?? check.receipt.flatMap { try? LegacyReceipt.lookupID(receipt: $0) }
    }
}
