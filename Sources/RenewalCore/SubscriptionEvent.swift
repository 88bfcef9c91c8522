import Foundation

/// An entitlement change: the difference between the stored and the derived state of one subscription.
public struct SubscriptionEvent: Sendable, Hashable, Codable {
    /// The kinds of docs/design.md §3; raw values are the contract's strings.
    public enum Kind: String, Sendable, Hashable, Codable, CaseIterable {
        /// First successful check of a receipt's subscription.
        case verified
        /// A new paid period (or a return after expiry).
        case renewed
        case expired
        /// A renewal failed and Apple is retrying without (or after) a grace period.
        case billingIssue = "billing_issue"
        case gracePeriodStarted = "grace_period_started"
        /// A failed renewal was collected.
        case billingRecovered = "billing_recovered"
        case autoRenewDisabled = "auto_renew_disabled"
        case autoRenewEnabled = "auto_renew_enabled"
        case productChanged = "product_changed"
        case refunded
        /// Apple took back the refund: the same transaction lost its cancellation.
        case refundReversed = "refund_reversed"
        /// A new purchase after a refund or revocation: a new paid period, not a reversed refund.
        case resubscribed
        case invalidated
        /// A subscription Apple's answer no longer lists (the receipt was replaced, say) lost its
        /// entitlement when its last known expiry passed.
        case expiredUnlisted = "expired_unlisted"
        /// The receipt's first valid answer holds no auto-renewable subscription (recorded once).
        case noSubscription = "no_subscription"
        /// A purchase the app's server never stored, adopted from the change feed with no user yet
        /// (`PurchaseAdoption`): the app may reach the customer or wait for a claim.
        case purchaseUnclaimed = "purchase_unclaimed"
        /// An adopted (or reassigned) purchase now belongs to the change's user: restore their access.
        case purchaseClaimed = "purchase_claimed"
    }

    public var kind: Kind
    public var originalTransactionID: String?
    public var productID: String?
    /// The product before a `product_changed` change (an upgrade, downgrade or crossgrade); nil on
    /// other kinds, whose product did not change.
    public var fromProductID: String?
    public var fromState: SubscriptionState
    public var toState: SubscriptionState
    public var oldExpiresAt: Date?
    public var newExpiresAt: Date?
    public var environment: AppStoreEnvironment?
    /// Of a `refunded` change: Apple's `revocationType` (`REFUND_FULL`, `REFUND_PRORATED`,
    /// `FAMILY_REVOKE`) and the share of the price returned in milliunits (`revocationPercentage`, 50000
    /// is 50 %), when Apple's answer gave them; nil on other kinds.
    public var revocationType: String?
    public var revocationPercentage: Int?

    public init(
        kind: Kind, originalTransactionID: String?, productID: String?, fromState: SubscriptionState,
        toState: SubscriptionState, oldExpiresAt: Date?, newExpiresAt: Date?, environment: AppStoreEnvironment?,
        fromProductID: String? = nil
    ) {
        self.kind = kind
        self.fromProductID = fromProductID
        self.originalTransactionID = originalTransactionID
        self.productID = productID
        self.fromState = fromState
        self.toState = toState
        self.oldExpiresAt = oldExpiresAt
        self.newExpiresAt = newExpiresAt
        self.environment = environment
    }
}
