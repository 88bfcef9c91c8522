import Foundation
import RenewalCore

/// Where receipts, subscriptions, runs and entitlement changes live. One protocol, two backends
/// (SQLite, PostgreSQL) whose SQL is written once in `SQLSubscriptionStore`.
///
/// Every method is one short transaction; rows are read in pages, never all at once.
public protocol SubscriptionStore: Sendable {
    /// Creates or upgrades the schema. Idempotent. Returns the versions applied now (empty if none).
    func migrate() async throws -> [Int]

    /// Throws `SubscriptionStoreError.notMigrated` unless the schema is at the version this build expects.
    func checkSchema() async throws

    /// Upserts receipts by user id and makes them due now. One transaction for the whole batch.
    func importReceipts(_ items: [ReceiptImport], now: Date) async throws -> [ReceiptImportOutcome]

    /// The next page of receipts for `selection`, with their subscriptions.
    ///
    /// - Parameters:
    ///   - after: the cursor of the last receipt of the previous page (nil for the first page).
    ///   - lease: when set, only receipts without a live lease are returned, and each is leased to
    ///     `lease.owner` until `lease.until` in the same statement. When nil, nothing is written
    ///     (dry runs).
    func nextBatch(_ selection: ReceiptSelection, after: ReceiptCursor?, limit: Int, lease: Lease?) async throws -> [StoredReceipt]

    /// Writes the result of one check in one transaction: the receipt row, its subscriptions, the
    /// change events, the failure or conflicts, and releases the lease.
    func save(_ update: ReceiptUpdate) async throws

    /// Settles ownership and writes one check's result in one transaction, so two receipts resolving
    /// to the same subscription at the same moment can never both own it: claims each id in `ids`
    /// (subscriptions of a valid answer the receipt does not hold yet) for `receiptID`, reads the
    /// owners of those another receipt already holds, calls `decide` with them, writes the update it
    /// returns, and returns its second value.
    func save<Decision: Sendable>(
        claiming ids: [String], forReceipt receiptID: Int64,
        _ decide: ([String: SubscriptionOwner]) -> (ReceiptUpdate, Decision)
    ) async throws -> Decision

    /// Records failures of receipts whose state stays exactly as it was (the circuit breaker opened
    /// before they could be written) in `run_failures`, and releases their leases.
    func recordFailures(_ failures: [RecordedFailure], runID: String, releasingLeasesOf owner: String?) async throws

    /// Releases leases this owner holds on receipts it did not check (shutdown, circuit breaker),
    /// leaving every other column exactly as it was.
    func releaseLeases(receiptIDs: [Int64], owner: String) async throws

    /// Every product id the database has seen (subscriptions, and products given at import): the
    /// allow-list of `--products-from-database`.
    func knownProductIDs() async throws -> Set<String>

    /// The user that owns each of these subscriptions, for the ones that exist.
    func owners(ofOriginalTransactionIDs ids: [String]) async throws -> [String: SubscriptionOwner]

    func beginRun(_ run: RunRecord) async throws
    func finishRun(_ run: RunRecord) async throws

    /// A page of `status` rows: one per subscription and one per receipt without subscriptions,
    /// ordered by user id, then original transaction id.
    func statusPage(userID: String?, after: StatusCursor?, limit: Int) async throws -> [StatusRow]

    /// Runs `body` while holding the exclusive run lock, or throws `SubscriptionStoreError.locked`.
    /// Backends where several workers cooperate through leases run `body` without a lock.
    func withRunLock<T: Sendable>(owner: String, _ body: @Sendable () async throws -> T) async throws -> T

    /// A short name for logs: `sqlite` or `postgres`.
    var backendName: String { get }
}
