/// The state of one subscription (docs/design.md §3). Raw values are the contract's strings.
public enum SubscriptionState: String, Sendable, Hashable, Codable, CaseIterable {
    /// Never verified successfully yet.
    case unverified
    /// Paid period not over (auto-renew may be on or off).
    case active
    /// Renewal failed, Apple retrying, inside the billing grace period.
    case gracePeriod = "grace_period"
    /// Renewal failed, Apple still retrying, no (or past) grace period.
    case billingRetry = "billing_retry"
    /// Period over, Apple not retrying.
    case expired
    /// Refunded or revoked (cancellation date on the current transaction).
    case revoked
    /// Apple rejects the receipt itself: 21010, or 21002/21003 persisting over days for a receipt
    /// never verified.
    case invalid
    /// A valid receipt holding no auto-renewable subscription (only consumables or non-renewing
    /// purchases). Shown for the receipt in `status`; checked rarely.
    case noSubscription = "no_subscription"

    /// Whether this state grants access. `unverified` keeps what the row had, which the caller knows.
    public var grantsAccess: Bool {
        switch self {
        case .active, .gracePeriod: return true
        case .unverified, .billingRetry, .expired, .revoked, .invalid, .noSubscription: return false
        }
    }
}
