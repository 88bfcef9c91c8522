import Foundation

/// A verifyReceipt answer, in both shapes Apple sends: app receipts (iOS 7+) and iOS 6-style
/// transaction receipts (single-object `latest_receipt_info`, `latest_expired_receipt_info`,
/// top-level numeric `auto_renew_status`, status 21006).
///
/// Decoding reads only the fields the job uses, so an odd type in any other field (a numeric
/// `application_version`, an object `quantity`) never fails an answer; an unreadable used field
/// throws a `DecodingError` whose coding path names it. Answers whose status is not valid (0, 21006)
/// are read no further than their status, environment and retry flag.
public struct VerifyReceiptResponse: Sendable, Hashable, Codable {
    public var status: AppStoreStatus
    public var environment: AppStoreEnvironment?
    /// `is-retryable` or `is_retryable` (sources disagree on the spelling; both are read).
    public var isRetryable: Bool?
    /// The newest receipt; replaces the stored one.
    public var latestReceipt: String?
    /// Unordered; may hold several products and subscriptions.
    public var latestReceiptInfo: [LatestReceiptInfo]
    /// iOS 6-style answers only.
    public var latestExpiredReceiptInfo: LatestReceiptInfo?
    public var pendingRenewalInfo: [PendingRenewalInfo]
    public var receipt: ReceiptInfo?
    /// iOS 6-style answers carry their renewal fields at the top level: auto-renew, …
    public var autoRenewStatus: Bool?
    /// … the expiration intent …
    public var expirationIntent: String?
    /// … and the billing-retry flag.
    public var isInBillingRetryPeriod: Bool?

    public init(
        status: AppStoreStatus, environment: AppStoreEnvironment? = nil, isRetryable: Bool? = nil,
        latestReceipt: String? = nil, latestReceiptInfo: [LatestReceiptInfo] = [],
        latestExpiredReceiptInfo: LatestReceiptInfo? = nil, pendingRenewalInfo: [PendingRenewalInfo] = [],
        receipt: ReceiptInfo? = nil, autoRenewStatus: Bool? = nil, expirationIntent: String? = nil,
        isInBillingRetryPeriod: Bool? = nil
    ) {
        self.status = status
        self.environment = environment
        self.isRetryable = isRetryable
        self.latestReceipt = latestReceipt
        self.latestReceiptInfo = latestReceiptInfo
        self.latestExpiredReceiptInfo = latestExpiredReceiptInfo
        self.pendingRenewalInfo = pendingRenewalInfo
        self.receipt = receipt
        self.autoRenewStatus = autoRenewStatus
        self.expirationIntent = expirationIntent
        self.isInBillingRetryPeriod = isInBillingRetryPeriod
    }

    /// The top-level renewal fields of an iOS 6-style answer, as renewal info; nil when there are none.
    public var topLevelRenewal: PendingRenewalInfo? {
        guard autoRenewStatus != nil || expirationIntent != nil || isInBillingRetryPeriod != nil else { return nil }
        return PendingRenewalInfo(
            originalTransactionID: nil, productID: nil, autoRenewStatus: autoRenewStatus,
            expirationIntent: expirationIntent, isInBillingRetryPeriod: isInBillingRetryPeriod)
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: AppleKey.self)
        guard let statusText = try c.appleString("status"), let code = Int(statusText) else {
            throw DecodingError.keyNotFound(
                AppleKey("status"), .init(codingPath: c.codingPath, debugDescription: "No numeric status in the answer."))
        }
        status = AppStoreStatus(code)
        environment = try c.appleString("environment").map(AppStoreEnvironment.init(rawValue:))
        isRetryable = try c.appleBool("is-retryable") ?? c.appleBool("is_retryable")
        latestReceiptInfo = []
        pendingRenewalInfo = []
        guard status.disposition(isRetryableFlag: isRetryable) == .valid else { return }

        latestReceipt = try c.appleString("latest_receipt")
        let infoKey = AppleKey("latest_receipt_info")
        if try !c.contains(infoKey) || c.decodeNil(forKey: infoKey) {
            latestReceiptInfo = []
        } else if (try? c.nestedUnkeyedContainer(forKey: infoKey)) != nil {
            latestReceiptInfo = try c.decode([LatestReceiptInfo].self, forKey: infoKey)
        } else {
            latestReceiptInfo = [try c.decode(LatestReceiptInfo.self, forKey: infoKey)]
        }
        let expiredKey = AppleKey("latest_expired_receipt_info")
        if c.contains(expiredKey), try !c.decodeNil(forKey: expiredKey) {
            latestExpiredReceiptInfo = try c.decode(LatestReceiptInfo.self, forKey: expiredKey)
        }
        let renewalKey = AppleKey("pending_renewal_info")
        if c.contains(renewalKey), try !c.decodeNil(forKey: renewalKey) {
            pendingRenewalInfo = try c.decode([PendingRenewalInfo].self, forKey: renewalKey)
        }
        let receiptKey = AppleKey("receipt")
        if c.contains(receiptKey), try !c.decodeNil(forKey: receiptKey) {
            // `in_app` is read only when the answer has no `latest_receipt_info` to go by.
            let readInApp = latestReceiptInfo.isEmpty && latestExpiredReceiptInfo == nil
            receipt = try ReceiptInfo(from: c.nestedContainer(keyedBy: AppleKey.self, forKey: receiptKey), readInApp: readInApp)
        }
        autoRenewStatus = try c.appleBool("auto_renew_status")
        expirationIntent = try c.appleString("expiration_intent")
        isInBillingRetryPeriod = try c.appleBool("is_in_billing_retry_period")
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: AppleKey.self)
        try c.encode(status, forKey: AppleKey("status"))
        try c.encodeIfPresent(environment, forKey: AppleKey("environment"))
        if let isRetryable { try c.encode(isRetryable, forKey: AppleKey("is_retryable")) }
        try c.encodeIfPresent(receipt, forKey: AppleKey("receipt"))
        if !latestReceiptInfo.isEmpty { try c.encode(latestReceiptInfo, forKey: AppleKey("latest_receipt_info")) }
        try c.encodeIfPresent(latestExpiredReceiptInfo, forKey: AppleKey("latest_expired_receipt_info"))
        try c.encodeApple(latestReceipt, "latest_receipt")
        if !pendingRenewalInfo.isEmpty { try c.encode(pendingRenewalInfo, forKey: AppleKey("pending_renewal_info")) }
        if let autoRenewStatus { try c.encode(autoRenewStatus ? 1 : 0, forKey: AppleKey("auto_renew_status")) }
    }
}
