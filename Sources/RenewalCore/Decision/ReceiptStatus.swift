import Foundation

/// The receipt-level verification status (subscription states live on the subscriptions).
public enum ReceiptStatus: String, Sendable, Hashable, Codable, CaseIterable {
    /// Never verified successfully.
    case unverified
    /// Last successful answer was valid.
    case verified
    /// Apple rejects the receipt itself.
    case invalid
}

extension ReceiptStatus {
    /// The state `status` and the held-subscription lookup show for a receipt that holds no subscription
    /// row: a receipt never verified or rejected shows its own status; a valid one shows
    /// `no_subscription` when Apple's answer listed no auto-renewable subscription (`noSubscriptionSince`
    /// set), else `expired` (its subscriptions belong to another user's receipt, so none is its own now).
    public func shownWithoutSubscriptions(noSubscriptionSince: Date?) -> SubscriptionState {
        switch self {
        case .unverified: .unverified
        case .invalid: .invalid
        case .verified: noSubscriptionSince == nil ? .expired : .noSubscription
        }
    }
}

extension ReceiptStatus {
    /// The status of a stored row once an import gives it a new receipt or transaction id: Apple's
    /// verdict that the old receipt is invalid says nothing of the new one, so the row is checked again
    /// (`unverified`); any other status stands until that check.
    public var afterReplacement: ReceiptStatus { self == .invalid ? .unverified : self }
}
