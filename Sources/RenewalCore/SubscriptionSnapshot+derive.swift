import Foundation

extension SubscriptionSnapshot {
    /// Judges one subscription's evidence at `now` (docs/design.md §3):
    /// - every transaction upgraded away: expired;
    /// - a cancellation date on the current transaction: revoked;
    /// - a paid period not over: active, whatever auto-renew says (trial and intro periods too);
    /// - after expiry: grace period while `gracePeriodExpiresAt` > now, else billing retry while
    ///   Apple retries, else expired.
    ///
    /// Whether an expired, auto-renewing subscription is only waiting for a late renewal is the job's
    /// call (`EntitlementDecision`), since it depends on what was stored.
    public init(evidence: SubscriptionEvidence, now: Date) {
        let state: SubscriptionState
        if evidence.isUpgraded {
            state = .expired
        } else if let cancelled = evidence.cancelledAt, cancelled <= now {
            state = .revoked
        } else if let expiresAt = evidence.expiresAt, expiresAt > now {
            state = .active
        } else if let graceEnd = evidence.gracePeriodExpiresAt, graceEnd > now {
            state = .gracePeriod
        } else if evidence.isInBillingRetry {
            state = .billingRetry
        } else {
            state = .expired
        }
        self.init(
            originalTransactionID: evidence.originalTransactionID,
            productID: evidence.productID,
            state: state,
            expiresAt: evidence.expiresAt,
            autoRenew: evidence.autoRenew,
            autoRenewProductID: evidence.autoRenewProductID,
            gracePeriodExpiresAt: state == .gracePeriod ? evidence.gracePeriodExpiresAt : nil,
            isInBillingRetry: evidence.isInBillingRetry,
            cancelledAt: evidence.cancelledAt,
            expirationIntent: state == .active ? nil : evidence.expirationIntent,
            isTrialPeriod: evidence.isTrialPeriod,
            isInIntroOfferPeriod: evidence.isInIntroOfferPeriod,
            ownershipType: evidence.ownershipType,
            environment: evidence.environment,
            latestTransactionID: evidence.latestTransactionID,
            subscriptionGroupIdentifier: evidence.subscriptionGroupIdentifier
        )
    }

    /// Expired although auto-renew is on, with no expiration intent, no billing retry and no refund:
    /// Apple has not posted the renewal yet. Such a subscription is checked again soon
    /// (`SchedulePolicy.renewalPendingInterval`) for a bounded time (`renewalPendingWindow`).
    public func awaitsRenewal(now: Date, window: TimeInterval) -> Bool {
        guard autoRenew == true, expirationIntent == nil, !isInBillingRetry, cancelledAt == nil,
            state == .expired || state == .active, let expiresAt, expiresAt <= now
        else { return false }
        return now < expiresAt.addingTimeInterval(window)
    }
}
