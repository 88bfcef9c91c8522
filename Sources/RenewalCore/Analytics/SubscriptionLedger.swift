import Foundation

/// Every transaction the ledger holds for one subscription (one original transaction id), oldest
/// purchase first, with the dated facts Apple stated about it (grace periods, reversed refunds,
/// extensions): together, what `EntitlementTimeline` answers "entitled at T" from.
public struct SubscriptionLedger: Sendable, Hashable {
    public var originalTransactionID: String
    /// The app, when an answer has said it.
    public var bundleID: String?
    /// Nil when no answer has said it.
    public var environment: AppStoreEnvironment?
    /// Every fact recorded about the subscription (`subscription_facts`), in no particular order.
    public var facts: [SubscriptionFact]
    public var transactions: [LedgerTransaction]

    public init(
        originalTransactionID: String, bundleID: String? = nil, environment: AppStoreEnvironment?,
        facts: [SubscriptionFact] = [], transactions: [LedgerTransaction]
    ) {
        self.originalTransactionID = originalTransactionID
        self.bundleID = bundleID
        self.environment = environment
        self.facts = facts
        self.transactions = transactions.sorted { ($0.purchasedAt ?? .distantPast) < ($1.purchasedAt ?? .distantPast) }
    }
}

extension SubscriptionLedger {
    /// The analytics count only what the customer bought, in one environment (Production for every figure
    /// a person reads): family-shared copies, multiseat members and the other environment are apart, as is
    /// a transaction without a purchase date.
    public func countedTransactions(in environment: AppStoreEnvironment = .production) -> [LedgerTransaction] {
        guard self.environment == environment else { return [] }
        return transactions.filter { transaction in
            transaction.purchasedAt != nil && (transaction.ownershipType ?? "PURCHASED") == "PURCHASED"
        }
    }

    /// The subscription's timeline over the transactions counted in `environment`.
    public func timeline(in environment: AppStoreEnvironment = .production) -> EntitlementTimeline {
        EntitlementTimeline(transactions: countedTransactions(in: environment), facts: facts)
    }
}
