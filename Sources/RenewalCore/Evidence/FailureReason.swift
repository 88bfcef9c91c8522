/// Why one check produced no usable result, as a short stable code: the name a failure has in the
/// report, `run_failures.reason`, `receipts.last_failure_reason`, the `renewal_failures_total{reason}`
/// metric and the dashboard's "failures by reason".
///
/// Open-ended, like `RunStatus`: the stored data may hold a reason a newer version of the job wrote,
/// and Apple's status codes become reasons (`apple_status_21005`) without a closed list. Code compares
/// reasons with the static members and builders below, never with spelled-out strings. Coded as a bare
/// string (the standard library's coding of a `RawRepresentable`).
public struct FailureReason: OpenVocabulary, Codable {
    public var rawValue: String

    public init(rawValue: String) {
        self.rawValue = rawValue
    }

    // The transport and the body, any Apple API.
    /// No answer within the request timeout.
    public static let timeout: FailureReason = "timeout"
    /// The connection could not be made or broke.
    public static let connectionFailed: FailureReason = "connection_failed"
    /// An HTTP status without a usable body (`http_503`).
    public static func http(_ code: Int) -> FailureReason { FailureReason(rawValue: "http_\(code)") }
    /// A body that is not the API's JSON answer (HTML with HTTP 200, truncated JSON, no status).
    public static let invalidAnswer: FailureReason = "invalid_answer"
    /// A JSON answer with a field the job needs that it cannot read.
    public static let unreadableAnswer: FailureReason = "unreadable_answer"
    /// A body over the configured cap.
    public static let responseTooLarge: FailureReason = "response_too_large"

    // verifyReceipt.
    /// A verifyReceipt status the job could not act on (`apple_status_21005`).
    public static func appleStatus(_ status: AppStoreStatus) -> FailureReason {
        FailureReason(rawValue: "apple_status_\(status.rawValue)")
    }
    /// 21007/21008 bounced between the endpoints.
    public static let environmentLoop: FailureReason = "environment_loop"
    /// A verified notification whose `data` could not be decoded: it changes nothing, and is a failure.
    public static let notificationDataUnreadable: FailureReason = "notification_data_unreadable"

    // The App Store Server API.
    /// HTTP 401: the API token was refused.
    public static let serverAPIUnauthorized: FailureReason = "server_api_unauthorized"
    /// Neither environment knows the transaction id.
    public static let transactionNotFound: FailureReason = "transaction_not_found"
    /// HTTP 429 with a pause longer than one check waits.
    public static let rateLimited: FailureReason = "rate_limited"
    /// One of Apple's retryable error codes on every attempt (`server_api_4040002`).
    public static func serverAPICode(_ code: Int) -> FailureReason { FailureReason(rawValue: "server_api_\(code)") }
    /// No transaction id to ask by.
    public static let noTransactionID: FailureReason = "no_transaction_id"
    /// A row imported by transaction id only (no receipt), and no App Store Server API to ask:
    /// no credentials, or `--source verify-receipt`.
    public static let needsServerAPI: FailureReason = "needs_server_api"
    /// `--source server-api` without the API's credentials.
    public static let serverAPINotConfigured: FailureReason = "server_api_not_configured"

    // Signed data (JWS) that fails verification.
    public static let jwsMalformed: FailureReason = "jws_malformed"
    public static let jwsUntrustedChain: FailureReason = "jws_untrusted_chain"
    public static let jwsBadSignature: FailureReason = "jws_bad_signature"
    public static let jwsWrongBundle: FailureReason = "jws_wrong_bundle"
    public static let jwsWrongEnvironment: FailureReason = "jws_wrong_environment"

    // A valid answer that is not about this app.
    /// The answer is for another bundle than `APPSTORE_BUNDLE_ID`.
    public static let wrongBundle: FailureReason = "wrong_bundle"
    /// Every subscription in the answer is of a product this app does not sell.
    public static let unknownProducts: FailureReason = "unknown_products"

    // Several apps (the apps file).
    /// The row's `bundle_id` names an app the apps file does not list: nothing to ask Apple with.
    public static let appNotConfigured: FailureReason = "app_not_configured"
    /// A row of unknown app: every configured app's credentials were tried and Apple refused each.
    public static let noAppAccepted: FailureReason = "no_app_accepted"

    /// A check that ended without an answer or a named failure (should not happen; recorded so it shows).
    public static let unknown: FailureReason = "unknown"
}
