import Foundation

extension SubscriptionEvent {
    /// The entitlement changes between what is stored and what Apple's answer now says.
    ///
    /// A first check yields exactly one `verified` event. Otherwise a state change yields one event
    /// named for the transition, and auto-renew and product changes add their own. A re-check that
    /// changes nothing yields nothing.
    public static func events(from stored: SubscriptionSnapshot?, to derived: SubscriptionSnapshot)
        -> [SubscriptionEvent]
    {
        let from = stored?.state ?? .unverified
        func event(_ kind: Kind) -> SubscriptionEvent {
            SubscriptionEvent(
                kind: kind, originalTransactionID: derived.originalTransactionID, productID: derived.productID,
                fromState: from, toState: derived.state, oldExpiresAt: stored?.expiresAt,
                newExpiresAt: derived.expiresAt, environment: derived.environment)
        }
        guard let stored, from != .unverified else { return [event(.verified)] }

        var events: [SubscriptionEvent] = []
        if let kind = transition(from: stored, to: derived) {
            events.append(event(kind))
        }
        if let old = stored.autoRenew, let new = derived.autoRenew, old != new {
            events.append(event(new ? .autoRenewEnabled : .autoRenewDisabled))
        }
        if let old = stored.productID, let new = derived.productID, old != new {
            var change = event(.productChanged)
            change.fromProductID = old
            events.append(change)
        }
        return events
    }

    /// This change with the kind of refund `evidence`'s current transaction carries, when it is a
    /// `refunded` change: a prorated refund is not reported as a full one.
    public func withRevocation(of evidence: SubscriptionEvidence) -> SubscriptionEvent {
        guard kind == .refunded else { return self }
        let current =
            evidence.transactions.first { $0.transactionID == evidence.latestTransactionID }
            ?? evidence.transactions.last { $0.revokedAt != nil }
        var event = self
        event.revocationType = current?.revocationType
        event.revocationPercentage = current?.revocationPercentage
        return event
    }

    /// The event for a receipt Apple rejects (21010, or 21002/21003 persisting for a never-verified
    /// receipt): every stored subscription of it, or its never-verified placeholder, becomes `invalid`.
    public static func invalidation(of stored: SubscriptionSnapshot?) -> SubscriptionEvent? {
        let from = stored?.state ?? .unverified
        guard from != .invalid else { return nil }
        return SubscriptionEvent(
            kind: .invalidated, originalTransactionID: stored?.originalTransactionID, productID: stored?.productID,
            fromState: from, toState: .invalid, oldExpiresAt: stored?.expiresAt, newExpiresAt: stored?.expiresAt,
            environment: stored?.environment)
    }

    /// The event for a subscription that Apple's answer no longer lists and whose last known
    /// entitlement has ended: it keeps its expiry and loses its access.
    public static func unlistedExpiry(of stored: SubscriptionSnapshot) -> SubscriptionEvent {
        SubscriptionEvent(
            kind: .expiredUnlisted, originalTransactionID: stored.originalTransactionID, productID: stored.productID,
            fromState: stored.state, toState: .expired, oldExpiresAt: stored.expiresAt, newExpiresAt: stored.expiresAt,
            environment: stored.environment)
    }

    /// The event recorded once for a receipt whose first valid answer holds no auto-renewable subscription.
    public static func noSubscription(from state: SubscriptionState, environment: AppStoreEnvironment?)
        -> SubscriptionEvent
    {
        SubscriptionEvent(
            kind: .noSubscription, originalTransactionID: nil, productID: nil, fromState: state,
            toState: .noSubscription,
            oldExpiresAt: nil, newExpiresAt: nil, environment: environment)
    }

    static func transition(from stored: SubscriptionSnapshot, to derived: SubscriptionSnapshot) -> Kind? {
        let from = stored.state
        let to = derived.state
        if from == to {
            guard to == .active, let new = derived.expiresAt, let old = stored.expiresAt, new > old else { return nil }
            return .renewed
        }
        switch (from, to) {
        case (_, .invalid): return .invalidated
        case (_, .revoked): return .refunded
        case (.revoked, _):
            // Only the same transaction losing its cancellation is a reversed refund.
            let sameTransaction = stored.latestTransactionID == derived.latestTransactionID
            if sameTransaction { return .refundReversed }
            return to == .expired ? .expired : .resubscribed
        case (_, .expired): return .expired
        case (_, .billingRetry): return .billingIssue
        case (_, .gracePeriod): return .gracePeriodStarted
        case (.gracePeriod, .active), (.billingRetry, .active): return .billingRecovered
        case (_, .active): return .renewed
        case (_, .unverified), (_, .noSubscription): return nil
        }
    }
}
