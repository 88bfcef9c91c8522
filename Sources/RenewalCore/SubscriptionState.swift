/// The state of one subscription (DESIGN.md §3). Raw values are the contract's strings.
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
    /// Apple rejects the receipt itself (21003, 21010, persistent 21002).
    case invalid

    /// Whether this state grants access. `unverified` keeps what the row had, which the caller knows.
    public var grantsAccess: Bool {
        switch self {
        case .active, .gracePeriod: return true
        case .unverified, .billingRetry, .expired, .revoked, .invalid: return false
        }
    }
}
