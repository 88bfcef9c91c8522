/// The `status` of a verifyReceipt answer.
///
/// Apple's codes are open-ended: unknown values are kept as numbers, never mapped onto a closed enum.
public struct AppStoreStatus: RawRepresentable, Hashable, Sendable, Codable, CustomStringConvertible {
    public var rawValue: Int

    public init(rawValue: Int) {
        self.rawValue = rawValue
    }

    public init(_ rawValue: Int) {
        self.rawValue = rawValue
    }

    /// The failure reason reports and `run_failures` give this status (`apple_status_21005`).
    public var reason: FailureReason { .appleStatus(self) }

    public init(from decoder: any Decoder) throws {
        self.rawValue = try decoder.singleValueContainer().decode(Int.self)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }

    public var description: String { String(rawValue) }

    /// 0: the receipt is valid (says nothing about whether a subscription is active).
    public static let valid = AppStoreStatus(0)
    /// 21000: the request was not an HTTP POST.
    public static let notPost = AppStoreStatus(21000)
    /// 21002: malformed `receipt-data`, or a temporary problem; try again.
    public static let malformedOrTemporary = AppStoreStatus(21002)
    /// 21003: the receipt could not be authenticated.
    public static let notAuthentic = AppStoreStatus(21003)
    /// 21004: the shared secret does not match the account's.
    public static let sharedSecretRejected = AppStoreStatus(21004)
    /// 21005: the receipt server is temporarily unavailable.
    public static let serverUnavailable = AppStoreStatus(21005)
    /// 21006: valid but expired (iOS 6-style transaction receipts only).
    public static let validButExpired = AppStoreStatus(21006)
    /// 21007: a sandbox receipt was sent to production.
    public static let sandboxReceiptOnProduction = AppStoreStatus(21007)
    /// 21008: a production receipt was sent to sandbox.
    public static let productionReceiptOnSandbox = AppStoreStatus(21008)
    /// 21009: internal data access error; try again later.
    public static let internalDataAccessError = AppStoreStatus(21009)
    /// 21010: the account cannot be found or was deleted.
    public static let accountNotFound = AppStoreStatus(21010)

    /// What the job should do with an answer carrying this status.
    ///
    /// - Parameter isRetryableFlag: the answer's `is-retryable`/`is_retryable` value, which only
    ///   matters for 21100–21199.
    public func disposition(isRetryableFlag: Bool?) -> Disposition {
        switch self {
        case .valid, .validButExpired: return .valid
        case .sandboxReceiptOnProduction: return .useSandbox
        case .productionReceiptOnSandbox: return .useProduction
        case .sharedSecretRejected: return .sharedSecretRejected
        case .notAuthentic, .accountNotFound: return .invalidReceipt
        case .malformedOrTemporary: return .malformedOrTemporary
        case .serverUnavailable, .internalDataAccessError: return .temporary
        default:
            if (21100...21199).contains(rawValue) {
                return isRetryableFlag == true ? .temporary : .permanentError
            }
            return .permanentError
        }
    }

    /// The job's reading of a status code.
    public enum Disposition: Sendable, Hashable {
        /// 0 or 21006: evaluate the transactions.
        case valid
        /// 21007: repeat against the sandbox endpoint.
        case useSandbox
        /// 21008: repeat against the production endpoint.
        case useProduction
        /// 21004: configuration error for the whole run.
        case sharedSecretRejected
        /// 21003, 21010: Apple rejects the receipt itself.
        case invalidReceipt
        /// 21002: malformed or temporary; retried, and only invalid when it persists across checks.
        case malformedOrTemporary
        /// 21005, 21009, retryable 211xx: try again later.
        case temporary
        /// Anything else (21000, 21001, non-retryable 211xx, unknown codes): not valid, not retryable now.
        case permanentError
    }
}
