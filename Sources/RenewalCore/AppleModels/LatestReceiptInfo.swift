import Foundation

/// One transaction row of `latest_receipt_info` (or `receipt.in_app`, or the single object of an
/// iOS 6-style answer): string-typed numbers and flags, date triples.
///
/// Decoding reads only what the job uses (ids, product, purchase and expiry dates, cancellation,
/// trial/intro/upgrade flags, ownership, group; `quantity` and `cancellation_reason` for the ledger,
/// left out when odd), so odd values in `web_order_line_item_id`, `original_purchase_date*`,
/// `quantity` or `cancellation_reason` never fail an answer; those properties exist so the simulator
/// can write complete answers.
public struct LatestReceiptInfo: Sendable, Hashable, Encodable {
    public var productID: String?
    public var transactionID: String?
    public var originalTransactionID: String?
    public var webOrderLineItemID: String?
    public var quantity: String?
    public var purchaseDate: Date?
    public var originalPurchaseDate: Date?
    /// End of this subscription period; nil for non-subscription products.
    public var expiresDate: Date?
    /// Present only when Apple refunded or revoked this transaction.
    public var cancellationDate: Date?
    public var cancellationReason: String?
    public var isTrialPeriod: Bool?
    public var isInIntroOfferPeriod: Bool?
    /// This transaction no longer grants access: the customer upgraded.
    public var isUpgraded: Bool?
    /// `PURCHASED` or `FAMILY_SHARED`.
    public var inAppOwnershipType: String?
    public var subscriptionGroupIdentifier: String?

    public init(
        productID: String?, transactionID: String?, originalTransactionID: String?,
        webOrderLineItemID: String? = nil, quantity: String? = "1",
        purchaseDate: Date?, originalPurchaseDate: Date? = nil, expiresDate: Date?,
        cancellationDate: Date? = nil, cancellationReason: String? = nil,
        isTrialPeriod: Bool? = false, isInIntroOfferPeriod: Bool? = false, isUpgraded: Bool? = nil,
        inAppOwnershipType: String? = "PURCHASED", subscriptionGroupIdentifier: String? = nil
    ) {
        self.productID = productID
        self.transactionID = transactionID
        self.originalTransactionID = originalTransactionID
        self.webOrderLineItemID = webOrderLineItemID
        self.quantity = quantity
        self.purchaseDate = purchaseDate
        self.originalPurchaseDate = originalPurchaseDate
        self.expiresDate = expiresDate
        self.cancellationDate = cancellationDate
        self.cancellationReason = cancellationReason
        self.isTrialPeriod = isTrialPeriod
        self.isInIntroOfferPeriod = isInIntroOfferPeriod
        self.isUpgraded = isUpgraded
        self.inAppOwnershipType = inAppOwnershipType
        self.subscriptionGroupIdentifier = subscriptionGroupIdentifier
    }

    enum Field: Int, AppleField {
        case productID, transactionID, originalTransactionID, purchaseDateMS, purchaseDate, expiresDateMS, expiresDate
        case cancellationDateMS, cancellationDate, isTrialPeriod, isInIntroOfferPeriod, isUpgraded, inAppOwnershipType
        case subscriptionGroupIdentifier, quantity, cancellationReason

        var key: String {
            switch self {
            case .productID: "product_id"
            case .transactionID: "transaction_id"
            case .originalTransactionID: "original_transaction_id"
            case .purchaseDateMS: "purchase_date_ms"
            case .purchaseDate: "purchase_date"
            case .expiresDateMS: "expires_date_ms"
            case .expiresDate: "expires_date"
            case .cancellationDateMS: "cancellation_date_ms"
            case .cancellationDate: "cancellation_date"
            case .isTrialPeriod: "is_trial_period"
            case .isInIntroOfferPeriod: "is_in_intro_offer_period"
            case .isUpgraded: "is_upgraded"
            case .inAppOwnershipType: "in_app_ownership_type"
            case .subscriptionGroupIdentifier: "subscription_group_identifier"
            case .quantity: "quantity"
            case .cancellationReason: "cancellation_reason"
            }
        }

        static let keys = makeKeys()
    }

    /// Reads one transaction object of an answer.
    init(json value: JSONValue) throws(AppleAnswerError) {
        let f = try AppleFields<Field>(value)
        productID = try f.string(.productID)
        transactionID = try f.string(.transactionID)
        originalTransactionID = try f.string(.originalTransactionID)
        purchaseDate = try f.date(.purchaseDateMS, or: .purchaseDate)
        expiresDate = try f.date(.expiresDateMS, or: .expiresDate)
        cancellationDate = try f.date(.cancellationDateMS, or: .cancellationDate)
        isTrialPeriod = try f.bool(.isTrialPeriod)
        isInIntroOfferPeriod = try f.bool(.isInIntroOfferPeriod)
        isUpgraded = try f.bool(.isUpgraded)
        inAppOwnershipType = try f.string(.inAppOwnershipType)
        subscriptionGroupIdentifier = try f.string(.subscriptionGroupIdentifier)
        webOrderLineItemID = nil
        originalPurchaseDate = nil
        // Read for the ledger only: an odd value is left out, never a failed answer.
        quantity = (try? f.string(.quantity)) ?? nil
        cancellationReason = (try? f.string(.cancellationReason)) ?? nil
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: AppleKey.self)
        try c.encodeApple(quantity, "quantity")
        try c.encodeApple(productID, "product_id")
        try c.encodeApple(transactionID, "transaction_id")
        try c.encodeApple(originalTransactionID, "original_transaction_id")
        try c.encodeAppleDate(purchaseDate, "purchase_date")
        try c.encodeAppleDate(originalPurchaseDate, "original_purchase_date")
        try c.encodeAppleDate(expiresDate, "expires_date")
        try c.encodeAppleDate(cancellationDate, "cancellation_date")
        try c.encodeApple(cancellationReason, "cancellation_reason")
        try c.encodeApple(webOrderLineItemID, "web_order_line_item_id")
        try c.encodeAppleTrueFalse(isTrialPeriod, "is_trial_period")
        try c.encodeAppleTrueFalse(isInIntroOfferPeriod, "is_in_intro_offer_period")
        if isUpgraded == true { try c.encodeAppleTrueFalse(true, "is_upgraded") }
        try c.encodeApple(inAppOwnershipType, "in_app_ownership_type")
        try c.encodeApple(subscriptionGroupIdentifier, "subscription_group_identifier")
    }
}
