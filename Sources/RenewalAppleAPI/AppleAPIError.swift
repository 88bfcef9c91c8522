import RenewalCore

/// Why one request to Apple, or one check, gave no usable answer: one type for every Apple API, with
/// one classification (`isOutage`, `isRetryable`) and one set of reasons. Never holds a receipt, a
/// token, a key or a secret.
public enum AppleAPIError: Error, Sendable, Hashable {
    // Any API: the transport and the body.
    /// No answer within the request timeout.
    case timeout
    /// The connection could not be made or broke (a short description of the error, no body).
    case connection(String)
    /// An HTTP status the API does not answer with a usable body, and Apple's `errorCode` if it sent one.
    case httpStatus(Int, apiCode: Int? = nil)
    /// A body that is not the API's JSON answer (HTML, truncated JSON, no status).
    case notJSON(contentType: String?, bytes: Int)
    /// A JSON answer whose field the job needs cannot be read (`path`, e.g.
    /// `latest_receipt_info[0].expires_date_ms`). Apple answered, so this is not an outage.
    case unreadableField(path: String, detail: String)
    /// A body over the configured cap.
    case responseTooLarge(limit: Int)

    // verifyReceipt statuses.
    /// A temporary status (21005, 21009, retryable 211xx) on every attempt.
    case temporaryStatus(AppStoreStatus)
    /// A status the job cannot act on (21000, 21001, non-retryable 211xx, unknown codes).
    case unexpectedStatus(AppStoreStatus)
    /// 21007/21008 bounced between the endpoints.
    case environmentLoop

    // App Store Server API answers.
    /// HTTP 401: the API token was refused.
    case unauthorized
    /// Neither environment knows the transaction id.
    case notFound
    /// HTTP 429 with a pause longer than the job waits within one check.
    case rateLimited(until: ContinuousClock.Instant)
    /// One of Apple's retryable error codes on every attempt.
    case retryableCode(Int, httpStatus: Int)
    /// No transaction id to ask by.
    case noTransactionID

    /// Apple, or the way to it, is in trouble: these feed the circuit breaker.
    public var isOutage: Bool {
        switch self {
        case .timeout, .connection, .notJSON, .temporaryStatus, .rateLimited, .retryableCode: true
        case .httpStatus(let code, _): code >= 500 || code == 429
        case .unreadableField, .responseTooLarge, .unexpectedStatus, .environmentLoop, .unauthorized, .notFound,
            .noTransactionID:
            false
        }
    }

    /// Worth another request within the same check: exactly the outages (an answer Apple gave on
    /// purpose does not change on asking again at once).
    public var isRetryable: Bool { isOutage }

    /// The HTTP status and Apple's `errorCode` of a refusal Apple answered with an error body (nil
    /// otherwise): what a stored answer to an operator action keeps.
    public var appleRefusal: (httpStatus: Int?, errorCode: Int?) {
        switch self {
        case .httpStatus(let status, let code): (status, code)
        case .notFound: (404, nil)
        default: (nil, nil)
        }
    }

    /// A short, stable reason for reports and dashboards (`timeout`, `http_503`, `apple_status_21005`, …).
    public var reason: FailureReason {
        switch self {
        case .timeout: .timeout
        case .connection: .connectionFailed
        case .httpStatus(let code, _): .http(code)
        case .notJSON: .invalidAnswer
        case .unreadableField: .unreadableAnswer
        case .responseTooLarge: .responseTooLarge
        case .temporaryStatus(let status), .unexpectedStatus(let status): status.reason
        case .environmentLoop: .environmentLoop
        case .unauthorized: .serverAPIUnauthorized
        case .notFound: .transactionNotFound
        case .rateLimited: .rateLimited
        case .retryableCode(let code, _): .serverAPICode(code)
        case .noTransactionID: .noTransactionID
        }
    }

    /// The failure as the core records it, worded for the API that failed.
    public func checkFailure(_ api: CheckSource) -> CheckFailure {
        CheckFailure(reason: reason, message: message(api))
    }

    /// The failure as a check that keeps its state: outages feed the circuit breaker.
    public func answer(_ api: CheckSource) -> AppleAnswer {
        .transient(checkFailure(api), isOutage: isOutage)
    }

    /// What happened and what follows, for the report and the logs; no receipt, token or secret.
    public func message(_ api: CheckSource) -> String {
        let verifyReceipt = api == .verifyReceipt
        let who = verifyReceipt ? "Apple" : "The App Store Server API"
        let kept =
            verifyReceipt
            ? "the receipt keeps its state and is retried later"
            : "the subscription keeps its state and is retried later"
        switch self {
        case .timeout:
            return "\(who) did not answer within the request timeout; \(kept)."
        case .connection(let detail):
            return "Could not reach \(verifyReceipt ? "Apple" : "the App Store Server API") (\(detail)); \(kept)."
        case .httpStatus(let code, let apiCode):
            return "\(who) answered HTTP \(code)\(apiCode.map { " with error \($0)" } ?? ""); \(kept)."
        case .notJSON(let contentType, let bytes):
            let what = verifyReceipt ? "a JSON verifyReceipt body" : "a JSON status answer"
            let tail = verifyReceipt ? kept : "retried later"
            return "\(who)'s answer was not \(what) (\(contentType ?? "no content type"), \(bytes) bytes); \(tail)."
        case .unreadableField(let path, let detail):
            return
                """
                \(who)'s answer has an unreadable \(path) (\(detail)); \(kept). Report this answer shape if it \
                persists.
                """
        case .responseTooLarge(let limit):
            return verifyReceipt
                ? "Apple's answer exceeded \(limit) bytes; raise --max-response-bytes if such receipts are expected."
                : "The App Store Server API's answer exceeded \(limit) bytes."
        case .temporaryStatus(let status):
            return "Apple answered status \(status) (temporary) on every attempt; retried later."
        case .unexpectedStatus(let status):
            return "Apple answered status \(status), which the job cannot act on; the receipt keeps its state."
        case .environmentLoop:
            return "Production and sandbox each sent the receipt to the other (21007/21008); check the configured URLs."
        case .unauthorized:
            return
                """
                The App Store Server API refused the API token (HTTP 401) in production and sandbox; check \
                APPSTORE_KEY_ID, APPSTORE_ISSUER_ID, APPSTORE_BUNDLE_ID and APPSTORE_PRIVATE_KEY_FILE (the key \
                must be an In-App Purchase key of this app's team).
                """
        case .notFound:
            return
                """
                Neither environment of the App Store Server API knows this transaction id; the subscription keeps \
                its state and is retried later.
                """
        case .rateLimited:
            return
                "The App Store Server API asked to slow down (HTTP 429) for longer than the job waits; retried later."
        case .retryableCode(let code, let status):
            return
                "The App Store Server API answered \(code) (HTTP \(status), temporary) on every attempt; retried later."
        case .noTransactionID:
            return
                """
                No transaction id is stored for this receipt and none could be read out of it; it cannot be \
                checked through the App Store Server API (use --source auto or verify-receipt).
                """
        }
    }
}
