/// What Apple said about one stored receipt, whichever of Apple's APIs asked (verifyReceipt or the
/// App Store Server API). Each Apple client turns its own wire format and status
/// codes into this; the job decides what to write from it alone (`EntitlementDecision`).
public enum AppleAnswer: Sendable, Hashable {
    /// A valid answer: the facts of every subscription it lists.
    case verified(AppleEvidence)
    /// Apple refuses the receipt itself (21002 on every attempt, 21003, 21010).
    case rejected(AppleRejection)
    /// No usable answer: an outage, a timeout, a body that is not Apple's, a temporary status, or a
    /// field the job needs that it cannot read. The state stays and the receipt is retried later.
    /// `isOutage` says the failure is Apple's (or the network's): those feed the circuit breaker.
    case transient(CheckFailure, isOutage: Bool)
    /// The job's own configuration is wrong for every receipt (21004: the shared secret); the run stops.
    case misconfigured(CheckFailure)

    /// Why the check gave no usable result; nil for a valid answer.
    public var failureReason: FailureReason? {
        switch self {
        case .verified: nil
        case .rejected(let rejection): rejection.reason
        case .transient(let failure, _), .misconfigured(let failure): failure.reason
        }
    }
}

/// Apple refusing a receipt. Only `accountNotFound` proves there is no entitlement; 21002 and 21003
/// never take away what a valid answer granted (`EntitlementDecision` holds the rules).
public struct AppleRejection: Sendable, Hashable {
    public enum Kind: Sendable, Hashable {
        /// 21002 on every attempt: malformed, or (Apple's own words) a temporary problem.
        case malformedOrTemporary
        /// 21003: the receipt could not be authenticated.
        case notAuthentic
        /// 21010: the account cannot be found or was deleted.
        case accountNotFound
    }

    public var kind: Kind
    /// Apple's code, kept for reports (`apple_status_21002`, …).
    public var status: AppStoreStatus
    /// The environment that answered.
    public var environment: AppStoreEnvironment?

    public init(kind: Kind, status: AppStoreStatus, environment: AppStoreEnvironment?) {
        self.kind = kind
        self.status = status
        self.environment = environment
    }

    /// The short stable reason reports and `run_failures` use.
    public var reason: FailureReason { status.reason }
}

/// Why one receipt's check produced no usable result. Never contains receipt data or secrets.
public struct CheckFailure: Sendable, Hashable, Codable {
    /// Short stable code: `timeout`, `http_503`, `apple_status_21005`, `invalid_answer`,
    /// `unreadable_answer`, `wrong_bundle`, `unknown_products`, …
    public var reason: FailureReason
    /// A sentence for humans naming the problem and what happens next.
    public var message: String

    public init(reason: FailureReason, message: String) {
        self.reason = reason
        self.message = message
    }

    /// A row imported by transaction id only (StoreKit 2, no receipt) that this run cannot ask the
    /// App Store Server API about.
    public static let needsServerAPI = CheckFailure(
        reason: .needsServerAPI,
        message: """
            This subscription was imported by transaction id, without a receipt: only the App Store Server API \
            can check it. Set APPSTORE_KEY_ID, APPSTORE_ISSUER_ID, APPSTORE_BUNDLE_ID and \
            APPSTORE_PRIVATE_KEY_FILE, and run with --source auto or server-api; its state is kept until then.
            """)
}
