import Foundation

/// One Apple transaction of a subscription (a billing period, or the purchase), with the money fields
/// Apple gives: what the transaction ledger (`transactions`) keeps, one row per `transaction_id`.
public struct LedgerTransaction: Sendable, Hashable {
    /// Where the job read it.
    public enum Origin: String, Sendable, Hashable, CaseIterable {
        /// A row of verifyReceipt's `latest_receipt_info` (or the receipt's `in_app`): no price.
        case verifyReceipt = "verify_receipt"
        /// A signed transaction in a Get All Subscription Statuses answer.
        case statusAnswer = "status_answer"
        /// The signed transaction of a notification from the change feed.
        case notification
        /// A signed transaction from Get Transaction History, completing a subscription's earlier periods.
        case transactionHistory = "transaction_history"
    }

    public var transactionID: String
    public var originalTransactionID: String
    public var productID: String?
    public var purchasedAt: Date?
    public var expiresAt: Date?
    /// The price Apple charged, in milliunits of `currency` (9990 is 9.99); nil when Apple did not
    /// say (verifyReceipt) or the period was free.
    public var priceMilliunits: Int64?
    /// ISO 4217.
    public var currency: String?
    /// ISO 3166-1 alpha-3 storefront country.
    public var storefront: String?
    /// 1 introductory, 2 promotional, 3 offer code, 4 win-back; nil without an offer.
    public var offerType: Int?
    /// `FREE_TRIAL`, `PAY_AS_YOU_GO`, `PAY_UP_FRONT`.
    public var offerDiscountType: String?
    /// A free trial period.
    public var isTrial: Bool
    /// The seats the transaction covers: 1, or a multiseat purchase's seats.
    public var quantity: Int
    /// Seats of a multiseat purchase that Apple refunded without revoking the transaction (a `REFUND`
    /// of subtype `SEATS`); nil when none were.
    public var revokedSeatQuantity: Int?
    /// When the job first saw seats refunded: the signing time of the first version of the transaction
    /// carrying `revokedSeatQuantity` (Apple gives no refund date for seats).
    public var seatsRevokedAt: Date?
    /// `PURCHASED`, `FAMILY_SHARED` or `ASSIGNED` (a member of a multiseat purchase).
    public var ownershipType: String?
    public var revokedAt: Date?
    public var revocationReason: Int?
    /// `REFUND_FULL`, `REFUND_PRORATED`, `FAMILY_REVOKE`.
    public var revocationType: String?
    /// Milliunits of the price refunded (50000 is 50 %); nil for a full refund or none.
    public var revocationPercentage: Int?
    /// `PURCHASE` or `RENEWAL`.
    public var transactionReason: String?
    public var isUpgraded: Bool
    public var origin: Origin

    /// The seats still paid for: those bought less those refunded.
    public var paidSeats: Int { max(quantity - (revokedSeatQuantity ?? 0), 0) }
    /// When Apple signed this version of it; nil for verifyReceipt rows.
    public var signedAt: Date?

    public init(
        transactionID: String, originalTransactionID: String, productID: String?, purchasedAt: Date?,
        expiresAt: Date?, priceMilliunits: Int64? = nil, currency: String? = nil, storefront: String? = nil,
        offerType: Int? = nil, offerDiscountType: String? = nil, isTrial: Bool = false, quantity: Int = 1,
        ownershipType: String? = nil, revokedAt: Date? = nil, revocationReason: Int? = nil,
        revocationType: String? = nil, revocationPercentage: Int? = nil, transactionReason: String? = nil,
        isUpgraded: Bool = false, origin: Origin, signedAt: Date? = nil, revokedSeatQuantity: Int? = nil,
        seatsRevokedAt: Date? = nil
    ) {
        self.revokedSeatQuantity = revokedSeatQuantity
        self.seatsRevokedAt = seatsRevokedAt ?? (revokedSeatQuantity == nil ? nil : signedAt)
        self.transactionID = transactionID
        self.originalTransactionID = originalTransactionID
        self.productID = productID
        self.purchasedAt = purchasedAt
        self.expiresAt = expiresAt
        self.priceMilliunits = priceMilliunits
        self.currency = currency
        self.storefront = storefront
        self.offerType = offerType
        self.offerDiscountType = offerDiscountType
        self.isTrial = isTrial
        self.quantity = quantity
        self.ownershipType = ownershipType
        self.revokedAt = revokedAt
        self.revocationReason = revocationReason
        self.revocationType = revocationType
        self.revocationPercentage = revocationPercentage
        self.transactionReason = transactionReason
        self.isUpgraded = isUpgraded
        self.origin = origin
        self.signedAt = signedAt
    }
}

extension LedgerTransaction {
    /// Whether writing this version of the transaction over `recorded` (the ledger's row of it) would
    /// change the row: what the ledger's upsert would set differs from what it holds. A version signed
    /// before the recorded one changes nothing; a price, currency or storefront this version lacks
    /// keeps the recorded one; seats come from signed versions only.
    public func changes(_ recorded: LedgerTransaction) -> Bool {
        if let signedAt, let recordedSignedAt = recorded.signedAt, signedAt < recordedSignedAt { return false }
        func differ(_ a: Date?, _ b: Date?) -> Bool {
            a.map(AppleDateFormat.milliseconds) != b.map(AppleDateFormat.milliseconds)
        }
        if differ(expiresAt, recorded.expiresAt) || differ(revokedAt, recorded.revokedAt)
            || revocationReason != recorded.revocationReason || revocationType != recorded.revocationType
            || revocationPercentage != recorded.revocationPercentage || isUpgraded != recorded.isUpgraded
        {
            return true
        }
        if priceMilliunits.map({ $0 != recorded.priceMilliunits }) ?? false
            || currency.map({ $0 != recorded.currency }) ?? false
            || storefront.map({ $0 != recorded.storefront }) ?? false
        {
            return true
        }
        guard signedAt != nil else { return false }
        return differ(signedAt, recorded.signedAt) || quantity != recorded.quantity
            || revokedSeatQuantity != recorded.revokedSeatQuantity
            || (revokedSeatQuantity == nil) != (recorded.seatsRevokedAt == nil)
    }
}

extension LedgerTransaction {
    /// A verifyReceipt row as a ledger transaction; nil without a transaction id.
    init?(row: LatestReceiptInfo, originalTransactionID: String) {
        guard let id = row.transactionID else { return nil }
        self.init(
            transactionID: id, originalTransactionID: originalTransactionID, productID: row.productID,
            purchasedAt: row.purchaseDate, expiresAt: row.expiresDate,
            offerType: row.isTrialPeriod == true || row.isInIntroOfferPeriod == true ? 1 : nil,
            offerDiscountType: row.isTrialPeriod == true ? "FREE_TRIAL" : nil, isTrial: row.isTrialPeriod ?? false,
            quantity: row.quantity.flatMap { Int($0) } ?? 1, ownershipType: row.inAppOwnershipType,
            revokedAt: row.cancellationDate, revocationReason: row.cancellationReason.flatMap { Int($0) },
            isUpgraded: row.isUpgraded ?? false, origin: .verifyReceipt)
    }
}
