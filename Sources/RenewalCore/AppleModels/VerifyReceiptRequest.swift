/// The body POSTed to verifyReceipt. Note Apple's hyphenated request keys.
public struct VerifyReceiptRequest: Sendable, Hashable, Codable {
    public var receiptData: String
    public var password: String?
    public var excludeOldTransactions: Bool?

    public init(receiptData: String, password: String?, excludeOldTransactions: Bool = true) {
        self.receiptData = receiptData
        self.password = password
        self.excludeOldTransactions = excludeOldTransactions
    }

    enum CodingKeys: String, CodingKey {
        case receiptData = "receipt-data"
        case password
        case excludeOldTransactions = "exclude-old-transactions"
    }
}
