import Foundation
import RenewalCore

public struct StatusCursor: Sendable, Hashable {
    public var userID: String
    /// "" for a receipt's never-verified placeholder.
    public var originalTransactionID: String

    public init(userID: String, originalTransactionID: String) {
        self.userID = userID
        self.originalTransactionID = originalTransactionID
    }
}

/// One element of `renewal status --json`.
public struct StatusRow: Sendable, Hashable {
    public var userID: String
    public var originalTransactionID: String?
    public var productID: String?
    public var state: SubscriptionState
    public var entitled: Bool
    public var expiresAt: Date?
    public var autoRenew: Bool?
    public var environment: AppStoreEnvironment?
    public var gracePeriodExpiresAt: Date?
    public var lastVerifiedAt: Date?
    public var nextCheckAt: Date?
    public var ownershipType: String?
    public var lastFailure: String?
    /// The API that read the receipt last (`verify_receipt`, `server_api`); nil when none has.
    public var source: CheckSource?
    /// The last notification Apple's change feed brought about this subscription (for a receipt
    /// without subscriptions: about the receipt); nil when none has.
    public var lastNotification: LastNotification?
    /// The receipt's app (`receipts.bundle_id`); nil until it is known.
    public var bundleID: String?

    public struct LastNotification: Sendable, Hashable {
        public var type: String
        public var subtype: String?
        public var signedAt: Date

        public init(type: String, subtype: String?, signedAt: Date) {
            self.type = type
            self.subtype = subtype
            self.signedAt = signedAt
        }
    }

    public init(
        userID: String, originalTransactionID: String?, productID: String?, state: SubscriptionState, entitled: Bool,
        expiresAt: Date?, autoRenew: Bool?, environment: AppStoreEnvironment?, gracePeriodExpiresAt: Date?,
        lastVerifiedAt: Date?, nextCheckAt: Date?, ownershipType: String?, lastFailure: String?,
        source: CheckSource? = nil,
        lastNotification: LastNotification? = nil, bundleID: String? = nil
    ) {
        self.bundleID = bundleID
        self.source = source
        self.lastNotification = lastNotification
        self.userID = userID
        self.originalTransactionID = originalTransactionID
        self.productID = productID
        self.state = state
        self.entitled = entitled
        self.expiresAt = expiresAt
        self.autoRenew = autoRenew
        self.environment = environment
        self.gracePeriodExpiresAt = gracePeriodExpiresAt
        self.lastVerifiedAt = lastVerifiedAt
        self.nextCheckAt = nextCheckAt
        self.ownershipType = ownershipType
        self.lastFailure = lastFailure
    }

    public var cursor: StatusCursor {
        StatusCursor(userID: userID, originalTransactionID: originalTransactionID ?? "")
    }
}
