import Foundation
import Logging
import RenewalAppleAPI
import RenewalCore

/// One page of Get Transaction History (v2) as Apple sends it: the signed transactions, unverified.
struct TransactionHistoryResponse: Decodable, Sendable {
    var revision: String?
    var hasMore: Bool?
    var signedTransactions: [String]?
}

extension ServerAPIClient: TransactionHistory {
    /// `GET /inApps/v2/history/{transactionId}?sort=ASCENDING&productType=AUTO_RENEWABLE[&revision=…]`,
    /// retried within the client's attempts like a status request; a 429 is not waited out here (the
    /// backfill stops and resumes next run, from the revision stored).
    public func historyPage(
        transactionID: String, environment: AppStoreEnvironment, revision: String?, logger: Logger
    ) async -> Result<HistoryPage, AppleAPIError> {
        var path =
            "/inApps/v2/history/" + (transactionID.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? "")
            + "?sort=ASCENDING&productType=AUTO_RENEWABLE"
        if let revision {
            path += "&revision=" + (revision.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? "")
        }
        let response: TransactionHistoryResponse
        switch await pageExchange(path, environment: environment, logger: logger, as: TransactionHistoryResponse.self)
        {
        case .success(let read): response = read
        case .failure(let error): return .failure(error)
        }
        var transactions: [LedgerTransaction] = []
        var refused: [FailureReason] = []
        for signed in response.signedTransactions ?? [] {
            do {
                let transaction = try await verifier.transaction(signed, environment: environment.rawValue)
                guard let original = transaction.originalTransactionId,
                    let entry = transaction.ledgerTransaction(
                        origin: .transactionHistory, originalTransactionID: original)
                else {
                    refused.append(.jwsMalformed)
                    continue
                }
                transactions.append(entry)
            } catch {
                refused.append(error.reason)
            }
        }
        return .success(
            HistoryPage(
                transactions: transactions, refused: refused, revision: response.revision,
                hasMore: response.hasMore ?? false))
    }
}
