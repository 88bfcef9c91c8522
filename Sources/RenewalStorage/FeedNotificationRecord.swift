import Foundation
import RenewalCore

/// One verified notification from Apple's change feed, as the database records it.
public struct FeedNotificationRecord: Sendable, Hashable {
    public var uuid: String
    public var environment: AppStoreEnvironment
    /// The app whose feed listed it (several apps); nil for one app.
    public var bundleID: String?
    public var type: String
    public var subtype: String?
    /// The subscription it is about; nil for notifications that name none.
    public var originalTransactionID: String?
    public var signedAt: Date
    /// Its signed data about the subscription, applied when newer than what is stored.
    public var evidence: NotificationEvidence?
    /// Its signed transaction's id, when it carries one: the transaction a refund request or its
    /// outcome is about.
    public var transactionID: String?
    /// Of a `CONSUMPTION_REQUEST`: Apple's `consumptionRequestReason`.
    public var consumptionRequestReason: String?
    /// The period its signed transaction paid for, and its product.
    public var periodStart: Date?
    public var periodEnd: Date?
    public var productID: String?
    /// Of a `RENEWAL_EXTENSION` `SUMMARY`: the mass extension it sums up.
    public var extensionSummary: ExtensionSummary?

    public init(
        uuid: String, environment: AppStoreEnvironment, type: String, subtype: String?,
        originalTransactionID: String?, signedAt: Date, bundleID: String? = nil, evidence: NotificationEvidence? = nil
    ) {
        self.evidence = evidence
        self.bundleID = bundleID
        self.uuid = uuid
        self.environment = environment
        self.type = type
        self.subtype = subtype
        self.originalTransactionID = originalTransactionID
        self.signedAt = signedAt
    }
}

/// What recording a page of notifications did.
public struct FeedRecordResult: Sendable, Hashable {
    /// Notifications seen for the first time (the others were recorded by an earlier, overlapping pull).
    public var new = 0
    /// New notifications about a subscription the database does not know.
    public var unmatched: [FeedNotificationRecord] = []
    /// Receipts made due now.
    public var madeDue = 0
    /// The new notifications by `notificationType`.
    public var newByType: [String: Int] = [:]
    /// New notifications whose signed data was applied: each receipt as it was, and the decision
    /// written for it.
    public var applied: [AppliedNotification] = []
    /// New notifications older than (or as old as) what the database holds: nothing to do.
    public var known = 0
    /// New notifications that could not be applied on their own, by why: their receipts were made due.
    public var rechecked: [NotificationUse.Recheck: Int] = [:]
    /// New refund requests (`CONSUMPTION_REQUEST`) recorded to be answered.
    public var refundRequests = 0
    /// Subscriptions the database did not hold, adopted from new notifications (`PurchaseAdoption`),
    /// and how many of them a registered `appAccountToken` claimed for their user at once.
    public var adopted = 0
    public var claimedAtAdoption = 0
    /// The changes those adoptions recorded (`purchase_unclaimed`, or `purchase_claimed` when a token
    /// claimed it at once), for the run's report and counts.
    public var purchaseChanges: [PurchaseChange] = []

    public init() {}
}

/// What recording notifications whose data could not be decoded did.
public struct UnreadableRecordResult: Sendable, Hashable {
    /// The notifications seen for the first time (the others were recorded by an earlier read).
    public var new: [FeedNotificationRecord] = []
    /// Receipts made due now.
    public var madeDue = 0

    public init() {}
}

/// A change an adoption recorded, with the user (or reserved key) it was recorded under.
public struct PurchaseChange: Sendable, Hashable {
    public var event: SubscriptionEvent
    public var userID: String
    public var bundleID: String?

    public init(event: SubscriptionEvent, userID: String, bundleID: String?) {
        self.event = event
        self.userID = userID
        self.bundleID = bundleID
    }
}

/// A notification applied to the receipt holding its subscription.
public struct AppliedNotification: Sendable, Hashable {
    /// The receipt before.
    public var receipt: StoredReceipt
    public var decision: EntitlementDecision

    public init(receipt: StoredReceipt, decision: EntitlementDecision) {
        self.receipt = receipt
        self.decision = decision
    }
}

/// How active one environment's change feed has been, for telling a healthy feed from a silent one.
public struct FeedActivity: Sendable, Hashable {
    /// Where the unbroken run of completed reads began; nil before the first.
    public var pulledSince: Date?
    /// Whether any notification signed since the asked time was recorded.
    public var notified: Bool
    /// Whether a check found a renewal or a billing recovery that took effect since the asked time
    /// (looked for only when no notification was: false otherwise).
    public var renewed: Bool

    public init(pulledSince: Date?, notified: Bool, renewed: Bool) {
        self.pulledSince = pulledSince
        self.notified = notified
        self.renewed = renewed
    }
}
