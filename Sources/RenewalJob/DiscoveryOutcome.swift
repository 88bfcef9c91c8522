import Foundation
import RenewalAppleAPI
import RenewalCore
import RenewalStorage

/// What one `renewal discover` did, summed over its feed streams.
public struct DiscoveryOutcome: Sendable {
    /// Verified notifications read (including ones recorded before), and those recorded for the first time.
    public var notifications = 0
    public var newNotifications = 0
    /// Distinct subscriptions the notifications named.
    public var found = 0
    /// Of those: adopted by this discover, and how many of them a registered `appAccountToken` claimed.
    public var adopted = 0
    public var claimed = 0
    /// Already in the database before this discover read them.
    public var alreadyHeld = 0
    /// Neither held nor adopted: another app's or product's, or not an auto-renewable subscription.
    public var notAdopted = 0
    /// The prices of the adopted subscriptions' signed transactions read, in milliunits, by currency: gross,
    /// each transaction once.
    public var revenue: [String: Int64] = [:]
    /// What Apple refunded of those transactions (a revoked one's price, or its prorated share), in
    /// milliunits, by currency; net revenue is `revenue` less this.
    public var refunds: [String: Int64] = [:]
    /// Gross revenue less refunds, by currency (every currency with revenue or refunds).
    public var netRevenue: [String: Int64] {
        revenue.merging(refunds.mapValues { -$0 }, uniquingKeysWith: +)
    }
    /// Notifications that failed verification (changing nothing), by reason.
    public var refused: [FailureReason] = []
    /// Streams whose read failed; running discover again goes on from the failed page.
    public var failed: [FeedStream: FailureReason] = [:]
    /// Streams another discover was reading.
    public var busy: Set<FeedStream> = []
    /// Streams whose interrupted window this discover finished.
    public var resumed: Set<FeedStream> = []
    /// The window read, per stream.
    public var windows: [FeedStream: ClosedRange<Date>] = [:]

    public init() {}

    mutating func add(_ other: DiscoveryOutcome) {
        notifications += other.notifications
        newNotifications += other.newNotifications
        found += other.found
        adopted += other.adopted
        claimed += other.claimed
        alreadyHeld += other.alreadyHeld
        notAdopted += other.notAdopted
        revenue.merge(other.revenue, uniquingKeysWith: +)
        refunds.merge(other.refunds, uniquingKeysWith: +)
        refused += other.refused
        failed.merge(other.failed) { first, _ in first }
        busy.formUnion(other.busy)
        resumed.formUnion(other.resumed)
        windows.merge(other.windows) { first, _ in first }
    }
}

/// The subscriptions one stream's discover has seen, page after page, and the transactions it summed.
struct DiscoveryTracker {
    var named: Set<String> = []
    var adopted: Set<String> = []
    var held: Set<String> = []
    var counted: Set<String> = []
    var refunded: Set<String> = []
    var outcome = DiscoveryOutcome()

    /// Notes one recorded page: subscriptions held before it are already held; ones held only after
    /// were adopted by it. Adopted subscriptions' signed transactions add their prices once each, and a
    /// refunded one its refund once.
    mutating func note(
        page: FeedPage, heldBefore: Set<String>, heldAfter: Set<String>, named pageNamed: Set<String>,
        recorded: FeedRecordResult
    ) {
        named.formUnion(pageNamed)
        held.formUnion(heldBefore)
        adopted.formUnion(heldAfter.subtracting(heldBefore))
        outcome.notifications += page.notifications.count
        outcome.newNotifications += recorded.new
        outcome.claimed += recorded.claimedAtAdoption
        outcome.refused += page.refused
        for notification in page.notifications {
            guard let id = notification.originalTransactionID, adopted.contains(id),
                let transactions = notification.evidence?.subscription?.transactions
            else { continue }
            for transaction in transactions where transaction.originalTransactionID == id {
                guard let price = transaction.priceMilliunits, let currency = transaction.currency else { continue }
                if counted.insert(transaction.transactionID).inserted {
                    outcome.revenue[currency, default: 0] += price
                }
                if Self.isRefund(transaction), refunded.insert(transaction.transactionID).inserted {
                    // revocationPercentage is in milliunits of the price (50000 is 50 %); nil for a full refund.
                    let share = Int64(transaction.revocationPercentage ?? 100_000)
                    outcome.refunds[currency, default: 0] += price * share / 100_000
                }
            }
        }
        outcome.found = named.count
        outcome.adopted = adopted.count
        outcome.alreadyHeld = held.subtracting(adopted).count
        outcome.notAdopted = named.subtracting(adopted).subtracting(held).count
    }

    /// A revocation that is a refund, as the analytics count refunds (`SubscriptionAnalytics.isRefund`):
    /// not the rest of a period credited for an upgrade, nor a family member losing access.
    static func isRefund(_ transaction: LedgerTransaction) -> Bool {
        transaction.revokedAt != nil && !transaction.isUpgraded && transaction.revocationType != "FAMILY_REVOKE"
    }
}
