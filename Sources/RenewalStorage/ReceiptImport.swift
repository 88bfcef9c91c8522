import Foundation

/// One line of `renewal import`.
public struct ReceiptImport: Sendable, Hashable {
    public var userID: String
    public var latestReceipt: String
    public var productID: String?

    public init(userID: String, latestReceipt: String, productID: String? = nil) {
        self.userID = userID
        self.latestReceipt = latestReceipt
        self.productID = productID
    }
}

public enum ReceiptImportOutcome: String, Sendable, Hashable {
    /// A new user.
    case inserted
    /// A known user with a different receipt: replaced, due now.
    case replaced
    /// A known user with the same receipt: made due now.
    case unchanged
}
