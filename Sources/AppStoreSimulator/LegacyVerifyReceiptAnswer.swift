import Foundation
import RenewalCore

/// An iOS 6-style verifyReceipt answer. The core's `VerifyReceiptResponse` decodes this shape but
/// encodes the iOS 7+ one, so the simulator writes it here: `latest_receipt_info` (or
/// `latest_expired_receipt_info`) is a single object, `auto_renew_status` a top-level number, and
/// `expires_date` holds milliseconds with `expires_date_formatted` beside it.
struct LegacyVerifyReceiptAnswer: Encodable, Sendable {
    /// One transaction in the iOS 6 shape.
    struct Transaction: Encodable, Sendable {
        var bundleID: String
        var productID: String
        var transactionID: String
        var originalTransactionID: String
        var webOrderLineItemID: String
        var purchaseDate: Date
        var originalPurchaseDate: Date
        var expiresDate: Date

        enum CodingKeys: String, CodingKey {
            case bid, quantity
            case productID = "product_id"
            case transactionID = "transaction_id"
            case originalTransactionID = "original_transaction_id"
            case webOrderLineItemID = "web_order_line_item_id"
            case purchaseDate = "purchase_date"
            case purchaseDateMS = "purchase_date_ms"
            case originalPurchaseDate = "original_purchase_date"
            case originalPurchaseDateMS = "original_purchase_date_ms"
            case expiresDate = "expires_date"
            case expiresDateFormatted = "expires_date_formatted"
        }

        func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(bundleID, forKey: .bid)
            try c.encode("1", forKey: .quantity)
            try c.encode(productID, forKey: .productID)
            try c.encode(transactionID, forKey: .transactionID)
            try c.encode(originalTransactionID, forKey: .originalTransactionID)
            try c.encode(webOrderLineItemID, forKey: .webOrderLineItemID)
            try c.encode(Self.formatted(purchaseDate), forKey: .purchaseDate)
            try c.encode(Self.ms(purchaseDate), forKey: .purchaseDateMS)
            try c.encode(Self.formatted(originalPurchaseDate), forKey: .originalPurchaseDate)
            try c.encode(Self.ms(originalPurchaseDate), forKey: .originalPurchaseDateMS)
            try c.encode(Self.ms(expiresDate), forKey: .expiresDate)
            try c.encode(Self.formatted(expiresDate), forKey: .expiresDateFormatted)
        }

        private static func ms(_ date: Date) -> String { String(AppleDateFormat.milliseconds(date)) }

        /// `yyyy-MM-dd HH:mm:ss Etc/GMT`, as iOS 6 answers wrote their formatted dates.
        private static func formatted(_ date: Date) -> String {
            Timestamp.string(Date(timeIntervalSince1970: (date.timeIntervalSince1970).rounded(.down)))
                .replacingOccurrences(of: "T", with: " ")
                .replacingOccurrences(of: "Z", with: " Etc/GMT")
        }
    }

    var status: AppStoreStatus
    var receipt: Transaction
    var latestReceiptInfo: Transaction?
    var latestExpiredReceiptInfo: Transaction?
    var latestReceipt: String?
    var autoRenewStatus: Int

    enum CodingKeys: String, CodingKey {
        case status, receipt
        case latestReceiptInfo = "latest_receipt_info"
        case latestExpiredReceiptInfo = "latest_expired_receipt_info"
        case latestReceipt = "latest_receipt"
        case autoRenewStatus = "auto_renew_status"
    }
}

extension SimulatedReceipt {
    /// One period `[s, s+p)` (its end moved by any extension): status 0 inside it, 21006 after it.
    func legacyAnswer(at now: Date) -> LegacyVerifyReceiptAnswer {
        let originalID = SimulatedIdentifier.id(account)
        let transaction = LegacyVerifyReceiptAnswer.Transaction(
            bundleID: bundleIdentifier, productID: productID, transactionID: originalID,
            originalTransactionID: originalID, webOrderLineItemID: SimulatedIdentifier.id(account, "line", "", "0"),
            purchaseDate: start, originalPurchaseDate: start, expiresDate: extendedFirstEnd(until: now))
        let expired = now >= extendedFirstEnd(until: now)
        return LegacyVerifyReceiptAnswer(
            status: expired ? .validButExpired : .valid,
            receipt: transaction,
            latestReceiptInfo: expired ? nil : transaction,
            latestExpiredReceiptInfo: expired ? transaction : nil,
            latestReceipt: expired ? nil : encoded,
            autoRenewStatus: 0)
    }
}
