import Foundation

/// Every transaction the ledger holds for one subscription (one original transaction id), oldest
/// purchase first, with what the subscription row adds: the end of a grace period Apple granted
/// after the last period expired.
public struct SubscriptionLedger: Sendable, Hashable {
    public var originalTransactionID: String
    /// The app, when an answer has said it.
    public var bundleID: String?
    /// Nil when no answer has said it.
    public var environment: AppStoreEnvironment?
    public var gracePeriodEndsAt: Date?
    public var transactions: [LedgerTransaction]

    public init(
        originalTransactionID: String, bundleID: String? = nil, environment: AppStoreEnvironment?,
        gracePeriodEndsAt: Date? = nil, transactions: [LedgerTransaction]
    ) {
        self.originalTransactionID = originalTransactionID
        self.bundleID = bundleID
        self.environment = environment
        self.gracePeriodEndsAt = gracePeriodEndsAt
        self.transactions = transactions.sorted { ($0.purchasedAt ?? .distantPast) < ($1.purchasedAt ?? .distantPast) }
    }
}

extension SubscriptionLedger {
    /// What the subscription was at a moment.
    public enum Standing: Sendable, Hashable {
        case notEntitled
        /// Entitled by a free trial period.
        case trial(LedgerTransaction)
        /// Entitled by a paid period, or by the grace period after it.
        case paid(LedgerTransaction)
    }

    /// The analytics count only what the customer bought, in one environment (Production for every figure
    /// a person reads): family-shared copies, multiseat members and the other environment are apart, as is
    /// a transaction without a purchase date.
    public func countedTransactions(in environment: AppStoreEnvironment = .production) -> [LedgerTransaction] {
        guard self.environment == environment else { return [] }
        return transactions.filter { transaction in
            transaction.purchasedAt != nil && (transaction.ownershipType ?? "PURCHASED") == "PURCHASED"
        }
    }

    /// When a transaction stops entitling: its expiry, or its revocation if earlier. Nil: no end known.
    static func end(of transaction: LedgerTransaction) -> Date? {
        switch (transaction.expiresAt, transaction.revokedAt) {
        case (let expires?, let revoked?): min(expires, revoked)
        case (let expires?, nil): expires
        case (nil, let revoked?): revoked
        case (nil, nil): nil
        }
    }

    /// The standing at `moment` among `counted` (oldest first): the newest transaction whose period
    /// holds the moment, else the grace period after the newest one, if the moment falls in it.
    static func standing(at moment: Date, in counted: [LedgerTransaction], graceEndsAt: Date?) -> Standing {
        let started = counted.prefix { ($0.purchasedAt ?? .distantFuture) <= moment }
        if let holding = started.last(where: { transaction in
            Self.end(of: transaction).map { moment < $0 } ?? false
        }) {
            return holding.isTrial ? .trial(holding) : .paid(holding)
        }
        // Grace follows the newest period only: it is what the subscription row says now.
        guard let last = counted.last, started.count == counted.count, last.revokedAt == nil,
            let expires = last.expiresAt, let graceEndsAt, expires <= moment, moment < graceEndsAt
        else { return .notEntitled }
        return last.isTrial ? .trial(last) : .paid(last)
    }
}
