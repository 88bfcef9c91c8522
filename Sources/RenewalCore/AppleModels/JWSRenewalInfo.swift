import Foundation

/// The decoded payload of signed renewal info (`JWSRenewalInfoDecodedPayload`), the Server API's
/// `PendingRenewalInfo`; decoded as leniently as `JWSTransaction`.
public struct JWSRenewalInfo: Decodable, Sendable, Hashable {
    public var originalTransactionId: String?
    public var productId: String?
    public var autoRenewProductId: String?
    /// 1 on, 0 off.
    public var autoRenewStatus: Int?
    /// 1 cancelled, 2 billing error, 3 price increase refused, 4 product unavailable, 5 other.
    public var expirationIntent: Int?
    public var isInBillingRetryPeriod: Bool?
    public var gracePeriodExpiresDate: Date?
    public var renewalDate: Date?
    public var signedDate: Date?
    public var environment: String?

    enum CodingKeys: String, CodingKey {
        case originalTransactionId, productId, autoRenewProductId, autoRenewStatus, expirationIntent
        case isInBillingRetryPeriod, gracePeriodExpiresDate, renewalDate, signedDate, environment
    }

    /// Nothing said: the fields are set one by one.
    public init() {}

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        originalTransactionId = c.flexibleString(.originalTransactionId)
        productId = c.flexibleString(.productId)
        autoRenewProductId = c.flexibleString(.autoRenewProductId)
        autoRenewStatus = c.flexibleInt(.autoRenewStatus)
        expirationIntent = c.flexibleInt(.expirationIntent)
        isInBillingRetryPeriod = c.flexibleBool(.isInBillingRetryPeriod)
        gracePeriodExpiresDate = c.milliseconds(.gracePeriodExpiresDate)
        renewalDate = c.milliseconds(.renewalDate)
        signedDate = c.milliseconds(.signedDate)
        environment = c.flexibleString(.environment)
    }
}
