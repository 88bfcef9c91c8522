import Foundation
import RenewalCore

/// A subscription whose earlier transactions Get Transaction History has not completed yet.
public struct HistoryCandidate: Sendable, Hashable {
    public var originalTransactionID: String
    public var userID: String
    /// The app of its receipt, when known: its own Server API key asks.
    public var bundleID: String?
    /// Where Apple last answered for it; nil when no answer said.
    public var environment: AppStoreEnvironment?
    /// The revision to resume from; nil to start at the first page.
    public var revision: String?

    public init(
        originalTransactionID: String, userID: String, bundleID: String?, environment: AppStoreEnvironment?,
        revision: String?
    ) {
        self.originalTransactionID = originalTransactionID
        self.userID = userID
        self.bundleID = bundleID
        self.environment = environment
        self.revision = revision
    }
}

/// Where the ledger's completion by Get Transaction History is kept: which subscriptions are left, who
/// is reading each, and each page recorded with the revision to resume from, so a crash or a kill never
/// asks a page twice once it is written, nor loses one.
public protocol TransactionHistoryStore: Sendable {
    /// Claims up to `limit` subscriptions not completed yet and not claimed by another worker until
    /// `claimedUntil` (a claim older than `now` has lapsed: its worker died or stopped), in original
    /// transaction id order. Workers on one database never claim the same subscription at once.
    func claimHistoryCandidates(limit: Int, now: Date, claimedUntil: Date) async throws -> [HistoryCandidate]

    /// Gives back the claims on subscriptions this worker did not get to.
    func releaseHistoryClaims(_ originalTransactionIDs: [String]) async throws

    /// In one transaction: records `transactions` in the ledger (each once, by transaction id, as any
    /// answer's are), and stores `revision` as where `candidate` resumes, completed at `completedAt`
    /// when Apple said there is no more (nil: not yet, and the claim is given back).
    func recordHistoryPage(
        of candidate: HistoryCandidate, transactions: [LedgerTransaction], environment: AppStoreEnvironment?,
        revision: String?, completedAt: Date?, recordedAt: Date
    ) async throws
}
