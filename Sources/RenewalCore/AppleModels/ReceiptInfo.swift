import Foundation

/// The decoded `receipt` object of a verifyReceipt answer (only the parts the job uses).
public struct ReceiptInfo: Sendable, Hashable, Encodable {
    /// `Production`, `ProductionSandbox`, `ProductionVPP`, `ProductionVPPSandbox`.
    public var receiptType: String?
    public var bundleID: String?
    public var inApp: [LatestReceiptInfo]

    public init(receiptType: String?, bundleID: String?, inApp: [LatestReceiptInfo]) {
        self.receiptType = receiptType
        self.bundleID = bundleID
        self.inApp = inApp
    }

    enum Field: Int, AppleField {
        case receiptType, bundleID, bid, inApp

        var key: String {
            switch self {
            case .receiptType: "receipt_type"
            case .bundleID: "bundle_id"
            case .bid: "bid"
            case .inApp: "in_app"
            }
        }

        static let keys = makeKeys()
    }

    /// Reads `receipt_type`, the bundle id (`bundle_id`, or iOS 6's `bid`) and, when asked, `in_app`.
    init(json value: JSONValue, readInApp: Bool) throws(AppleAnswerError) {
        let f = try AppleFields<Field>(value)
        receiptType = try f.string(.receiptType)
        let bundleID = try f.string(.bundleID)
        self.bundleID = bundleID == nil ? try f.string(.bid) : bundleID
        inApp = readInApp ? try f.array(.inApp, LatestReceiptInfo.init(json:)) : []
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
