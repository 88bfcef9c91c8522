import Foundation
import Logging
import RenewalCore

/// Apple's Get Transaction History: a customer's transactions, oldest first, page by page, each
/// already verified. The Server API client conforms.
public protocol TransactionHistory: Sendable {
    /// The page after `revision` (the first when nil) of the auto-renewable transactions of the customer
    /// who owns `transactionID`, in `environment`. A transaction that fails verification is left out and
    /// its reason listed.
    func historyPage(
        transactionID: String, environment: AppStoreEnvironment, revision: String?, logger: Logger
    ) async -> Result<HistoryPage, AppleAPIError>
}

/// One page of Get Transaction History.
public struct HistoryPage: Sendable {
    public var transactions: [LedgerTransaction]
    /// Why each refused transaction was refused; it is not recorded.
    public var refused: [FailureReason]
    /// Where the next request resumes.
    public var revision: String?
    public var hasMore: Bool

    public init(transactions: [LedgerTransaction], refused: [FailureReason], revision: String?, hasMore: Bool) {
        self.transactions = transactions
        self.refused = refused
        self.revision = revision
        self.hasMore = hasMore
    }
}
