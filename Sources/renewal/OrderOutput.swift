import Foundation
import RenewalCore
import RenewalReports
import RenewalStorage

/// What `renewal lookup` prints: the order's verified transactions, then each subscription with whose it
/// is in the database. Never the signed transactions themselves.
enum OrderOutput {
    /// Whose a subscription of the order is: `user`, `unclaimed` or `not_in_database`.
    static func owner(_ held: HeldSubscription?) -> String {
        guard let held else { return "not_in_database" }
        return held.userID == nil ? "unclaimed" : "user"
    }

    static func text(_ order: LookedUpOrder, held: [String: HeldSubscription]) -> String {
        guard order.isValid else { return "Order \(order.orderID): invalid (Apple does not know this order ID)\n" }
        var text = "Order \(order.orderID): valid (\(order.environment?.rawValue ?? "-"), \(order.bundleID ?? "-"))\n"
        text += "Transactions:\n"
        text += table(
            ["TRANSACTION", "ORIGINAL", "PRODUCT", "TYPE", "PURCHASED", "EXPIRES", "REVOKED", "APP_ACCOUNT_TOKEN"],
            order.transactions.map { transaction in
                [
                    transaction.transactionId ?? "-", transaction.originalTransactionId ?? "-",
                    transaction.productId ?? "-", transaction.type ?? "-", date(transaction.purchaseDate),
                    date(transaction.expiresDate), date(transaction.revocationDate),
                    transaction.appAccountToken ?? "-",
                ]
            })
        if !order.refused.isEmpty {
            text += "  \(order.refused.count) signed transaction(s) failed verification and are not shown: "
            text += order.refused.map(\.rawValue).joined(separator: ", ") + "\n"
        }
        text += "Subscriptions in this database:\n"
        text += table(
            ["ORIGINAL", "PRODUCT", "OWNER", "STATE", "ENTITLED", "EXPIRES_AT"],
            order.subscriptionIDs.map { id in
                let row = held[id]
                let owner = row.map { $0.userID.map { "user \($0)" } ?? "unclaimed" } ?? "not in the database"
                return [
                    id, row?.productID ?? "-", owner, row?.state.rawValue ?? "-",
                    row.map { $0.entitled ? "yes" : "no" } ?? "-", date(row?.expiresAt),
                ]
            })
        for id in order.subscriptionIDs where held[id] != nil && held[id]?.userID == nil {
            text += "  \(id) is unclaimed: renewal claim --original-transaction-id \(id) --user USER\n"
        }
        return text
    }

    static func json(_ order: LookedUpOrder, held: [String: HeldSubscription]) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes, .prettyPrinted]
        let document = OrderJSON(order: order, held: held)
        return ((try? encoder.encode(document)).map { String(decoding: $0, as: UTF8.self) } ?? "{}") + "\n"
    }

    private static func date(_ date: Date?) -> String {
        date.map(Timestamp.string) ?? "-"
    }

    private static func table(_ headings: [String], _ rows: [[String]]) -> String {
        guard !rows.isEmpty else { return "  (none)\n" }
        var widths = headings.map(\.count)
        for row in rows {
            for (index, value) in row.enumerated() { widths[index] = max(widths[index], value.count) }
        }
        let padded = widths.dropLast().map { $0 + 2 } + [0]
        return ([headings] + rows).map { "  " + TextColumns.line($0, widths: padded) + "\n" }.joined()
    }
}

/// `renewal lookup --json`: every key always present, null when unknown.
struct OrderJSON: Encodable {
    var order: LookedUpOrder
    var held: [String: HeldSubscription]

    enum CodingKeys: String, CodingKey {
        case orderID = "order_id", status, environment, bundleID = "bundle_id", transactions, subscriptions, refused
    }

    func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(order.orderID, forKey: .orderID)
        try c.encode(order.isValid ? "valid" : "invalid", forKey: .status)
        try c.encode(order.environment?.rawValue, forKey: .environment)
        try c.encode(order.bundleID, forKey: .bundleID)
        try c.encode(order.transactions.map(TransactionJSON.init), forKey: .transactions)
        try c.encode(
            order.subscriptionIDs.map { SubscriptionJSON(originalTransactionID: $0, held: held[$0]) },
            forKey: .subscriptions)
        try c.encode(order.refused.map(\.rawValue), forKey: .refused)
    }

    struct TransactionJSON: Encodable {
        var transaction: JWSTransaction

        enum CodingKeys: String, CodingKey {
            case transactionID = "transaction_id", originalTransactionID = "original_transaction_id"
            case productID = "product_id", type, purchaseDate = "purchase_date", expiresDate = "expires_date"
            case revocationDate = "revocation_date", appAccountToken = "app_account_token"
        }

        func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(transaction.transactionId, forKey: .transactionID)
            try c.encode(transaction.originalTransactionId, forKey: .originalTransactionID)
            try c.encode(transaction.productId, forKey: .productID)
            try c.encode(transaction.type, forKey: .type)
            try c.encode(transaction.purchaseDate.map(Timestamp.string), forKey: .purchaseDate)
            try c.encode(transaction.expiresDate.map(Timestamp.string), forKey: .expiresDate)
            try c.encode(transaction.revocationDate.map(Timestamp.string), forKey: .revocationDate)
            try c.encode(transaction.appAccountToken, forKey: .appAccountToken)
        }
    }

    struct SubscriptionJSON: Encodable {
        var originalTransactionID: String
        var held: HeldSubscription?

        enum CodingKeys: String, CodingKey {
            case originalTransactionID = "original_transaction_id", productID = "product_id", owner
            case userID = "user_id", state, entitled, expiresAt = "expires_at", environment
            case appAccountToken = "app_account_token"
        }

        func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(originalTransactionID, forKey: .originalTransactionID)
            try c.encode(held?.productID, forKey: .productID)
            try c.encode(OrderOutput.owner(held), forKey: .owner)
            try c.encode(held?.userID, forKey: .userID)
            try c.encode(held?.state.rawValue, forKey: .state)
            try c.encode(held?.entitled, forKey: .entitled)
            try c.encode(held?.expiresAt.map(Timestamp.string), forKey: .expiresAt)
            try c.encode(held?.environment?.rawValue, forKey: .environment)
            try c.encode(held?.appAccountToken, forKey: .appAccountToken)
        }
    }
}
