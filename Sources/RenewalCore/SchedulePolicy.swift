import Foundation

/// When to check a subscription next (docs/design.md §4). Every default is documented; all are
/// configurable (`renewal run --schedule FILE`, a JSON object with any of these keys, in seconds).
public struct SchedulePolicy: Sendable, Hashable, Codable {
    /// Active with auto-renew on: check this long before expiry (Apple renews "slightly before"). 1 h.
    public var beforeExpiry: TimeInterval = 3600
    /// Check this long after expiry, to see the renewal or the lapse. 15 min.
    public var afterExpiry: TimeInterval = 900
    /// Every entitled subscription is re-checked at least this often, to catch refunds. 7 d.
    public var entitledMaximumInterval: TimeInterval = 7 * 86_400
    /// Grace period and billing retry: daily. 1 d.
    public var billingInterval: TimeInterval = 86_400
    /// Billing retry is followed for this long after expiry (Apple's documented upper bound). 60 d.
    public var billingRetryWindow: TimeInterval = 60 * 86_400
    /// Expired: 1 d during the first week after expiry. 1 d.
    public var expiredFirstWeekInterval: TimeInterval = 86_400
    /// Expired: 7 d during the first 37 days after expiry. 7 d.
    public var expiredFirstMonthInterval: TimeInterval = 7 * 86_400
    /// Expired for longer, and revoked or invalid receipts: 30 d.
    public var dormantInterval: TimeInterval = 30 * 86_400
    /// A failed check backs off from this, doubling per consecutive failure. 5 min.
    public var failureBackoffBase: TimeInterval = 300
    /// Up to this. 6 h.
    public var failureBackoffMaximum: TimeInterval = 6 * 3600
    /// ± this fraction of random jitter on failure backoff. 0.2.
    public var failureJitter: Double = 0.2
    /// Never schedule sooner than this after a check, so a run always makes progress. 1 min.
    public var minimumInterval: TimeInterval = 60
    /// An auto-renewing subscription past its expiry whose renewal Apple has not posted yet (no
    /// expiration intent, no billing retry) is checked again this often. 30 min.
    public var renewalPendingInterval: TimeInterval = 1800
    /// … for this long after its expiry; while it lasts a subscription that was active stays active.
    /// After it, the expiry stands. 24 h.
    public var renewalPendingWindow: TimeInterval = 86_400
    /// A receipt never verified is marked `invalid` only after Apple rejected it (21002, 21003) on at
    /// least this many checks in a row … 3.
    public var malformedChecksBeforeInvalid: Int = 3
    /// … spread over at least this long since the first of them. 3 d. A receipt verified once is
    /// never invalidated by 21002 or 21003.
    public var rejectionSpanBeforeInvalid: TimeInterval = 3 * 86_400
    /// While Apple's change feed is healthy, a subscription the Server API answered for is checked at
    /// least this often (the safety net for what the feed might miss), instead of
    /// `entitledMaximumInterval` and the expired subscriptions' intervals. Longer than the longest
    /// month with days to spare, so a monthly subscription renewed through the feed never needs a
    /// safety-net check of its own. 35 d.
    public var feedSafetyNetInterval: TimeInterval = 35 * 86_400

    public init() {}

    /// How the next check is planned: on today's schedule, or knowing that Apple's change feed names
    /// each change of the subscription within a run.
    public enum Mode: Sendable, Hashable {
        /// Polling alone finds changes: checks before each expiry, every entitled subscription weekly.
        case polling
        /// The feed is current: the feed makes the subscription due when Apple changes it, and the
        /// schedule only covers what no notification announces (an expiry, a renewal that did not come).
        case feed
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        var policy = SchedulePolicy()
        func read(_ key: CodingKeys, _ path: WritableKeyPath<SchedulePolicy, TimeInterval>) throws {
            if let value = try c.decodeIfPresent(TimeInterval.self, forKey: key) {
                guard value >= 0, value.isFinite else {
                    throw DecodingError.dataCorruptedError(
                        forKey: key, in: c, debugDescription: "\(key.stringValue) must be a number of seconds ≥ 0.")
                }
                policy[keyPath: path] = value
            }
        }
        try read(.beforeExpiry, \.beforeExpiry)
        try read(.afterExpiry, \.afterExpiry)
        try read(.entitledMaximumInterval, \.entitledMaximumInterval)
        try read(.billingInterval, \.billingInterval)
        try read(.billingRetryWindow, \.billingRetryWindow)
        try read(.expiredFirstWeekInterval, \.expiredFirstWeekInterval)
        try read(.expiredFirstMonthInterval, \.expiredFirstMonthInterval)
        try read(.dormantInterval, \.dormantInterval)
        try read(.failureBackoffBase, \.failureBackoffBase)
        try read(.failureBackoffMaximum, \.failureBackoffMaximum)
        try read(.minimumInterval, \.minimumInterval)
        try read(.renewalPendingInterval, \.renewalPendingInterval)
        try read(.renewalPendingWindow, \.renewalPendingWindow)
        try read(.rejectionSpanBeforeInvalid, \.rejectionSpanBeforeInvalid)
        try read(.feedSafetyNetInterval, \.feedSafetyNetInterval)
        policy.failureJitter = try c.decodeIfPresent(Double.self, forKey: .failureJitter) ?? policy.failureJitter
        policy.malformedChecksBeforeInvalid =
            try c.decodeIfPresent(Int.self, forKey: .malformedChecksBeforeInvalid)
            ?? policy.malformedChecksBeforeInvalid
        self = policy
    }

    enum CodingKeys: String, CodingKey {
        case beforeExpiry = "before_expiry"
        case afterExpiry = "after_expiry"
        case entitledMaximumInterval = "entitled_maximum_interval"
        case billingInterval = "billing_interval"
        case billingRetryWindow = "billing_retry_window"
        case expiredFirstWeekInterval = "expired_first_week_interval"
        case expiredFirstMonthInterval = "expired_first_month_interval"
        case dormantInterval = "dormant_interval"
        case failureBackoffBase = "failure_backoff_base"
        case failureBackoffMaximum = "failure_backoff_maximum"
        case failureJitter = "failure_jitter"
        case minimumInterval = "minimum_interval"
        case malformedChecksBeforeInvalid = "malformed_checks_before_invalid"
        case renewalPendingInterval = "renewal_pending_interval"
        case renewalPendingWindow = "renewal_pending_window"
        case rejectionSpanBeforeInvalid = "rejection_span_before_invalid"
        case feedSafetyNetInterval = "feed_safety_net_interval"
    }

    /// The next check after a successful one.
    ///
    /// With `.feed`, what Apple announces (a renewal, a refund, a billing failure or recovery, an
    /// auto-renew change, a resubscription) is left to the feed: an active subscription is checked
    /// once shortly after its expiry (only reached when no renewal arrived before it), one in grace
    /// period when the grace ends, and everything else at the safety-net interval.
    public func nextCheck(for subscription: SubscriptionSnapshot, now: Date, mode: Mode = .polling) -> Date {
        if mode == .feed { return nextCheckWithFeed(for: subscription, now: now) }
        let next: Date
        let expires = subscription.expiresAt ?? now
        if subscription.awaitsRenewal(now: now, window: renewalPendingWindow) {
            return max(now.addingTimeInterval(renewalPendingInterval), now.addingTimeInterval(minimumInterval))
        }
        switch subscription.state {
        case .active:
            let target: Date
            if subscription.autoRenew != false, now < expires.addingTimeInterval(-beforeExpiry) {
                target = expires.addingTimeInterval(-beforeExpiry)
            } else {
                target = expires.addingTimeInterval(afterExpiry)
            }
            next = min(target, now.addingTimeInterval(entitledMaximumInterval))
        case .gracePeriod:
            let graceEnd = (subscription.gracePeriodExpiresAt ?? now).addingTimeInterval(afterExpiry)
            next = min(graceEnd, now.addingTimeInterval(billingInterval))
        case .billingRetry where now < expires.addingTimeInterval(billingRetryWindow):
            next = now.addingTimeInterval(billingInterval)
        case .billingRetry, .expired:
            let since = now.timeIntervalSince(expires)
            if since < 7 * 86_400 {
                next = now.addingTimeInterval(expiredFirstWeekInterval)
            } else if since < 37 * 86_400 {
                next = now.addingTimeInterval(expiredFirstMonthInterval)
            } else {
                next = now.addingTimeInterval(dormantInterval)
            }
        case .revoked, .invalid, .unverified, .noSubscription:
            next = now.addingTimeInterval(dormantInterval)
        }
        return max(next, now.addingTimeInterval(minimumInterval))
    }

    /// While the change feed is down (an outage, not a gap), the check that cannot wait for the feed
    /// to come back: what happens without a notification, or what the customer would feel before
    /// the feed caught up. An auto-renewing subscription `beforeExpiry` ahead of its renewal (as
    /// polling checks it), one that lapses at its expiry, the end of a grace period, the end of
    /// billing retry. Nil when nothing can (expired, revoked): a refund or a resubscription during the
    /// outage comes with the feed's catch-up.
    public func outageCheck(for subscription: SubscriptionSnapshot, now: Date) -> Date? {
        let expires = subscription.expiresAt ?? now
        let target: Date
        if subscription.awaitsRenewal(now: now, window: renewalPendingWindow) {
            target = now.addingTimeInterval(renewalPendingInterval)
        } else {
            switch subscription.state {
            case .active:
                let beforeRenewal = expires.addingTimeInterval(-beforeExpiry)
                target =
                    subscription.autoRenew != false && now < beforeRenewal
                    ? beforeRenewal : expires.addingTimeInterval(afterExpiry)
            case .gracePeriod:
                target = (subscription.gracePeriodExpiresAt ?? now).addingTimeInterval(afterExpiry)
            case .billingRetry where now < expires.addingTimeInterval(billingRetryWindow):
                target = expires.addingTimeInterval(billingRetryWindow)
            default:
                return nil
            }
        }
        return max(target, now.addingTimeInterval(minimumInterval))
    }

    /// The next check of a subscription that Apple's last valid answer no longer lists: when its
    /// last known entitlement ends (to take it away), at least weekly while entitled, else rarely.
    public func nextCheck(forUnlisted subscription: SubscriptionSnapshot, now: Date, mode: Mode = .polling) -> Date {
        guard subscription.entitled else { return now.addingTimeInterval(max(dormantInterval, minimumInterval)) }
        let end = subscription.entitlementEndsAt ?? now
        let interval = mode == .feed ? feedSafetyNetInterval : entitledMaximumInterval
        return max(min(end, now.addingTimeInterval(interval)), now.addingTimeInterval(minimumInterval))
    }

    private func nextCheckWithFeed(for subscription: SubscriptionSnapshot, now: Date) -> Date {
        let safetyNet = now.addingTimeInterval(feedSafetyNetInterval)
        let expires = subscription.expiresAt ?? now
        let next: Date
        if subscription.awaitsRenewal(now: now, window: renewalPendingWindow) {
            // Checked after the expiry and the renewal had not come: the feed brings it, or the failure
            // to renew; one more look when the window closes.
            next = min(expires.addingTimeInterval(renewalPendingWindow), safetyNet)
        } else {
            switch subscription.state {
            case .active:
                next = min(expires.addingTimeInterval(afterExpiry), safetyNet)
            case .gracePeriod:
                let graceEnd = (subscription.gracePeriodExpiresAt ?? now).addingTimeInterval(afterExpiry)
                next = min(graceEnd, safetyNet)
            case .billingRetry where now < expires.addingTimeInterval(billingRetryWindow):
                next = min(expires.addingTimeInterval(billingRetryWindow), safetyNet)
            case .billingRetry, .expired:
                next = now.addingTimeInterval(max(feedSafetyNetInterval, expiredFirstWeekInterval))
            case .revoked, .invalid, .unverified, .noSubscription:
                next = now.addingTimeInterval(max(dormantInterval, feedSafetyNetInterval))
            }
        }
        return max(next, now.addingTimeInterval(minimumInterval))
    }

    /// The next check after `consecutiveFailures` failed checks (1 for the first), with jitter.
    ///
    /// - Parameter random: a value in 0..<1 (injected so the core stays deterministic).
    public func nextCheckAfterFailure(consecutiveFailures: Int, now: Date, random: Double) -> Date {
        let backoff = Backoff(
            base: failureBackoffBase, maximum: failureBackoffMaximum, jitter: .proportional(failureJitter))
        let delay = backoff.delay(afterRetries: consecutiveFailures - 1, random: random)
        return now.addingTimeInterval(max(delay, minimumInterval))
    }
}
