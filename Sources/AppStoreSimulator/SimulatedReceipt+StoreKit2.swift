import Crypto
import Foundation
import RenewalServerAPI

/// The simulated customer as a StoreKit 2 app knows it: no receipt, a transaction (`originalID`,
/// `jwsRepresentation`) and the `appAccountToken` the app set at purchase.
extension SimulatedReceipt {
    /// How an import line names the customer.
    public enum ImportForm: String, Sendable, CaseIterable {
        /// `{"user_id", "latest_receipt"}`: the receipt.
        case receipt
        /// `{"user_id", "original_transaction_id", "app_account_token", "product_id"}`: StoreKit 2's
        /// `originalID`, as an app's server records it with the purchase.
        case transactionID = "transaction-id"
        /// `{"user_id", "signed_transaction"}`: StoreKit 2's `jwsRepresentation` of the purchase.
        case signedTransaction = "signed-transaction"
    }

    /// The original transaction id of the customer's subscription (what Get All Subscription Statuses
    /// is asked by).
    public var originalTransactionID: String { SimulatedIdentifier.id(account) }

    /// The UUID the simulated app set at purchase, derived from the account.
    public var appAccountToken: String {
        var bytes = Array(SHA256.hash(data: Data(("app-account#" + account).utf8)).prefix(16))
        bytes[6] = (bytes[6] & 0x0F) | 0x40  // version 4
        bytes[8] = (bytes[8] & 0x3F) | 0x80  // RFC 4122 variant
        let uuid = bytes.withUnsafeBytes { UUID(uuid: $0.load(as: uuid_t.self)) }
        return uuid.uuidString.lowercased()
    }

    /// The purchase as StoreKit 2 hands it to the app (`Transaction.jwsRepresentation`), signed by
    /// `signer` at the purchase date.
    public func signedTransaction(signer: SigningChain) throws -> String {
        let environment = scenario == .sandbox ? "Sandbox" : "Production"
        let payload: [String: Any] = [
            "transactionId": originalTransactionID, "originalTransactionId": originalTransactionID,
            "bundleId": bundleIdentifier, "productId": productID, "environment": environment,
            "purchaseDate": SimulatedReceipt.ms(start), "originalPurchaseDate": SimulatedReceipt.ms(start),
            "expiresDate": SimulatedReceipt.ms(start.addingTimeInterval(period)),
            "signedDate": SimulatedReceipt.ms(start), "type": "Auto-Renewable Subscription",
            "inAppOwnershipType": scenario == .familyShared ? "FAMILY_SHARED" : "PURCHASED",
            "transactionReason": "PURCHASE", "quantity": 1, "appAccountToken": accountToken ?? appAccountToken,
            "storefront": "USA", "storefrontId": "143441",
        ]
        return try signer.sign(SimulatedReceipt.json(payload))
    }

    /// One import line for `userID` in `form` (`signer` is needed for `signedTransaction`).
    public func importLine(userID: String, form: ImportForm, signer: SigningChain? = nil) throws -> String {
        var line: [String: Any] = ["user_id": userID]
        switch form {
        case .receipt:
            line["latest_receipt"] = encoded
        case .transactionID:
            line["original_transaction_id"] = originalTransactionID
            line["app_account_token"] = accountToken ?? appAccountToken
            line["product_id"] = productID
        case .signedTransaction:
            guard let signer else { throw ImportLineError.noSigner }
            line["signed_transaction"] = try signedTransaction(signer: signer)
        }
        return String(decoding: SimulatedReceipt.json(line), as: UTF8.self)
    }

    enum ImportLineError: Error, CustomStringConvertible {
        case noSigner
        var description: String { "signed transactions need the simulator's signing chain" }
    }
}
