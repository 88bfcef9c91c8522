import Foundation
import RenewalCore
import RenewalServerAPI
import RenewalStorage
import X509

/// Reads an import line's `signed_transaction` (StoreKit 2's `Transaction.jwsRepresentation`): the
/// job's own verifier checks it (the `x5c` chain to the trusted roots, Apple's OIDs, the signature,
/// production or sandbox, the bundle when one is configured), then its `originalTransactionId`,
/// `environment`, `productId` and `appAccountToken` fill the row. Anything else the line says must
/// agree with it. A transaction that fails is a bad line; nothing of it is stored.
package struct SignedTransactionImport: Sendable {
    let verifier: SignedDataVerifier

    /// The verifier for `bundleID` (any bundle when nil) and the trusted `roots`.
    package init(roots: [Certificate], bundleID: String?) {
        verifier = SignedDataVerifier(rootCertificates: roots, bundleID: bundleID ?? "")
    }

    /// The line's import completed from its verified transaction, or why the line is refused (a
    /// sentence naming the problem and the fix; never the JWS).
    package func complete(_ item: ReceiptImport, signedTransaction jws: String) async -> Result<
        ReceiptImport, LineError
    > {
        let transaction: JWSTransaction
        do {
            transaction = try await verifier.appTransaction(jws)
        } catch {
            let fix =
                switch error {
                case .wrongBundle:
                    "import it into that app's database, or fix APPSTORE_BUNDLE_ID / --bundle-id"
                case .untrustedChain:
                    "only transactions Apple signed are accepted (APPSTORE_ROOT_CERTIFICATES names the trusted roots)"
                case .wrongEnvironment:
                    """
                    StoreKit testing in Xcode signs with a local certificate; import transactions from the \
                    sandbox or production
                    """
                case .malformed, .badSignature:
                    """
                    send the server Transaction.jwsRepresentation exactly as StoreKit gave it (Xcode's StoreKit \
                    testing signs with a one-certificate chain that cannot be verified)
                    """
                }
            return .failure(
                LineError(
                    "signed_transaction failed verification (\(error.reason)): \(error) (user \(item.userID)); \(fix)"))
        }
        guard let original = transaction.originalTransactionId, ImportLine.isTransactionID(original) else {
            return .failure(
                LineError(
                    "signed_transaction has no originalTransactionId (user \(item.userID)); is it a transaction?"))
        }
        var completed = item
        if let given = item.originalTransactionID, given != original, given != transaction.transactionId {
            return .failure(
                LineError(
                    """
                    original_transaction_id \(given) is not a transaction of the signed transaction (original \
                    \(original)) (user \(item.userID)); give one or the other, or both of the same purchase
                    """))
        }
        completed.originalTransactionID = original
        let token = transaction.appAccountToken.flatMap(UUID.init(uuidString:))?.uuidString.lowercased()
        // What the line gives besides must agree with what Apple signed; what it leaves out is taken.
        for (field, key, signed) in [
            ("product_id", \ReceiptImport.productID, transaction.productId),
            ("app_account_token", \ReceiptImport.appAccountToken, token),
            ("bundle_id", \ReceiptImport.bundleID, transaction.bundleId),
        ] {
            guard let signed else { continue }
            if let given = item[keyPath: key], given != signed {
                return .failure(
                    LineError(
                        """
                        \(field) \(given) differs from the signed transaction's \(signed) (user \(item.userID)); \
                        leave \(field) out, the signed transaction names it
                        """))
            }
            completed[keyPath: key] = signed
        }
        completed.environment = transaction.environment == "Sandbox" ? .sandbox : .production
        return .success(completed)
    }

    package struct LineError: Error, CustomStringConvertible {
        package var description: String
        init(_ description: String) { self.description = description }
    }
}
