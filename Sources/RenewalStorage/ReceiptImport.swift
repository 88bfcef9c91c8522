import Foundation
import RenewalCore

/// One customer to store: by receipt (the app receipt or an iOS 6 transaction receipt), by
/// transaction id (StoreKit 2 apps, which send their server a transaction, not a receipt), or both.
public struct ReceiptImport: Sendable, Hashable {
    public var userID: String
    /// The receipt, when the line gave one. Never logged or reported.
    public var latestReceipt: String?
    public var productID: String?
    /// A transaction id of the customer's subscription (any of its transactions: Get All
    /// Subscription Statuses accepts each); the App Store Server API is asked by it.
    public var originalTransactionID: String?
    /// The UUID the app set at purchase (`appAccountToken`), kept to tie Apple's data to the user.
    public var appAccountToken: String?
    /// The environment a verified signed transaction named; the first check asks it first.
    public var environment: AppStoreEnvironment?
    /// The app the line names (or its verified signed transaction does); nil: learnt from Apple's
    /// first valid answer.
    public var bundleID: String?
    /// The customer's consent to share consumption data with Apple when asked about a refund
    /// (`consumption_consent`); kept for the user until a later line says otherwise. Nil: unchanged.
    public var consumptionConsent: Bool?
    /// What the app says of the customer's purchase, sent instead of the job's own figures when Apple asks
    /// about a refund: Apple's `deliveryStatus` value, and the share of it consumed in milliunits (100000 is
    /// all). Kept until a later line changes them; nil: unchanged.
    public var consumptionDeliveryStatus: String?
    public var consumptionPercentage: Int?

    public init(
        userID: String, latestReceipt: String?, productID: String? = nil, originalTransactionID: String? = nil,
        appAccountToken: String? = nil, environment: AppStoreEnvironment? = nil, bundleID: String? = nil
    ) {
        self.bundleID = bundleID
        self.userID = userID
        self.latestReceipt = latestReceipt
        self.productID = productID
        self.originalTransactionID = originalTransactionID
        self.appAccountToken = appAccountToken
        self.environment = environment
    }
}

public enum ReceiptImportOutcome: String, Sendable, Hashable {
    /// A new user.
    case inserted
    /// A known user with a different receipt or transaction id: replaced, due now, lease released.
    case replaced
    /// A known user with the same receipt and id: made due now.
    case unchanged
    /// A known user whose stored receipt belongs to another app than the line names: nothing changed
    /// (a user id holds one receipt; each app's customers need their own user ids).
    case otherApp = "other_app"
    /// A line with only a user and an `app_account_token`: the mapping is recorded (and claims the
    /// adopted purchases waiting with that token).
    case tokenRecorded = "token_recorded"
    /// A line whose `app_account_token` maps to another user already: nothing was changed.
    case tokenConflict = "token_conflict"
    /// A line naming (by original transaction id) a purchase the change feed adopted: it was claimed for
    /// the line's user.
    case claimed
}

extension ReceiptImport {
    /// A line that names no purchase, only the token the app set for the user's purchases.
    public var registersTokenOnly: Bool {
        latestReceipt == nil && originalTransactionID == nil && appAccountToken != nil
    }
}
