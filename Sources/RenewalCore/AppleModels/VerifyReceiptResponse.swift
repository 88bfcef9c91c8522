import Foundation

/// A verifyReceipt answer, in both shapes Apple sends: app receipts (iOS 7+) and iOS 6-style
/// transaction receipts (single-object `latest_receipt_info`, `latest_expired_receipt_info`,
/// top-level numeric `auto_renew_status`, status 21006). Unknown fields are ignored.
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
    /// iOS 6-style answers carry auto-renew at the top level.
    public var autoRenewStatus: Bool?

    public init(
        status: AppStoreStatus, environment: AppStoreEnvironment? = nil, isRetryable: Bool? = nil,
        latestReceipt: String? = nil, latestReceiptInfo: [LatestReceiptInfo] = [],
        latestExpiredReceiptInfo: LatestReceiptInfo? = nil, pendingRenewalInfo: [PendingRenewalInfo] = [],
        receipt: ReceiptInfo? = nil, autoRenewStatus: Bool? = nil
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
        latestReceipt = try c.appleString("latest_receipt")
        let infoKey = AppleKey("latest_receipt_info")
        if try !c.contains(infoKey) || c.decodeNil(forKey: infoKey) {
            latestReceiptInfo = []
        } else if let rows = try? c.decode([LatestReceiptInfo].self, forKey: infoKey) {
            latestReceiptInfo = rows
        } else {
            latestReceiptInfo = [try c.decode(LatestReceiptInfo.self, forKey: infoKey)]
        }
        latestExpiredReceiptInfo = try c.decodeIfPresent(LatestReceiptInfo.self, forKey: AppleKey("latest_expired_receipt_info"))
        pendingRenewalInfo = try c.decodeIfPresent([PendingRenewalInfo].self, forKey: AppleKey("pending_renewal_info")) ?? []
        receipt = try c.decodeIfPresent(ReceiptInfo.self, forKey: AppleKey("receipt"))
        autoRenewStatus = try c.appleBool("auto_renew_status")
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
