import Foundation

/// The decoded `receipt` object of a verifyReceipt answer (only the parts the job uses).
public struct ReceiptInfo: Sendable, Hashable, Codable {
    /// `Production`, `ProductionSandbox`, `ProductionVPP`, `ProductionVPPSandbox`.
    public var receiptType: String?
    public var bundleID: String?
    public var inApp: [LatestReceiptInfo]

    public init(receiptType: String?, bundleID: String?, inApp: [LatestReceiptInfo]) {
        self.receiptType = receiptType
        self.bundleID = bundleID
        self.inApp = inApp
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: AppleKey.self)
        receiptType = try c.appleString("receipt_type")
        bundleID = try c.appleString("bundle_id") ?? c.appleString("bid")
        inApp = try c.decodeIfPresent([LatestReceiptInfo].self, forKey: AppleKey("in_app")) ?? []
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: AppleKey.self)
        try c.encodeApple(receiptType, "receipt_type")
        try c.encode(0, forKey: AppleKey("adam_id"))
        try c.encode(0, forKey: AppleKey("app_item_id"))
        try c.encodeApple(bundleID, "bundle_id")
        try c.encode(inApp, forKey: AppleKey("in_app"))
    }
}
