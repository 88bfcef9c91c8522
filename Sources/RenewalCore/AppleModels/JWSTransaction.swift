import Foundation

/// The decoded payload of a signed transaction (`JWSTransactionDecodedPayload`), Apple's wire model for
/// the App Store Server API as `LatestReceiptInfo` is verifyReceipt's. Dates are UNIX milliseconds
/// (fractional in Xcode's data); enums keep unknown raw values; every field is optional, so a field Apple
/// adds or drops never fails the decode. `RenewalServerAPI` verifies the JWS and decodes it into this;
/// what its fields mean for entitlement is decided here in Core (`AppleEvidence+ServerAPI.swift`).
public struct JWSTransaction: Decodable, Sendable, Hashable {
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

    /// Nothing said: the fields are set one by one (tests, and values built from other sources).
    public init() {}

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

    public init(invitationManagement: String? = nil, revokedSeatQuantity: Int? = nil) {
        self.invitationManagement = invitationManagement
        self.revokedSeatQuantity = revokedSeatQuantity
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

    public init(
        commitmentExpiresDate: Date? = nil, commitmentAutoRenewStatus: Int? = nil, billingPeriodsRemaining: Int? = nil
    ) {
        self.commitmentExpiresDate = commitmentExpiresDate
        self.commitmentAutoRenewStatus = commitmentAutoRenewStatus
        self.billingPeriodsRemaining = billingPeriodsRemaining
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        commitmentExpiresDate = c.milliseconds(.commitmentExpiresDate)
        commitmentAutoRenewStatus = c.flexibleInt(.commitmentAutoRenewStatus)
        billingPeriodsRemaining = c.flexibleInt(.billingPeriodsRemaining)
    }
}
