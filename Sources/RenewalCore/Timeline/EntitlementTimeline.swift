import Foundation

/// The one definition of what a subscription was at a moment (entitled or not, by a paid period or a
/// free trial, by grace or not), from its ledger transactions and the dated facts Apple stated about it.
/// Every figure that asks "entitled at T" (the analytics, the cohorts) asks here, and the answer about a
/// past moment depends only on what is dated: the subscription row as it is today plays no part, so a
/// closed window's figures do not move when a grace period later ends.
public struct EntitlementTimeline: Sendable {
    /// What the subscription was at a moment.
    public enum Standing: Sendable, Hashable {
        case notEntitled
        /// Entitled by a free trial period (by the grace period after it when `byGrace`).
        case trial(LedgerTransaction, byGrace: Bool)
        /// Entitled by a paid period, or by the grace period after it (`byGrace`).
        case paid(LedgerTransaction, byGrace: Bool)

        /// The period entitling the subscription; nil when not entitled.
        public var transaction: LedgerTransaction? {
            switch self {
            case .notEntitled: nil
            case .trial(let transaction, _), .paid(let transaction, _): transaction
            }
        }

        public var isEntitled: Bool { transaction != nil }
    }

    /// The transactions that count, oldest purchase first.
    public let transactions: [LedgerTransaction]
    /// The grace facts, each with the period it follows.
    let graces: [(fact: SubscriptionFact, period: LedgerTransaction)]
    /// Per transaction id: spans inside its period when it did not entitle (a revocation Apple later
    /// reversed; the time between its old expiry and an extension stated after it).
    let gaps: [String: [Range<Date>]]

    /// `transactions`: the subscription's transactions that count (see
    /// `SubscriptionLedger.countedTransactions`); `facts`: every fact recorded about it.
    public init(transactions: [LedgerTransaction], facts: [SubscriptionFact]) {
        let sorted = transactions.sorted { ($0.purchasedAt ?? .distantPast) < ($1.purchasedAt ?? .distantPast) }
        self.transactions = sorted
        var graces: [(SubscriptionFact, LedgerTransaction)] = []
        var gaps: [String: [Range<Date>]] = [:]
        for fact in facts {
            switch fact.kind {
            case .gracePeriod:
                if let period = Self.period(followedBy: fact, in: sorted) { graces.append((fact, period)) }
            case .revocation:
                // A revocation still in force is on the ledger row; one reversed is only here.
                if let id = fact.transactionID, let end = fact.endsAt, fact.startsAt < end {
                    gaps[id, default: []].append(fact.startsAt..<end)
                }
            case .renewalExtension:
                // Stated after the old expiry: the period had ended in between, as the job saw it then.
                if let id = fact.transactionID, fact.startsAt < fact.statedAt {
                    gaps[id, default: []].append(fact.startsAt..<min(fact.statedAt, fact.endsAt ?? fact.statedAt))
                }
            case .billingRetry, .autoRenew, .seatRefund: break
            }
        }
        self.graces = graces
        self.gaps = gaps
    }

    /// The standing at `moment`: the newest started transaction whose period holds it (end: its expiry,
    /// or its revocation if earlier), else a recorded grace period holding it, after a period not revoked
    /// by then and before the next period began. Every grace period counts, not only the newest one's.
    public func standing(at moment: Date) -> Standing {
        let started = transactions.prefix { ($0.purchasedAt ?? .distantFuture) <= moment }
        if let holding = started.last(where: { holds($0, moment) }) {
            return holding.isTrial ? .trial(holding, byGrace: false) : .paid(holding, byGrace: false)
        }
        for (fact, period) in graces where graceHolds(fact, after: period, moment) {
            return period.isTrial ? .trial(period, byGrace: true) : .paid(period, byGrace: true)
        }
        return .notEntitled
    }

    /// When a transaction stops entitling: its expiry, or its revocation if earlier. Nil: no end known.
    public static func end(of transaction: LedgerTransaction) -> Date? {
        switch (transaction.expiresAt, transaction.revokedAt) {
        case (let expires?, let revoked?): min(expires, revoked)
        case (let expires?, nil): expires
        case (nil, let revoked?): revoked
        case (nil, nil): nil
        }
    }

    /// The latest moment anything recorded happens to the subscription (an expiry, a revocation, a fact's
    /// end); nil without any.
    public var lastEvent: Date? {
        let dates =
            transactions.compactMap(\.expiresAt) + transactions.compactMap(\.revokedAt)
            + graces.compactMap(\.fact.endsAt)
        return dates.max()
    }

    private func holds(_ transaction: LedgerTransaction, _ moment: Date) -> Bool {
        guard let end = Self.end(of: transaction), moment < end else { return false }
        return !(gaps[transaction.transactionID]?.contains { $0.contains(moment) } ?? false)
    }

    private func graceHolds(_ fact: SubscriptionFact, after period: LedgerTransaction, _ moment: Date) -> Bool {
        guard fact.holds(moment), period.revokedAt.map({ moment < $0 }) ?? true else { return false }
        // A later period (a recovered renewal, a new purchase) ends the grace period when it begins.
        let next = transactions.first { other in
            other.transactionID != period.transactionID && (other.purchasedAt.map { $0 >= fact.startsAt } ?? false)
        }
        return next?.purchasedAt.map { moment < $0 } ?? true
    }

    /// The period a grace fact follows: its transaction when it counts; when the fact does not name one
    /// (rebuilt by the migration) or names one the ledger lacks, the newest counted transaction purchased
    /// before the grace began. Nil when none counts (a family-shared or sandbox subscription).
    static func period(followedBy fact: SubscriptionFact, in transactions: [LedgerTransaction])
        -> LedgerTransaction?
    {
        if let id = fact.transactionID, let named = transactions.first(where: { $0.transactionID == id }) {
            return named
        }
        return transactions.last { ($0.purchasedAt ?? .distantFuture) < fact.startsAt }
    }
}
