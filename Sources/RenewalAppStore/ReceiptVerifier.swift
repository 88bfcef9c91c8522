import Logging
import RenewalCore

/// Something that asks Apple about one stored receipt and answers in the core's source-neutral
/// terms. `AppStoreClient` is the verifyReceipt implementation; the App Store Server API client
/// conforms too, so the job never sees a wire format or a status code.
public protocol ReceiptVerifier: Sendable {
    /// Asks Apple about one receipt, retrying temporary failures within the verifier's own bounds.
    /// Never throws for per-receipt problems: they are answers (`.transient`, `.rejected`).
    func verify(receipt: String, logger: Logger) async -> AppleAnswer

    /// Asks Apple about one stored receipt, knowing what the database knows of it (the transaction
    /// id a Server API check asks by, its environment, the source that read it last). The default
    /// asks by the receipt alone.
    func verify(_ check: ReceiptCheck, logger: Logger) async -> AppleAnswer
}

extension ReceiptVerifier {
    public func verify(_ check: ReceiptCheck, logger: Logger) async -> AppleAnswer {
        await verify(receipt: check.receipt, logger: logger)
    }
}

/// One stored receipt as a verifier sees it. Never logged: `receipt` is the customer's receipt.
public struct ReceiptCheck: Sendable, Hashable {
    /// The stored `latest_receipt`.
    public var receipt: String
    /// The original transaction id stored for the receipt by an earlier answer, if any.
    public var originalTransactionID: String?
    /// The original transaction ids of the subscriptions stored for the receipt.
    public var subscriptionIDs: [String]
    /// The environment that answered last, if any.
    public var environment: AppStoreEnvironment?
    /// The API that read the receipt last; nil when it was never read.
    public var source: CheckSource?

    public init(
        receipt: String, originalTransactionID: String? = nil, subscriptionIDs: [String] = [],
        environment: AppStoreEnvironment? = nil, source: CheckSource? = nil
    ) {
        self.receipt = receipt
        self.originalTransactionID = originalTransactionID
        self.subscriptionIDs = subscriptionIDs
        self.environment = environment
        self.source = source
    }
}

/// Why a verification produced no usable answer. Descriptions never contain receipt data or secrets.
public enum AppStoreClientError: Error, Sendable, Hashable, CustomStringConvertible {
    /// No answer within the request timeout.
    case timeout
    /// The connection could not be made or broke (the underlying error's description, no body).
    case connection(String)
    /// A non-200 HTTP status.
    case httpStatus(Int)
    /// A body that is not a JSON verifyReceipt answer (HTML, truncated JSON, no status).
    case notJSON(contentType: String?, bytes: Int)
    /// A JSON answer with a status whose field the job needs cannot be read (`path`, e.g.
    /// `latest_receipt_info[0].expires_date_ms`). Apple answered, so this is not an outage.
    case unreadableField(path: String, detail: String)
    /// A body over the configured cap.
    case responseTooLarge(limit: Int)
    /// A temporary Apple status (21005, 21009, retryable 211xx) on every attempt.
    case temporaryStatus(AppStoreStatus)
    /// A status the job cannot act on (21000, 21001, non-retryable 211xx, unknown codes).
    case unexpectedStatus(AppStoreStatus)
    /// 21007/21008 bounced between the endpoints.
    case environmentLoop

    /// True when the failure says Apple (or the way to it) is unavailable: these feed the circuit breaker.
    public var isOutage: Bool {
        switch self {
        case .timeout, .connection, .notJSON, .temporaryStatus: return true
        case .httpStatus(let code): return code >= 500 || code == 429
        case .responseTooLarge, .unexpectedStatus, .environmentLoop, .unreadableField: return false
        }
    }

    /// A short, stable reason for reports and dashboards (`timeout`, `http_503`, `apple_status_21005`, …).
    public var reason: String {
        switch self {
        case .timeout: return "timeout"
        case .connection: return "connection_failed"
        case .httpStatus(let code): return "http_\(code)"
        case .notJSON: return "invalid_answer"
        case .unreadableField: return "unreadable_answer"
        case .responseTooLarge: return "response_too_large"
        case .temporaryStatus(let status): return "apple_status_\(status.rawValue)"
        case .unexpectedStatus(let status): return "apple_status_\(status.rawValue)"
        case .environmentLoop: return "environment_loop"
        }
    }

    /// The failure as the core's record of it.
    public var checkFailure: CheckFailure { CheckFailure(reason: reason, message: description) }

    public var description: String {
        switch self {
        case .timeout: return "Apple did not answer within the request timeout; the receipt keeps its state and is retried later."
        case .connection(let detail): return "Could not reach Apple (\(detail)); the receipt keeps its state and is retried later."
        case .httpStatus(let code): return "Apple answered HTTP \(code); the receipt keeps its state and is retried later."
        case .notJSON(let contentType, let bytes):
            return "Apple's answer was not a JSON verifyReceipt body (\(contentType ?? "no content type"), \(bytes) bytes); the receipt keeps its state and is retried later."
        case .unreadableField(let path, let detail):
            return "Apple's answer has an unreadable \(path) (\(detail)); the receipt keeps its state and is retried later. Report this answer shape if it persists."
        case .responseTooLarge(let limit):
            return "Apple's answer exceeded \(limit) bytes; raise --max-response-bytes if such receipts are expected."
        case .temporaryStatus(let status): return "Apple answered status \(status) (temporary) on every attempt; retried later."
        case .unexpectedStatus(let status): return "Apple answered status \(status), which the job cannot act on; the receipt keeps its state."
        case .environmentLoop: return "Production and sandbox each sent the receipt to the other (21007/21008); check the configured URLs."
        }
    }
}
