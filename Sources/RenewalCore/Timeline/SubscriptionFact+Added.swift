import Foundation

extension SubscriptionFact {
    /// The facts a verified answer adds about one subscription: what `snapshot` states that `previous`
    /// (the stored subscription, nil when there was none) did not. A grace period Apple granted is a grace
    /// fact after the latest transaction, from its expiry to the grace end; billing retry beginning and
    /// auto-renew turned on or off are dated facts too. What was already stated adds nothing (the store
    /// also keeps one row per fact, so a fact stated twice is recorded once).
    public static func added(
        by snapshot: SubscriptionSnapshot, previous: SubscriptionSnapshot?, now: Date, statedAt: Date? = nil
    ) -> [SubscriptionFact] {
        let stated = statedAt ?? now
        let id = snapshot.originalTransactionID
        var facts: [SubscriptionFact] = []
        if let grace = grace(of: snapshot), grace != previous.flatMap(Self.grace(of:)) {
            facts.append(
                SubscriptionFact(
                    originalTransactionID: id, kind: .gracePeriod, transactionID: snapshot.latestTransactionID,
                    startsAt: grace.expiresAt, endsAt: grace.endsAt, statedAt: stated))
        }
        if snapshot.isInBillingRetry, !(previous?.isInBillingRetry ?? false) {
            facts.append(
                SubscriptionFact(
                    originalTransactionID: id, kind: .billingRetry, transactionID: snapshot.latestTransactionID,
                    startsAt: snapshot.expiresAt ?? now, statedAt: stated))
        }
        if let autoRenew = snapshot.autoRenew, let before = previous?.autoRenew, before != autoRenew {
            facts.append(
                SubscriptionFact(
                    originalTransactionID: id, kind: .autoRenew, transactionID: snapshot.latestTransactionID,
                    startsAt: now, value: autoRenew ? "on" : "off", statedAt: stated))
        }
        return facts
    }

    /// The grace period a snapshot states: its latest period's expiry and the grace end after it.
    private struct Grace: Hashable {
        var transactionID: String?
        var expiresAt: Date
        var endsAt: Date
    }

    private static func grace(of snapshot: SubscriptionSnapshot) -> Grace? {
        guard snapshot.state == .gracePeriod || snapshot.isInBillingRetry,
            let expiresAt = snapshot.expiresAt, let endsAt = snapshot.gracePeriodExpiresAt, expiresAt < endsAt
        else { return nil }
        return Grace(transactionID: snapshot.latestTransactionID, expiresAt: expiresAt, endsAt: endsAt)
    }

    /// The facts a new version of a ledger transaction adds over `recorded` (the ledger's row of it, nil
    /// when new), so the upsert that overwrites the row does not erase what it said: a revocation gained
    /// or lost, an expiry moved later without a new transaction (an extension), seats refunded. A version
    /// signed before the recorded one adds nothing (the ledger keeps the recorded one).
    public static func added(by transaction: LedgerTransaction, recorded: LedgerTransaction?, now: Date)
        -> [SubscriptionFact]
    {
        guard let recorded, transaction.changes(recorded) else { return [] }
        let stated = transaction.signedAt ?? now
        func fact(_ kind: Kind, _ startsAt: Date, _ endsAt: Date?, _ value: String?) -> SubscriptionFact {
            SubscriptionFact(
                originalTransactionID: transaction.originalTransactionID, kind: kind,
                transactionID: transaction.transactionID, startsAt: startsAt, endsAt: endsAt, value: value,
                statedAt: stated)
        }
        var facts: [SubscriptionFact] = []
        switch (recorded.revokedAt, transaction.revokedAt) {
        case (nil, let revoked?): facts.append(fact(.revocation, revoked, nil, "revoked"))
        case (let revoked?, nil): facts.append(fact(.revocation, revoked, max(revoked, stated), "reversed"))
        default: break
        }
        if let before = recorded.expiresAt, let after = transaction.expiresAt, after > before {
            facts.append(fact(.renewalExtension, before, after, nil))
        }
        if transaction.signedAt != nil, let seats = transaction.revokedSeatQuantity,
            seats != recorded.revokedSeatQuantity
        {
            facts.append(fact(.seatRefund, transaction.seatsRevokedAt ?? stated, nil, String(seats)))
        }
        return facts
    }
}
