import Foundation

/// A stored receipt with the subscriptions it owns.
public struct StoredReceipt: Sendable, Hashable {
    public var id: Int64
    public var userID: String
    /// Never logged or reported. Nil for a row imported by transaction id only (StoreKit 2).
    public var latestReceipt: String?
    /// `product_id` given at import, if any.
    public var importedProductID: String?
    public var status: ReceiptStatus
    public var environment: AppStoreEnvironment?
    public var nextCheckAt: Date
    public var lastVerifiedAt: Date?
    public var consecutiveFailures: Int
    /// Consecutive checks Apple rejected with 21002 or 21003.
    public var consecutiveMalformed: Int
    /// When the current run of 21002/21003 rejections began; nil when the last answer was not one.
    public var rejectedSince: Date?
    /// When a valid answer first showed this receipt holds no auto-renewable subscription; nil otherwise.
    public var noSubscriptionSince: Date?
    /// The API that read this receipt last; nil when none has.
    public var source: CheckSource?
    /// The original transaction id the App Store Server API is asked by, once known.
    public var originalTransactionID: String?
    /// The app the receipt belongs to: given at import or learnt from Apple's first valid answer;
    /// nil until then.
    public var bundleID: String?
    public var subscriptions: [StoredSubscription]
    /// The transaction ledger holds the purchase of none, or not of every one, of its subscriptions
    /// (a receipt never verified, or verified before the ledger): its next verifyReceipt check asks for
    /// every transaction. Read with the receipt's page.
    public var lacksTransactionHistory = false
    /// The ledger's rows of its subscriptions' purchases and latest transactions, by transaction id,
    /// read with the receipt's page: a transaction an answer shows exactly as recorded here is not
    /// written again. Empty when not read (every transaction shown is then written).
    public var recordedTransactions: [String: LedgerTransaction] = [:]

    public init(
        id: Int64, userID: String, latestReceipt: String?, importedProductID: String?, status: ReceiptStatus,
        environment: AppStoreEnvironment?, nextCheckAt: Date, lastVerifiedAt: Date?, consecutiveFailures: Int,
        consecutiveMalformed: Int, rejectedSince: Date? = nil, noSubscriptionSince: Date? = nil,
        source: CheckSource? = nil, originalTransactionID: String? = nil, bundleID: String? = nil,
        subscriptions: [StoredSubscription]
    ) {
        self.bundleID = bundleID
        self.source = source
        self.originalTransactionID = originalTransactionID
        self.id = id
        self.userID = userID
        self.latestReceipt = latestReceipt
        self.importedProductID = importedProductID
        self.status = status
        self.environment = environment
        self.nextCheckAt = nextCheckAt
        self.lastVerifiedAt = lastVerifiedAt
        self.consecutiveFailures = consecutiveFailures
        self.consecutiveMalformed = consecutiveMalformed
        self.rejectedSince = rejectedSince
        self.noSubscriptionSince = noSubscriptionSince
        self.subscriptions = subscriptions
    }
}

/// A stored subscription: the last derived snapshot plus bookkeeping.
public struct StoredSubscription: Sendable, Hashable {
    public var snapshot: SubscriptionSnapshot
    public var lastVerifiedAt: Date?
    public var nextCheckAt: Date
    /// When Apple signed the data the snapshot was last derived from (App Store Server API answers
    /// and notifications); nil for verifyReceipt answers, which carry no signature time. A
    /// notification signed at or before it says nothing new (`NotificationEvidence`).
    public var appleSignedAt: Date?

    public init(snapshot: SubscriptionSnapshot, lastVerifiedAt: Date?, nextCheckAt: Date, appleSignedAt: Date? = nil) {
        self.snapshot = snapshot
        self.lastVerifiedAt = lastVerifiedAt
        self.nextCheckAt = nextCheckAt
        self.appleSignedAt = appleSignedAt
    }
}

/// The receipt (and its user) that holds a subscription.
public struct SubscriptionOwner: Sendable, Hashable {
    public var receiptID: Int64
    public var userID: String

    public init(receiptID: Int64, userID: String) {
        self.receiptID = receiptID
        self.userID = userID
    }
}
