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

extension VerifyReceiptRequest {
    /// The request as JSON, written directly (a receipt is kilobytes of base64: an encoder's
    /// generic machinery costs more than the copy). Keys in the order Apple documents them.
    public var jsonBody: [UInt8] {
        var body: [UInt8] = []
        body.reserveCapacity(receiptData.utf8.count + (password?.utf8.count ?? 0) + 80)
        body.append(contentsOf: #"{"receipt-data":"#.utf8)
        JSONText.appendQuoted(receiptData, to: &body)
        if let password {
            body.append(contentsOf: #","password":"#.utf8)
            JSONText.appendQuoted(password, to: &body)
        }
        if let excludeOldTransactions {
            body.append(
                contentsOf: (excludeOldTransactions
                    ? #","exclude-old-transactions":true"# : #","exclude-old-transactions":false"#).utf8)
        }
        body.append(UInt8(ascii: "}"))
        return body
    }
}
