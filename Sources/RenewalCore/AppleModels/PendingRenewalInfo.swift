import Foundation

/// One element of `pending_renewal_info`: the upcoming (or failed) renewal of one subscription.
public struct PendingRenewalInfo: Sendable, Hashable, Encodable {
    public var originalTransactionID: String?
    public var productID: String?
    /// The product billed at the next renewal (differs after a downgrade or crossgrade).
    public var autoRenewProductID: String?
    /// `"1"`: renews at period end; `"0"`: the customer turned auto-renew off.
    public var autoRenewStatus: Bool?
    /// 1 voluntary, 2 billing error, 3 price increase refused, 4 product unavailable, 5 other.
    public var expirationIntent: String?
    /// `"1"`: Apple is still trying to collect payment.
    public var isInBillingRetryPeriod: Bool?
    /// End of the billing grace period; the subscriber keeps access until then.
    public var gracePeriodExpiresDate: Date?
    public var priceIncreaseStatus: String?

    public init(
        originalTransactionID: String?, productID: String?, autoRenewProductID: String? = nil,
        autoRenewStatus: Bool?, expirationIntent: String? = nil, isInBillingRetryPeriod: Bool? = nil,
        gracePeriodExpiresDate: Date? = nil, priceIncreaseStatus: String? = nil
    ) {
        self.originalTransactionID = originalTransactionID
        self.productID = productID
        self.autoRenewProductID = autoRenewProductID ?? productID
        self.autoRenewStatus = autoRenewStatus
        self.expirationIntent = expirationIntent
        self.isInBillingRetryPeriod = isInBillingRetryPeriod
        self.gracePeriodExpiresDate = gracePeriodExpiresDate
        self.priceIncreaseStatus = priceIncreaseStatus
    }

    enum Field: Int, AppleField {
        case originalTransactionID, productID, autoRenewProductID, autoRenewStatus, expirationIntent
        case isInBillingRetryPeriod, gracePeriodExpiresDateMS, gracePeriodExpiresDate

        var key: String {
            switch self {
            case .originalTransactionID: "original_transaction_id"
            case .productID: "product_id"
            case .autoRenewProductID: "auto_renew_product_id"
            case .autoRenewStatus: "auto_renew_status"
            case .expirationIntent: "expiration_intent"
            case .isInBillingRetryPeriod: "is_in_billing_retry_period"
            case .gracePeriodExpiresDateMS: "grace_period_expires_date_ms"
            case .gracePeriodExpiresDate: "grace_period_expires_date"
            }
        }

        static let keys = makeKeys()
    }

    /// Reads one element of `pending_renewal_info`.
    init(json value: JSONValue) throws(AppleAnswerError) {
        let f = try AppleFields<Field>(value)
        originalTransactionID = try f.string(.originalTransactionID)
        productID = try f.string(.productID)
        autoRenewProductID = try f.string(.autoRenewProductID)
        autoRenewStatus = try f.bool(.autoRenewStatus)
        expirationIntent = try f.string(.expirationIntent)
        isInBillingRetryPeriod = try f.bool(.isInBillingRetryPeriod)
        gracePeriodExpiresDate = try f.date(.gracePeriodExpiresDateMS, or: .gracePeriodExpiresDate)
        // Not used by the job, so never read: an odd value there cannot fail an answer.
        priceIncreaseStatus = nil
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: AppleKey.self)
        try c.encodeApple(expirationIntent, "expiration_intent")
        try c.encodeApple(autoRenewProductID, "auto_renew_product_id")
        try c.encodeAppleOneZero(isInBillingRetryPeriod, "is_in_billing_retry_period")
        try c.encodeApple(productID, "product_id")
        try c.encodeApple(originalTransactionID, "original_transaction_id")
        try c.encodeAppleOneZero(autoRenewStatus, "auto_renew_status")
        try c.encodeAppleDate(gracePeriodExpiresDate, "grace_period_expires_date")
        try c.encodeApple(priceIncreaseStatus, "price_increase_status")
    }
}
