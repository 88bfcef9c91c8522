import Foundation
import RenewalCore

/// Where receipts, subscriptions, runs and entitlement changes live. One protocol, two backends
/// (SQLite, PostgreSQL) whose SQL is written once in `SQLSubscriptionStore`.
///
/// Every method is one short transaction; rows are read in pages, never all at once.
public protocol SubscriptionStore: TransactionHistoryStore, RefundRequestStore, RenewalExtensionStore {
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
    func nextBatch(_ selection: ReceiptSelection, after: ReceiptCursor?, limit: Int, lease: Lease?) async throws
        -> [StoredReceipt]

    /// Writes the result of one check in one transaction: the receipt row, its subscriptions, the
    /// change events, the failure or conflicts, and releases the lease.
    ///
    /// Fenced: when `update.leaseOwner` is set, nothing is written unless that worker still holds the
    /// row's lease (`SubscriptionStoreError.leaseLost`).
    func save(_ update: ReceiptUpdate) async throws

    /// Writes several checks' results in one transaction (one commit instead of one per receipt;
    /// a crash before it loses only answers, whose rows keep their old state and lease and are
    /// checked again). Each item is fenced first: an item whose lease its worker no longer holds
    /// writes nothing and gives nil. Then ownership is settled, so two receipts resolving to the
    /// same subscription at the same moment can never both own it: each id the item claims
    /// (subscriptions of a valid answer the receipt does not hold yet) is taken for its receipt, the
    /// owners of those another receipt already holds are read, `decide` is called with them, and the
    /// update it returns is written (claims it did not use are given back). If the shared
    /// transaction fails (a PostgreSQL deadlock between two workers claiming the same
    /// subscriptions, say), the items are written one transaction each.
    ///
    /// An item still `deciding` claims the subscriptions its answer names that the receipt does not
    /// hold yet, reads the owners of those another receipt already holds, and takes the decision
    /// (`EntitlementDecision.Request.decide`) with them before writing it.
    func saveBatch(_ items: [PendingSave]) async throws -> [EntitlementDecision?]

    /// Records failures of receipts whose state stays exactly as it was (the circuit breaker opened
    /// before they could be written) in `run_failures`, and releases their leases. A receipt whose
    /// lease `owner` no longer holds is skipped; returns how many were.
    @discardableResult
    func recordFailures(_ failures: [RecordedFailure], runID: String, releasingLeasesOf owner: String?) async throws
        -> Int

    /// Takes back the work of processes that died holding it: their `running` runs become
    /// `abandoned` and their leases are released, so the rows can be claimed at once. Which
    /// processes are dead is proven, never guessed: on SQLite the caller holds the run lock (so
    /// every other lease and running run is a dead process's); on PostgreSQL a worker is dead when
    /// its session no longer holds its liveness lock. Live workers' leases are left alone.
    func recoverAbandonedWork(except workerID: String, now: Date) async throws -> RecoveredWork

    /// Releases every lease `owner` holds (the end of a run); returns how many there were.
    @discardableResult
    func releaseEveryLease(of owner: String) async throws -> Int

    /// Receipts due at `asOf` that no lease holds at `now`: the work a run could still take.
    func countDue(asOf: Date, unleasedAt now: Date) async throws -> Int

    /// Rows imported by transaction id without a receipt (StoreKit 2): only the App Store Server API
    /// can check them. Counted by a scan; for `check`, not for the run.
    func countWithoutReceipt() async throws -> Int

    /// Where the last completed pull of `stream` ended; nil before the first.
    func feedCursor(_ stream: FeedStream) async throws -> Date?

    /// Records a page of notifications, each once (by uuid: an overlapping window or a repeated page
    /// acts on nothing twice), in one transaction, in Apple's order (when Apple signed each one's
    /// data), not the page's. With `context`, each new one's signed data is applied to the receipt
    /// holding its subscription through `EntitlementDecision` when newer than what is stored
    /// (`EntitlementDecision.Rules.use(of:for:)`); one that cannot be applied on its own (and each one,
    /// without `context`) makes that receipt due at `now` (never later than it already was).
    func recordFeedNotifications(
        _ notifications: [FeedNotificationRecord], runID: String?, now: Date,
        applying context: EntitlementDecision.Context?
    ) async throws -> FeedRecordResult

    /// Records verified notifications whose data could not be decoded, by their uuid like the others
    /// (`feed_notifications`), so a window read again, or Notification History read by `discover`, meets
    /// each one once. A new one is a failure of `runID` (`run_failures`, reason
    /// `notification_data_unreadable`, when the database holds the subscription it names) and makes that
    /// subscription's receipt due at `now` (never later than it already was), so the next check reads its
    /// state from Apple. Returns the new ones and how many receipts were made due.
    func recordUnreadableNotifications(_ notifications: [FeedNotificationRecord], runID: String?, now: Date)
        async throws -> UnreadableRecordResult

    /// While `stream`'s feed is down: makes due every receipt of its environment (and app) whose
    /// outage check (`ReceiptUpdate.outageCheckAt`) has come by `now`, leaving the feed's schedule of
    /// all the others as it is. Returns how many were made due.
    func pollWhatCannotWait(_ stream: FeedStream, now: Date) async throws -> Int

    /// Moves `stream`'s cursor to `pulledUntil` once the window from `windowStart` has been read
    /// to its end; never backwards (two workers finishing out of order). A window starting after the
    /// cursor (a gap: history Apple no longer keeps) restarts `pulledSince`.
    func advanceFeedCursor(_ stream: FeedStream, from windowStart: Date, to pulledUntil: Date, now: Date)
        async throws

    /// What tells whether `stream` can be trusted to announce changes: where its unbroken reads
    /// began, and whether any notification was signed, and any renewal (as checks found it) took
    /// effect, since `since` (of its app's receipts, with several apps).
    func feedActivity(_ stream: FeedStream, since: Date) async throws -> FeedActivity

    /// `stream` is no longer trusted: every receipt of its environment (and app) that the feed's
    /// schedule put later than polling would have is moved back to its polling check (due at once
    /// when that has passed). Returns how many receipts moved.
    func fallBackToPolling(_ stream: FeedStream) async throws -> Int

    /// Runs `body` unless another worker is running a body for the same `name` (PostgreSQL: a
    /// session advisory lock, dropped if the process dies; SQLite: the run lock admits one run
    /// anyway). Returns nil without running it when another holds the name.
    func exclusively<T: Sendable>(_ name: String, _ body: @Sendable () async throws -> T) async throws -> T?

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

    /// Keeps the dashboard summaries small (PostgreSQL; nothing to do on SQLite). Called after a run.
    func compactSummaries() async throws

    /// A page of `status` rows: one per subscription and one per receipt without subscriptions,
    /// ordered by user id, then original transaction id.
    func statusPage(userID: String?, after: StatusCursor?, limit: Int) async throws -> [StatusRow]

    /// Runs `body` while this process may lease rows as `owner`. SQLite: holding the exclusive run
    /// lock, or throws `SubscriptionStoreError.locked`. PostgreSQL (workers cooperate through leases):
    /// holding `owner`'s liveness lock, a session-level advisory lock the server drops when the
    /// session dies, so other workers can prove this one dead.
    func withRunLock<T: Sendable>(owner: String, _ body: @Sendable () async throws -> T) async throws -> T

    /// Runs `body` as one of the commands that write (`withRunLock` holds this too): refused with
    /// `SubscriptionStoreError.copying`, before anything is written, while `renewal copy-database`
    /// copies this database. Any number of writers hold it at once.
    func withWriterLock<T: Sendable>(_ body: @Sendable () async throws -> T) async throws -> T

    /// A short name for logs: `sqlite` or `postgres`.
    var backendName: String { get }
}

extension SubscriptionStore {
    /// The one-app feed of `environment`'s cursor.
    public func feedCursor(environment: AppStoreEnvironment) async throws -> Date? {
        try await feedCursor(FeedStream(environment))
    }

    public func advanceFeedCursor(
        environment: AppStoreEnvironment, from windowStart: Date, to pulledUntil: Date, now: Date
    ) async throws {
        try await advanceFeedCursor(FeedStream(environment), from: windowStart, to: pulledUntil, now: now)
    }

    public func feedActivity(environment: AppStoreEnvironment, since: Date) async throws -> FeedActivity {
        try await feedActivity(FeedStream(environment), since: since)
    }

    public func fallBackToPolling(environment: AppStoreEnvironment) async throws -> Int {
        try await fallBackToPolling(FeedStream(environment))
    }
}

/// A store that can share a request budget between the workers using it.
public protocol RequestSlotStore: Sendable {
    /// Reserves the next request slot of `bucket` for every worker sharing the database, one
    /// `interval` after the last one reserved, and returns how long to wait for it; nil where one
    /// run holds the database at a time (SQLite), so the process's own budget is the fleet's.
    func reserveRequestSlot(bucket: String, interval: Duration) async throws -> Duration?
}

/// Everything the job keeps in one database: subscriptions and receipts, run history, the webhook
/// outbox and the fleet's request slots. What the CLI opens (`SQLSubscriptionStore`, on SQLite or
/// PostgreSQL), so no command has to ask a store what it can do.
public typealias RenewalStore = RunHistoryStore & WebhookOutboxStore & RequestSlotStore & AnalyticsStore

/// One check's result waiting to be written with others (`SubscriptionStore.saveBatch`).
public enum PendingSave: Sendable, Hashable {
    /// Decided already (an answer that claims no subscription): its update is written as it is.
    case decided(EntitlementDecision)
    /// A valid answer: the decision is taken in the writing transaction, once the subscriptions it
    /// claims are settled.
    case deciding(EntitlementDecision.Request)

    public var receiptID: Int64 {
        switch self {
        case .decided(let decision): decision.update.receiptID
        case .deciding(let request): request.receipt.id
        }
    }

    /// The worker whose lease must still hold the row (nil: not fenced).
    public var leaseOwner: String? {
        switch self {
        case .decided(let decision): decision.update.leaseOwner
        case .deciding(let request): request.context.leaseOwner
        }
    }

    /// Subscriptions of the answer the receipt does not hold yet.
    public var claiming: [String] {
        switch self {
        case .decided: []
        case .deciding(let request): request.claims
        }
    }

    /// The decision, given the owners of the claimed subscriptions another receipt already holds.
    public func decide(owners: [String: SubscriptionOwner]) -> EntitlementDecision {
        switch self {
        case .decided(let decision): decision
        case .deciding(let request): request.decide(owners: owners)
        }
    }
}
