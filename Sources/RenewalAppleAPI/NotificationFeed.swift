import Foundation
import Logging
import RenewalCore

/// Apple's change feed (the App Store Server API's Notification History): what changed, page by
/// page, each notification already verified. The Server API client conforms.
public protocol NotificationFeed: Sendable {
    /// One page of the notifications signed in `[start, end)` in `environment`; the first page when
    /// `token` is nil. A notification that fails verification is left out and its reason listed.
    func notificationPage(
        environment: AppStoreEnvironment, start: Date, end: Date, token: String?, logger: Logger
    ) async -> Result<FeedPage, AppleAPIError>
}

/// One page of the feed.
public struct FeedPage: Sendable {
    public var notifications: [FeedNotification]
    /// Why each refused notification was refused (`jws_untrusted_chain`, …); it changes nothing.
    public var refused: [FailureReason]
    /// The next page's token; nil on the last page.
    public var nextToken: String?
    /// Verified notifications whose data could not be decoded (among `refused` as
    /// `notification_data_unreadable`): their uuid, type and signed date, and the subscription as far as
    /// it could still be read (no signed data). Recorded by their uuid like the others, so a window read
    /// again counts each failure once; the subscription is made due and its next check reads its state
    /// from Apple instead.
    public var unreadable: [FeedNotification] = []

    /// The subscriptions (original transaction ids) the unreadable notifications name.
    public var unreadableSubscriptions: [String] { unreadable.compactMap(\.originalTransactionID) }

    public init(notifications: [FeedNotification], refused: [FailureReason], nextToken: String?) {
        self.notifications = notifications
        self.refused = refused
        self.nextToken = nextToken
    }
}

/// One verified notification.
public struct FeedNotification: Sendable, Hashable {
    public var uuid: String
    public var type: String
    public var subtype: String?
    public var signedDate: Date
    /// The auto-renewable subscription it concerns; nil for notifications about none (tests,
    /// summaries, consent, one-time purchases).
    public var originalTransactionID: String?
    /// Its signed data, for a notification about an auto-renewable subscription.
    public var evidence: NotificationEvidence?
    /// The signed transaction it carries: its id, the period it paid for and its product (the transaction
    /// a refund request, or Apple's decision on one, is about).
    public var transactionID: String?
    public var periodStart: Date?
    public var periodEnd: Date?
    public var productID: String?
    /// Of a `CONSUMPTION_REQUEST`: why the customer asked (`consumptionRequestReason`).
    public var consumptionRequestReason: String?
    /// Of a `RENEWAL_EXTENSION` `SUMMARY`: the mass extension it sums up.
    public var extensionSummary: ExtensionSummary?

    public init(
        uuid: String, type: String, subtype: String?, signedDate: Date, originalTransactionID: String?,
        evidence: NotificationEvidence? = nil
    ) {
        self.evidence = evidence
        self.uuid = uuid
        self.type = type
        self.subtype = subtype
        self.signedDate = signedDate
        self.originalTransactionID = originalTransactionID
    }
}
