import Foundation

/// One thing Apple stated about a subscription, with its own dates, kept as stated and never
/// overwritten: the subscription row says only what is true now, so a grace period that ended, a
/// refund Apple reversed or an expiry Apple moved would otherwise leave no trace, and a question about a
/// moment in the past would get today's answer (`EntitlementTimeline` reads them).
public struct SubscriptionFact: Sendable, Hashable {
    /// What the fact is about; raw values are the `subscription_facts.kind` strings.
    public enum Kind: String, Sendable, Hashable, CaseIterable {
        /// Apple granted access after `transactionID`'s period expired: `[startsAt, endsAt)` is
        /// `[the period's expiry, the grace period's end)`.
        case gracePeriod = "grace_period"
        /// Apple began retrying the payment of the period after `transactionID`'s, from `startsAt`
        /// (the period's expiry).
        case billingRetry = "billing_retry"
        /// Auto-renew was turned on or off (`value` `on` or `off`), seen at `startsAt`.
        case autoRenew = "auto_renew"
        /// `transactionID` gained a revocation dated `startsAt` (`value` `revoked`, no end), or lost it
        /// (`value` `reversed`: `[startsAt, endsAt)` is from the revocation to when Apple reversed it).
        case revocation
        /// `transactionID`'s expiry moved from `startsAt` to `endsAt` without a new transaction (a
        /// renewal-date extension), stated at `statedAt`.
        case renewalExtension = "extension"
        /// Seats of `transactionID` refunded (`value`: how many), first seen at `startsAt`.
        case seatRefund = "seat_refund"
    }

    public var originalTransactionID: String
    public var kind: Kind
    /// The period the fact follows or concerns; nil when it is not known (facts rebuilt by the migration).
    public var transactionID: String?
    public var startsAt: Date
    public var endsAt: Date?
    public var value: String?
    /// Apple's signing time of the answer that stated it, else the time the job checked.
    public var statedAt: Date

    public init(
        originalTransactionID: String, kind: Kind, transactionID: String?, startsAt: Date, endsAt: Date? = nil,
        value: String? = nil, statedAt: Date
    ) {
        self.originalTransactionID = originalTransactionID
        self.kind = kind
        self.transactionID = transactionID
        self.startsAt = startsAt
        self.endsAt = endsAt
        self.value = value
        self.statedAt = statedAt
    }

    /// Whether `moment` falls in `[startsAt, endsAt)`; an open-ended fact holds every later moment.
    public func holds(_ moment: Date) -> Bool {
        startsAt <= moment && endsAt.map { moment < $0 } ?? true
    }
}
