import Foundation
import RenewalCore

/// A payload whose signature and chain the verifier checks.
protocol SignedPayload: Decodable {
    var signedDate: Date? { get }
    var environment: String? { get }
}

/// The decoded payload of a signed transaction (`JWSTransactionDecodedPayload`). Dates are UNIX
/// milliseconds (fractional in Xcode's data); enums keep unknown raw values; every field is optional,
/// so a field Apple adds or drops never fails the decode.
public struct JWSTransaction: SignedPayload, Sendable, Hashable {
    public var transactionId: String?
    public var originalTransactionId: String?
    public var webOrderLineItemId: String?
    public var bundleId: String?
    public var productId: String?
    public var subscriptionGroupIdentifier: String?
    public var purchaseDate: Date?
    public var originalPurchaseDate: Date?
    public var expiresDate: Date?
    public var signedDate: Date?
    public var type: String?
    public var inAppOwnershipType: String?
    public var revocationDate: Date?
    public var revocationReason: Int?
    public var revocationType: String?
    /// Milliunits: 50000 is 50%.
    public var revocationPercentage: Int?
    public var isUpgraded: Bool?
    public var offerType: Int?
    public var offerDiscountType: String?
    public var environment: String?
    public var transactionReason: String?
    public var billingPlanType: String?
    public var commitmentInfo: CommitmentInfo?
    /// The UUID the app set at purchase (`appAccountToken`), if any.
    public var appAccountToken: String?
    /// Milliunits of `currency` (API 1.10 on).
    public var price: Int64?
    public var currency: String?
    public var storefront: String?
    public var quantity: Int?
    /// A multiseat purchase's seat information (API 1.22 on); nil for a single seat.
    public var multiSeatInfo: MultiSeatInfo?

    enum CodingKeys: String, CodingKey {
        case appAccountToken, price, currency, storefront, quantity, multiSeatInfo
        case transactionId, originalTransactionId, webOrderLineItemId, bundleId, productId, subscriptionGroupIdentifier
        case purchaseDate, originalPurchaseDate, expiresDate, signedDate, type, inAppOwnershipType, revocationDate
        case revocationReason, revocationType, revocationPercentage, isUpgraded, offerType, offerDiscountType,
            environment
        case transactionReason, billingPlanType, commitmentInfo
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        transactionId = c.flexibleString(.transactionId)
        originalTransactionId = c.flexibleString(.originalTransactionId)
        webOrderLineItemId = c.flexibleString(.webOrderLineItemId)
        bundleId = c.flexibleString(.bundleId)
        productId = c.flexibleString(.productId)
        subscriptionGroupIdentifier = c.flexibleString(.subscriptionGroupIdentifier)
        purchaseDate = c.milliseconds(.purchaseDate)
        originalPurchaseDate = c.milliseconds(.originalPurchaseDate)
        expiresDate = c.milliseconds(.expiresDate)
        signedDate = c.milliseconds(.signedDate)
        type = c.flexibleString(.type)
        inAppOwnershipType = c.flexibleString(.inAppOwnershipType)
        revocationDate = c.milliseconds(.revocationDate)
        revocationReason = c.flexibleInt(.revocationReason)
        revocationType = c.flexibleString(.revocationType)
        revocationPercentage = c.flexibleInt(.revocationPercentage)
        isUpgraded = c.flexibleBool(.isUpgraded)
        offerType = c.flexibleInt(.offerType)
        offerDiscountType = c.flexibleString(.offerDiscountType)
        environment = c.flexibleString(.environment)
        transactionReason = c.flexibleString(.transactionReason)
        billingPlanType = c.flexibleString(.billingPlanType)
        commitmentInfo = try? c.decodeIfPresent(CommitmentInfo.self, forKey: .commitmentInfo)
        appAccountToken = c.flexibleString(.appAccountToken)
        price = c.flexibleInt(.price).map(Int64.init)
        currency = c.flexibleString(.currency)
        storefront = c.flexibleString(.storefront)
        quantity = c.flexibleInt(.quantity)
        multiSeatInfo = try? c.decodeIfPresent(MultiSeatInfo.self, forKey: .multiSeatInfo)
    }

    /// This transaction for the ledger; nil without a transaction id.
    public func ledgerTransaction(origin: LedgerTransaction.Origin, originalTransactionID: String)
        -> LedgerTransaction?
    {
        guard let transactionId else { return nil }
        return LedgerTransaction(
            transactionID: transactionId, originalTransactionID: originalTransactionID, productID: productId,
            purchasedAt: purchaseDate, expiresAt: expiresDate, priceMilliunits: price, currency: currency,
            storefront: storefront, offerType: offerType, offerDiscountType: offerDiscountType,
            isTrial: offerType == 1 && offerDiscountType == "FREE_TRIAL", quantity: quantity ?? 1,
            ownershipType: inAppOwnershipType, revokedAt: revocationDate, revocationReason: revocationReason,
            revocationType: revocationType, revocationPercentage: revocationPercentage,
            transactionReason: transactionReason, isUpgraded: isUpgraded ?? false, origin: origin,
            signedAt: signedDate, revokedSeatQuantity: multiSeatInfo?.revokedSeatQuantity)
    }
}

/// A multiseat transaction's seat information (`TransactionMultiSeatInfo`). Only what the job reads.
public struct MultiSeatInfo: Decodable, Sendable, Hashable {
    /// `APPLE` (each member has a transaction of its own, `ASSIGNED`) or `DEVELOPER`.
    public var invitationManagement: String?
    /// Seats a seat refund took back; only on the purchaser's transaction, which stays valid (Apple:
    /// never revoke the purchaser's access for it; a full revocation carries `revocationDate`).
    public var revokedSeatQuantity: Int?

    enum CodingKeys: String, CodingKey {
        case invitationManagement, revokedSeatQuantity
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        invitationManagement = c.flexibleString(.invitationManagement)
        revokedSeatQuantity = c.flexibleInt(.revokedSeatQuantity)
    }
}

/// The 12-month commitment of a monthly plan (API 1.21). Only what the job reads; unknown fields are ignored.
public struct CommitmentInfo: Decodable, Sendable, Hashable {
    /// When the commitment ends (UNIX milliseconds).
    public var commitmentExpiresDate: Date?
    /// Whether the commitment renews for another term when it ends (1 on, 0 off).
    public var commitmentAutoRenewStatus: Int?
    public var billingPeriodsRemaining: Int?

    enum CodingKeys: String, CodingKey {
        case commitmentExpiresDate, commitmentAutoRenewStatus, billingPeriodsRemaining
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        commitmentExpiresDate = c.milliseconds(.commitmentExpiresDate)
        commitmentAutoRenewStatus = c.flexibleInt(.commitmentAutoRenewStatus)
        billingPeriodsRemaining = c.flexibleInt(.billingPeriodsRemaining)
    }
}

/// The decoded payload of signed renewal info (`JWSRenewalInfoDecodedPayload`).
public struct JWSRenewalInfo: SignedPayload, Sendable, Hashable {
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

extension KeyedDecodingContainer {
    func flexibleString(_ key: Key) -> String? {
        if let text = try? decodeIfPresent(String.self, forKey: key) { return text }
        if let number = try? decodeIfPresent(Int64.self, forKey: key) { return String(number) }
        return nil
    }

    func flexibleInt(_ key: Key) -> Int? {
        if let number = try? decodeIfPresent(Int.self, forKey: key) { return number }
        if let text = try? decodeIfPresent(String.self, forKey: key) { return Int(text) }
        return nil
    }

    func flexibleBool(_ key: Key) -> Bool? {
        if let flag = try? decodeIfPresent(Bool.self, forKey: key) { return flag }
        if let number = flexibleInt(key) { return number != 0 }
        if let text = try? decodeIfPresent(String.self, forKey: key) { return text == "true" }
        return nil
    }

    /// UNIX milliseconds as an integer, a fractional number or a string of digits; nil outside 2000-2100
    /// (a date there is a broken answer, not a subscription until the year 3000).
    func milliseconds(_ key: Key) -> Date? {
        let value: Double?
        if let number = try? decodeIfPresent(Double.self, forKey: key) {
            value = number
        } else if let text = try? decodeIfPresent(String.self, forKey: key) {
            value = Double(text)
        } else {
            value = nil
        }
        guard let value, value.isFinite, (946_684_800_000...4_102_444_800_000).contains(value) else { return nil }
        return Date(timeIntervalSince1970: value / 1000)
    }
}
