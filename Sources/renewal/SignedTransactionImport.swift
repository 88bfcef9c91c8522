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
struct SignedTransactionImport {
    let verifier: SignedDataVerifier

    /// The verifier for `bundleID` (any bundle when nil) and the configured roots.
    init(bundleID: String?) throws {
        self.init(roots: try ServerAPIOptions.trustedRoots(), bundleID: bundleID)
    }

    init(roots: [Certificate], bundleID: String?) {
        verifier = SignedDataVerifier(rootCertificates: roots, bundleID: bundleID ?? "")
    }

    /// The line's import completed from its verified transaction, or why the line is refused (a
    /// sentence naming the problem and the fix; never the JWS).
    func complete(_ item: ReceiptImport, signedTransaction jws: String) async -> Result<ReceiptImport, LineError> {
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
        if let product = transaction.productId {
            if let given = item.productID, given != product {
                return .failure(
                    LineError(
                        """
                        product_id \(given) differs from the signed transaction's \(product) (user \(item.userID)); \
                        leave product_id out, the signed transaction names it
                        """))
            }
            completed.productID = product
        }
        if let token = transaction.appAccountToken.flatMap(UUID.init(uuidString:))?.uuidString.lowercased() {
            if let given = item.appAccountToken, given != token {
                return .failure(
                    LineError(
                        """
                        app_account_token \(given) differs from the signed transaction's (user \(item.userID)); \
                        leave app_account_token out, the signed transaction names it
                        """))
            }
            completed.appAccountToken = token
        }
        if let bundle = transaction.bundleId {
            if let given = item.bundleID, given != bundle {
                return .failure(
                    LineError(
                        """
                        bundle_id \(given) differs from the signed transaction's \(bundle) (user \(item.userID)); \
                        leave bundle_id out, the signed transaction names it
                        """))
            }
            completed.bundleID = bundle
        }
        completed.environment = transaction.environment == "Sandbox" ? .sandbox : .production
        return .success(completed)
    }

    struct LineError: Error, CustomStringConvertible {
        var description: String
        init(_ description: String) { self.description = description }
    }
}
