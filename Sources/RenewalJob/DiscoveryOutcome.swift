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
    /// The prices of the adopted subscriptions' signed transactions read, in milliunits, by currency.
    public var revenue: [String: Int64] = [:]
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
    var outcome = DiscoveryOutcome()

    /// Notes one recorded page: subscriptions held before it are already held; ones held only after
    /// were adopted by it. Adopted subscriptions' signed transactions add their prices once each.
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
                guard counted.insert(transaction.transactionID).inserted, let price = transaction.priceMilliunits,
                    let currency = transaction.currency
                else { continue }
                outcome.revenue[currency, default: 0] += price
            }
        }
        outcome.found = named.count
        outcome.adopted = adopted.count
        outcome.alreadyHeld = held.subtracting(adopted).count
        outcome.notAdopted = named.subtracting(adopted).subtracting(held).count
    }
}
