import Foundation

/// Everything one check writes for one receipt, in one transaction: the receipt row, its
/// subscriptions, the change events, the failure or the conflicts.
public struct ReceiptUpdate: Sendable, Hashable {
    public var receiptID: Int64
    public var userID: String
    /// Nil for writes outside a stored run (never happens in dry runs: they write nothing).
    public var runID: String?
    public var checkedAt: Date
    /// A newer receipt Apple returned; replaces the stored one when set.
    public var newLatestReceipt: String?
    public var status: ReceiptStatus
    public var environment: AppStoreEnvironment?
    /// Set when this check got a valid or rejecting answer from Apple.
    public var verifiedAt: Date?
    public var nextCheckAt: Date
    /// When the polling schedule would check the receipt, set only when the change feed's schedule
    /// put `nextCheckAt` later: should the feed turn unhealthy, the receipt is moved back to it.
    public var pollingCheckAt: Date?
    /// When a feed outage must check the receipt (`SchedulePolicy.outageCheck`), set only when the
    /// feed's schedule put `nextCheckAt` later: while the feed is down, the receipt is made due then.
    public var outageCheckAt: Date?
    public var consecutiveFailures: Int
    public var consecutiveMalformed: Int
    /// Written as given: when the current run of 21002/21003 rejections began, or nil.
    public var rejectedSince: Date?
    /// Written as given: since when a valid answer showed no auto-renewable subscription, or nil.
    public var noSubscriptionSince: Date?
    /// Upserted by original transaction id; only rows owned by this receipt (or new ones) are written.
    public var subscriptions: [StoredSubscription]
    public var changes: [SubscriptionEvent]
    /// The failure of this check, if it failed (`reason`: a short stable code).
    public var failure: CheckFailure?
    public var conflicts: [OwnershipConflict]
    /// The transactions of the subscriptions written, for the ledger (`transactions`, upserted by id).
    public var transactions: [LedgerTransaction] = []
    /// The lease owner to release; nil when the row was not leased.
    public var leaseOwner: String?
    /// The API whose valid answer this check read; written with `originalTransactionID` when set.
    public var source: CheckSource?
    /// The original transaction id to ask the App Store Server API by from now on.
    public var originalTransactionID: String?
    /// The receipt's app: recorded with each change and failure, and stored on the receipt when it
    /// has none yet (a row's app, once known, never changes).
    public var bundleID: String?
    /// This check moved the receipt to the App Store Server API (`receipts.migrated_at` is set).
    public var migrated = false
    /// Each change is also queued in the webhook outbox, in the same transaction (a webhook URL is set).
    public var queueWebhooks = false

    public init(
        receiptID: Int64, userID: String, runID: String?, checkedAt: Date, newLatestReceipt: String?,
        status: ReceiptStatus, environment: AppStoreEnvironment?, verifiedAt: Date?, nextCheckAt: Date,
        consecutiveFailures: Int, consecutiveMalformed: Int, subscriptions: [StoredSubscription],
        changes: [SubscriptionEvent], failure: CheckFailure?, conflicts: [OwnershipConflict], leaseOwner: String?,
        rejectedSince: Date? = nil, noSubscriptionSince: Date? = nil
    ) {
        self.receiptID = receiptID
        self.userID = userID
        self.runID = runID
        self.checkedAt = checkedAt
        self.newLatestReceipt = newLatestReceipt
        self.status = status
        self.environment = environment
        self.verifiedAt = verifiedAt
        self.nextCheckAt = nextCheckAt
        self.consecutiveFailures = consecutiveFailures
        self.consecutiveMalformed = consecutiveMalformed
        self.subscriptions = subscriptions
        self.changes = changes
        self.failure = failure
        self.conflicts = conflicts
        self.leaseOwner = leaseOwner
        self.rejectedSince = rejectedSince
        self.noSubscriptionSince = noSubscriptionSince
    }

    /// An update that leaves `receipt` as it is (the starting point of every decision).
    public init(
        unchanged receipt: StoredReceipt, runID: String?, checkedAt: Date, leaseOwner: String?,
        queueWebhooks: Bool = false
    ) {
        self.init(
            receiptID: receipt.id, userID: receipt.userID, runID: runID, checkedAt: checkedAt, newLatestReceipt: nil,
            status: receipt.status, environment: receipt.environment, verifiedAt: nil, nextCheckAt: receipt.nextCheckAt,
            consecutiveFailures: receipt.consecutiveFailures, consecutiveMalformed: receipt.consecutiveMalformed,
            subscriptions: [], changes: [], failure: nil, conflicts: [], leaseOwner: leaseOwner,
            rejectedSince: receipt.rejectedSince, noSubscriptionSince: receipt.noSubscriptionSince)
        self.originalTransactionID = receipt.originalTransactionID
        self.bundleID = receipt.bundleID
        self.queueWebhooks = queueWebhooks
    }
}

/// A receipt of one user resolved to a subscription another user already owns (`shared_apple_id`).
public struct OwnershipConflict: Sendable, Hashable, Codable {
    public var originalTransactionID: String
    public var ownerUserID: String
    public var claimantUserID: String
    public var productID: String?

    public init(originalTransactionID: String, ownerUserID: String, claimantUserID: String, productID: String?) {
        self.originalTransactionID = originalTransactionID
        self.ownerUserID = ownerUserID
        self.claimantUserID = claimantUserID
        self.productID = productID
    }
}

extension ReceiptUpdate {
    /// Each written subscription's ownership type (`PURCHASED`, `FAMILY_SHARED`; "" when unknown), by
    /// original transaction id: what reports print beside each change.
    public var ownershipTypes: [String: String] {
        Dictionary(
            subscriptions.map { ($0.snapshot.originalTransactionID, $0.snapshot.ownershipType ?? "") },
            uniquingKeysWith: { first, _ in first })
    }
}
