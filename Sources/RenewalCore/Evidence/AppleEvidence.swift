import Foundation

/// Which of Apple's APIs read a receipt: stored per receipt, written on every change event.
public enum CheckSource: String, Sendable, Hashable, Codable, CaseIterable {
    /// The deprecated `verifyReceipt` endpoint, keyed by the stored receipt.
    case verifyReceipt = "verify_receipt"
    /// The App Store Server API (Get All Subscription Statuses), keyed by an original transaction id.
    case serverAPI = "server_api"
}

/// The facts of one valid Apple answer, in Apple-neutral terms: no status codes, no wire format.
public struct AppleEvidence: Sendable, Hashable {
    /// The API that answered.
    public var source: CheckSource
    /// The transaction id the answer was asked by (Server API), or the one a later Server API check
    /// can ask by (verifyReceipt: the subscription that ends last). Nil when the answer holds none.
    public var lookupTransactionID: String?
    /// The environment that answered (`Production`, `Sandbox`).
    public var environment: AppStoreEnvironment?
    /// The app the receipt belongs to, when the answer says.
    public var bundleID: String?
    /// The newer receipt to store, when Apple returned one.
    public var latestReceipt: String?
    /// Every auto-renewable subscription the answer lists, one per original transaction id.
    public var subscriptions: [SubscriptionEvidence]
    /// Purchases in the answer that are not auto-renewable subscriptions (consumables,
    /// non-consumables, non-renewing subscriptions).
    public var otherPurchases: Int
    /// Original transaction ids that only renewal info names (no transaction in the answer shows them):
    /// no evidence of a purchase, so no subscription; the job logs them at debug level.
    public var unmatchedRenewalInfo: [String] = []
    /// What the answer speaks for: the whole receipt, or one subscription (a notification).
    public var scope: EvidenceScope = .receipt

    public init(
        environment: AppStoreEnvironment?, bundleID: String?, latestReceipt: String?,
        subscriptions: [SubscriptionEvidence], otherPurchases: Int = 0, source: CheckSource = .verifyReceipt,
        lookupTransactionID: String? = nil
    ) {
        self.source = source
        self.lookupTransactionID =
            lookupTransactionID
            ?? subscriptions.max { ($0.expiresAt ?? .distantPast) < ($1.expiresAt ?? .distantPast) }?
            .originalTransactionID
        self.environment = environment
        self.bundleID = bundleID
        self.latestReceipt = latestReceipt
        self.subscriptions = subscriptions
        self.otherPurchases = otherPurchases
    }

    /// The original transaction id of every subscription in the answer: what ownership is decided on.
    public var originalTransactionIDs: [String] { subscriptions.map(\.originalTransactionID) }
}

/// What one valid answer speaks for.
public enum EvidenceScope: Sendable, Hashable {
    /// Every subscription of the receipt: one it no longer lists is unlisted (a status or
    /// verifyReceipt answer).
    case receipt
    /// The one subscription it names; the receipt's others stay exactly as stored (a notification's
    /// signed data).
    case subscription
}

/// Which part of Apple's answer a subscription was read from. Only the latest transactions are the
/// whole story; the receipt's rows are partial, so the job never lets them grant access past the expiry
/// they state, nor move a known expiry backwards (`EntitlementDecision`).
public enum EvidenceBasis: Sendable, Hashable {
    /// The answer's latest transactions: `latest_receipt_info`, or the Server API's signed transaction.
    case latestTransactions
    /// Only the `in_app` rows of the receipt that was sent, which may be older than Apple's latest.
    case receiptTransactions
}

/// What Apple says about one subscription (`original_transaction_id`), before it is judged at an
/// instant: the state comes from `SubscriptionSnapshot(evidence:now:)`.
public struct SubscriptionEvidence: Sendable, Hashable {
    public var originalTransactionID: String
    /// The product of the current transaction.
    public var productID: String?
    /// End of the current paid period.
    public var expiresAt: Date?
    /// Every transaction of it was upgraded away (none grants access any more).
    public var isUpgraded: Bool
    /// Refund or revocation time of the current transaction.
    public var cancelledAt: Date?
    /// Auto-renew on/off; nil when Apple did not say.
    public var autoRenew: Bool?
    public var autoRenewProductID: String?
    public var gracePeriodExpiresAt: Date?
    public var isInBillingRetry: Bool
    /// Apple's `expiration_intent` (1 voluntary, 2 billing, 3 price increase, 4 unavailable, 5 other).
    public var expirationIntent: String?
    public var isTrialPeriod: Bool
    public var isInIntroOfferPeriod: Bool
    /// `PURCHASED` or `FAMILY_SHARED`.
    public var ownershipType: String?
    public var environment: AppStoreEnvironment?
    public var latestTransactionID: String?
    public var subscriptionGroupIdentifier: String?
    /// The part of the answer this was read from.
    public var basis: EvidenceBasis
    /// When Apple signed this evidence (the later of the signed transaction's and renewal info's
    /// `signedDate`); nil for verifyReceipt answers.
    public var signedAt: Date?
    /// The transactions of it the answer shows, for the ledger: verifyReceipt's rows, or the one
    /// signed transaction of a status answer or notification.
    public var transactions: [LedgerTransaction] = []

    public init(
        originalTransactionID: String, productID: String?, expiresAt: Date?, isUpgraded: Bool = false,
        cancelledAt: Date? = nil, autoRenew: Bool?, autoRenewProductID: String? = nil,
        gracePeriodExpiresAt: Date? = nil, isInBillingRetry: Bool = false, expirationIntent: String? = nil,
        isTrialPeriod: Bool = false, isInIntroOfferPeriod: Bool = false, ownershipType: String? = nil,
        environment: AppStoreEnvironment?, latestTransactionID: String? = nil,
        subscriptionGroupIdentifier: String? = nil,
        basis: EvidenceBasis = .latestTransactions, signedAt: Date? = nil
    ) {
        self.signedAt = signedAt
        self.originalTransactionID = originalTransactionID
        self.productID = productID
        self.expiresAt = expiresAt
        self.isUpgraded = isUpgraded
        self.cancelledAt = cancelledAt
        self.autoRenew = autoRenew
        self.autoRenewProductID = autoRenewProductID
        self.gracePeriodExpiresAt = gracePeriodExpiresAt
        self.isInBillingRetry = isInBillingRetry
        self.expirationIntent = expirationIntent
        self.isTrialPeriod = isTrialPeriod
        self.isInIntroOfferPeriod = isInIntroOfferPeriod
        self.ownershipType = ownershipType
        self.environment = environment
        self.latestTransactionID = latestTransactionID
        self.subscriptionGroupIdentifier = subscriptionGroupIdentifier
        self.basis = basis
    }
}
