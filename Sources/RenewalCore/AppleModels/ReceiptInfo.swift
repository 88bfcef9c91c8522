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
        try self.init(from: decoder.container(keyedBy: AppleKey.self), readInApp: true)
    }

    /// Reads `receipt_type`, the bundle id (`bundle_id`, or iOS 6's `bid`) and, when asked, `in_app`.
    init(from c: KeyedDecodingContainer<AppleKey>, readInApp: Bool) throws {
        receiptType = try c.appleString("receipt_type")
        bundleID = try c.appleString("bundle_id") ?? c.appleString("bid")
        let inAppKey = AppleKey("in_app")
        if readInApp, c.contains(inAppKey), try !c.decodeNil(forKey: inAppKey) {
            inApp = try c.decode([LatestReceiptInfo].self, forKey: inAppKey)
        } else {
            inApp = []
        }
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
