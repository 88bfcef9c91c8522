/// The receipt-level verification status (subscription states live on the subscriptions).
public enum ReceiptStatus: String, Sendable, Hashable, Codable {
    /// Never verified successfully.
    case unverified
    /// Last successful answer was valid.
    case verified
    /// Apple rejects the receipt itself.
    case invalid
}
