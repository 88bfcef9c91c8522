import Foundation

/// What Apple's answer says about one subscription (`original_transaction_id`) at one instant.
public struct SubscriptionSnapshot: Sendable, Hashable, Codable {
    public var originalTransactionID: String
    public var productID: String?
    public var state: SubscriptionState
    /// End of the current paid period.
    public var expiresAt: Date?
    /// Auto-renew on/off; nil when Apple did not say.
    public var autoRenew: Bool?
    public var autoRenewProductID: String?
    public var gracePeriodExpiresAt: Date?
    public var isInBillingRetry: Bool
    /// Refund or revocation time of the current transaction.
    public var cancelledAt: Date?
    public var expirationIntent: String?
    public var isTrialPeriod: Bool
    public var isInIntroOfferPeriod: Bool
    /// `PURCHASED` or `FAMILY_SHARED`.
    public var ownershipType: String?
    public var environment: AppStoreEnvironment?
    public var latestTransactionID: String?
    public var subscriptionGroupIdentifier: String?

    public init(
        originalTransactionID: String, productID: String?, state: SubscriptionState, expiresAt: Date?,
        autoRenew: Bool?, autoRenewProductID: String? = nil, gracePeriodExpiresAt: Date? = nil,
        isInBillingRetry: Bool = false, cancelledAt: Date? = nil, expirationIntent: String? = nil,
        isTrialPeriod: Bool = false, isInIntroOfferPeriod: Bool = false, ownershipType: String? = nil,
        environment: AppStoreEnvironment?, latestTransactionID: String? = nil,
        subscriptionGroupIdentifier: String? = nil
    ) {
        self.originalTransactionID = originalTransactionID
        self.productID = productID
        self.state = state
        self.expiresAt = expiresAt
        self.autoRenew = autoRenew
        self.autoRenewProductID = autoRenewProductID
        self.gracePeriodExpiresAt = gracePeriodExpiresAt
        self.isInBillingRetry = isInBillingRetry
        self.cancelledAt = cancelledAt
        self.expirationIntent = expirationIntent
        self.isTrialPeriod = isTrialPeriod
        self.isInIntroOfferPeriod = isInIntroOfferPeriod
        self.ownershipType = ownershipType
        self.environment = environment
        self.latestTransactionID = latestTransactionID
        self.subscriptionGroupIdentifier = subscriptionGroupIdentifier
    }

    /// Whether the subscriber has access.
    public var entitled: Bool { state.grantsAccess }

    /// When access ends without new evidence: the grace period's end while in it, else the expiry.
    public var entitlementEndsAt: Date? {
        state == .gracePeriod ? (gracePeriodExpiresAt ?? expiresAt) : expiresAt
    }

    /// Family-shared purchases are visible as such, so dashboards never count them as revenue.
    public var isFamilyShared: Bool { ownershipType == "FAMILY_SHARED" }
}
