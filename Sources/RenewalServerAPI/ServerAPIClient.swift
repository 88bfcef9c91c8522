import AsyncHTTPClient
import Crypto
import Foundation
import Logging
import NIOCore
import NIOHTTP1
import RenewalAppStore
import RenewalCore
import ServiceLifecycle
import Synchronization

/// Checks subscriptions with the App Store Server API's Get All Subscription Statuses
/// (`GET /inApps/v1/subscriptions/{transactionId}`), and verifies every signed part of the answer.
///
/// - The environment stored for the row first (production when none); the other one on a 404 (an id
///   the environment does not know, 4040010) and on a 401 from production (an app not released yet).
///   A 401 from both is a configuration error (`.misconfigured`): the run stops and writes nothing.
/// - Apple's retryable codes (4040002, 4040004, 4040006, 5000001), HTTP 5xx, timeouts and broken
///   connections are retried with full jitter, up to `maxAttempts` requests.
/// - A 429 pauses that environment until `Retry-After` (UNIX milliseconds) for every check of this
///   client, then the request is retried; a pause over `maxRetryAfter` fails the check as an outage.
/// - Every request waits for the `RequestBudget` first.
public final class ServerAPIClient: Sendable {
    let httpClient: HTTPClient
    public let configuration: Configuration
    /// Verifies the signed transactions and renewal infos; its chain cache lives as long as the client.
    public let verifier: SignedDataVerifier
    let budget: any RequestBudget
    let observer: (any AppStoreObserver)?
    private let token = Mutex<(value: String, renewAt: Date)?>(nil)
    private let pausedUntil = Mutex<[AppStoreEnvironment: ContinuousClock.Instant]>([:])

    /// The endpoint budgets are kept for.
    static let statusEndpoint = "subscriptions"

    public init(
        httpClient: HTTPClient, configuration: Configuration, budget: (any RequestBudget)? = nil,
        observer: (any AppStoreObserver)? = nil
    ) {
        self.httpClient = httpClient
        self.configuration = configuration
        self.verifier = SignedDataVerifier(rootCertificates: configuration.rootCertificates, bundleID: configuration.bundleID)
        self.budget = budget ?? LocalRequestBudget(rates: RequestRates())
        self.observer = observer
    }

    /// Creates an `HTTPClient`, runs `body` with a client over it, and always shuts it down.
    public static func withServerAPIClient<T>(
        configuration: Configuration, budget: (any RequestBudget)? = nil, observer: (any AppStoreObserver)? = nil,
        _ body: (ServerAPIClient) async throws -> T
    ) async throws -> T {
        let httpConfiguration = AppleHTTP.configuration(
            requestTimeout: configuration.requestTimeout, connectionsPerHost: configuration.maxConnectionsPerHost)
        return try await HTTPClient.withHTTPClient(configuration: httpConfiguration) { httpClient in
            try await body(ServerAPIClient(httpClient: httpClient, configuration: configuration, budget: budget, observer: observer))
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
        let first = preferred == .sandbox ? AppStoreEnvironment.sandbox : .production
        var environment = first
        var unauthorized: Set<AppStoreEnvironment> = []
        var notFound: Set<AppStoreEnvironment> = []
        var attempt = 1
        var rateLimitedRetries = 0
        var lastAnswer = AppleAnswer.transient(ServerAPIError.timeout.checkFailure, isOutage: true)

        while true {
            let other: AppStoreEnvironment = environment == .production ? .sandbox : .production
            let exchanged = await exchange(transactionID: transactionID, environment: environment, logger: logger)
            let retryable: Bool
            switch exchanged {
            case .answer(let response):
                return await evidence(response, transactionID: transactionID, environment: environment)
            case .failure(.notFound):
                notFound.insert(environment)
                guard notFound.contains(other) || unauthorized.contains(other) else {
                    environment = other
                    continue
                }
                return Self.failed(.notFound)
            case .failure(.unauthorized):
                unauthorized.insert(environment)
                if unauthorized.contains(other) {
                    return .misconfigured(ServerAPIError.unauthorized.checkFailure)
                }
                // A 401 from production may be an app not yet released: sandbox decides.
                guard environment == .production, !notFound.contains(other) else { return Self.failed(.unauthorized) }
                environment = other
                continue
            case .failure(.rateLimited(let until)):
                // A 429 costs no attempt: the request waits out Retry-After plus up to a second of
                // jitter (so the checks it paused do not all return at once), at most eight times.
                rateLimitedRetries += 1
                guard until - ContinuousClock.now <= configuration.maxRetryAfter, rateLimitedRetries <= 8 else {
                    return Self.failed(.rateLimited(until: until))
                }
                let jitter = Duration.milliseconds(Int64.random(in: 0...1_000))
                do {
                    try await cancelWhenGracefulShutdown { try await Task.sleep(until: until + jitter, clock: .continuous) }
                } catch {
                    return Self.failed(.rateLimited(until: until))
                }
                continue
            case .failure(let error):
                lastAnswer = Self.failed(error)
                retryable = error.isRetryable
            }
            guard retryable, attempt < max(1, configuration.maxAttempts), !Task.isCancelled, !Task.isShuttingDownGracefully else {
                return lastAnswer
            }
            observer?.retrying()
            let delay = AppStoreClient.fullJitter(
                afterAttempt: attempt, base: configuration.retryBaseDelay, cap: configuration.retryMaxDelay)
            do {
                try await cancelWhenGracefulShutdown { try await Task.sleep(for: delay) }
            } catch {
                return lastAnswer
            }
            attempt += 1
        }
    }

    /// Every signed part verified and mapped; any part that fails verification fails the check.
    private func evidence(_ response: StatusResponse, transactionID: String, environment: AppStoreEnvironment) async -> AppleAnswer {
        do {
            var evidence = try await verifier.evidence(from: response, environment: environment.rawValue)
            evidence.source = .serverAPI
            evidence.lookupTransactionID = transactionID
            return .verified(evidence)
        } catch {
            return .transient(CheckFailure(
                reason: error.reason,
                message: "The App Store Server API's signed answer failed verification (\(error)); the subscription keeps its state and is retried later."),
                isOutage: false)
        }
    }

    static func failed(_ error: ServerAPIError) -> AppleAnswer {
        .transient(error.checkFailure, isOutage: error.isOutage)
    }

    // MARK: - One request

    enum Exchange: Sendable {
        case answer(StatusResponse)
        case failure(ServerAPIError)
    }

    /// Waits for the budget and any 429 pause, sends one request and reads the answer.
    func exchange(transactionID: String, environment: AppStoreEnvironment, logger: Logger) async -> Exchange {
        let path = "/inApps/v1/subscriptions/" + (transactionID.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? "")
        let url = configuration.baseURL(environment) + path
        do {
            if let until = pausedUntil.withLock({ $0[environment] }), until > .now {
                guard until - .now <= configuration.maxRetryAfter else { return .failure(.rateLimited(until: until)) }
                try await Task.sleep(until: until, clock: .continuous)
            }
            try await budget.admit(RequestBucket(endpoint: Self.statusEndpoint, environment: environment))
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
        request.method = .GET
        request.headers.add(name: "Authorization", value: "Bearer " + bearer)
        request.headers.add(name: "Accept", value: "application/json")

        var logger = logger
        logger[metadataKey: LogKey.appStoreEndpoint] = environment == .sandbox ? "sandbox" : "production"
        let started = ContinuousClock.now
        let result = await send(request, environment: environment, logger: logger)
        if let observer {
            let status: String
            switch result {
            case .answer: status = "200"
            case .failure(let error): status = error.reason
            }
            observer.exchanged(status: status, environment: environment, seconds: (ContinuousClock.now - started).seconds)
        }
        return result
    }

    private func send(_ request: HTTPClientRequest, environment: AppStoreEnvironment, logger: Logger) async -> Exchange {
        let response: HTTPClientResponse
        let buffer: ByteBuffer
        switch await AppleHTTP.fetch(
            request, on: httpClient, timeout: configuration.requestTimeout, maxBytes: configuration.maxResponseBytes, logger: logger)
        {
        case .success(let fetched):
            (response, buffer) = fetched
        case .failure(.tooLarge):
            return .failure(.responseTooLarge(limit: configuration.maxResponseBytes))
        case .failure(.transport(.timeout)):
            return .failure(.timeout)
        case .failure(.transport(.connection(let detail))):
            return .failure(.connection(detail))
        case .failure(.transport):
            return .failure(.connection("request failed"))
        }
        let code = Int(response.status.code)
        let body = Data(buffer.readableBytesView)
        logger.trace("Server API answered", metadata: [LogKey.httpStatus: "\(code)", LogKey.responseBytes: "\(body.count)"])
        switch code {
        case 200:
            guard let decoded = try? JSONDecoder().decode(StatusResponse.self, from: body) else {
                return .failure(.notJSON(contentType: response.headers.first(name: "Content-Type"), bytes: body.count))
            }
            return .answer(decoded)
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
            if let apiCode, Self.retryableCodes.contains(apiCode) { return .failure(.retryableCode(apiCode, httpStatus: code)) }
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

    /// Apple sends `Retry-After` as a UNIX time in milliseconds; a small number is read as seconds
    /// to wait (HTTP's own meaning), and none as one second.
    static func retryAfter(_ header: String?, now: Date) -> ContinuousClock.Instant {
        let clockNow = ContinuousClock.now
        guard let text = header?.trimmingCharacters(in: .whitespaces), let value = Double(text), value.isFinite, value >= 0 else {
            return clockNow + .seconds(1)
        }
        let seconds = value > 1e11 ? value / 1000 - now.timeIntervalSince1970 : value
        return clockNow + .milliseconds(Int64((max(0, min(seconds, 86_400)) * 1000).rounded()))
    }
}

extension ServerAPIClient: ReceiptVerifier {
    /// Without a transaction id there is nothing to ask the Server API by.
    public func verify(receipt: String, logger: Logger) async -> AppleAnswer {
        await verify(ReceiptCheck(receipt: receipt), logger: logger)
    }

    /// Asks by the stored transaction id, else one of the stored subscriptions', else the one read
    /// out of the receipt itself.
    public func verify(_ check: ReceiptCheck, logger: Logger) async -> AppleAnswer {
        guard let id = Self.lookupID(for: check) else {
            return .transient(ServerAPIError.noTransactionID.checkFailure, isOutage: false)
        }
        return await statuses(transactionID: id, preferring: check.environment, logger: logger)
    }

    /// The transaction id a check asks by, without asking Apple.
    public static func lookupID(for check: ReceiptCheck) -> String? {
        check.originalTransactionID ?? check.subscriptionIDs.first ?? (try? LegacyReceipt.lookupID(receipt: check.receipt)) ?? nil
    }
}

/// Why a Server API request produced no usable answer. Never holds a token, key or receipt.
public enum ServerAPIError: Error, Sendable, Hashable, CustomStringConvertible {
    case timeout
    case connection(String)
    case unauthorized
    case notFound
    case rateLimited(until: ContinuousClock.Instant)
    case retryableCode(Int, httpStatus: Int)
    case httpStatus(Int, apiCode: Int?)
    case notJSON(contentType: String?, bytes: Int)
    case responseTooLarge(limit: Int)
    case noTransactionID

    public var isOutage: Bool {
        switch self {
        case .timeout, .connection, .rateLimited, .retryableCode, .notJSON: true
        case .httpStatus(let code, _): code >= 500
        case .unauthorized, .notFound, .responseTooLarge, .noTransactionID: false
        }
    }

    var isRetryable: Bool {
        switch self {
        case .timeout, .connection, .rateLimited, .retryableCode, .notJSON: true
        case .httpStatus(let code, _): code >= 500
        case .unauthorized, .notFound, .responseTooLarge, .noTransactionID: false
        }
    }

    public var reason: String {
        switch self {
        case .timeout: "timeout"
        case .connection: "connection_failed"
        case .unauthorized: "server_api_unauthorized"
        case .notFound: "transaction_not_found"
        case .rateLimited: "rate_limited"
        case .retryableCode(let code, _): "server_api_\(code)"
        case .httpStatus(let code, _): "http_\(code)"
        case .notJSON: "invalid_answer"
        case .responseTooLarge: "response_too_large"
        case .noTransactionID: "no_transaction_id"
        }
    }

    public var checkFailure: CheckFailure { CheckFailure(reason: reason, message: description) }

    public var description: String {
        switch self {
        case .timeout: "The App Store Server API did not answer within the request timeout; the subscription keeps its state and is retried later."
        case .connection(let detail): "Could not reach the App Store Server API (\(detail)); the subscription keeps its state and is retried later."
        case .unauthorized:
            "The App Store Server API refused the API token (HTTP 401) in production and sandbox; check APPSTORE_KEY_ID, APPSTORE_ISSUER_ID, APPSTORE_BUNDLE_ID and APPSTORE_PRIVATE_KEY_FILE (the key must be an In-App Purchase key of this app's team)."
        case .notFound: "Neither environment of the App Store Server API knows this transaction id; the subscription keeps its state and is retried later."
        case .rateLimited: "The App Store Server API asked to slow down (HTTP 429) for longer than the job waits; retried later."
        case .retryableCode(let code, let status): "The App Store Server API answered \(code) (HTTP \(status), temporary) on every attempt; retried later."
        case .httpStatus(let code, let apiCode):
            "The App Store Server API answered HTTP \(code)\(apiCode.map { " with error \($0)" } ?? ""); the subscription keeps its state and is retried later."
        case .notJSON(let contentType, let bytes):
            "The App Store Server API's answer was not a JSON status answer (\(contentType ?? "no content type"), \(bytes) bytes); retried later."
        case .responseTooLarge(let limit): "The App Store Server API's answer exceeded \(limit) bytes."
        case .noTransactionID:
            "No transaction id is stored for this receipt and none could be read out of it; it cannot be checked through the App Store Server API (use --source auto or verify-receipt)."
        }
    }
}
