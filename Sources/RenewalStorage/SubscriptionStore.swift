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
    func save(_ write: ReceiptWrite) async throws

    /// Releases leases this owner holds on receipts it did not check (shutdown, circuit breaker),
    /// leaving every other column exactly as it was.
    func releaseLeases(receiptIDs: [Int64], owner: String) async throws

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

/// One line of `renewal import`.
public struct ReceiptImport: Sendable, Hashable {
    public var userID: String
    public var latestReceipt: String
    public var productID: String?

    public init(userID: String, latestReceipt: String, productID: String? = nil) {
        self.userID = userID
        self.latestReceipt = latestReceipt
        self.productID = productID
    }
}

public enum ReceiptImportOutcome: String, Sendable, Hashable {
    /// A new user.
    case inserted
    /// A known user with a different receipt: replaced, due now.
    case replaced
    /// A known user with the same receipt: made due now.
    case unchanged
}

/// The receipt-level verification status (subscription states live on the subscriptions).
public enum ReceiptStatus: String, Sendable, Hashable, Codable {
    /// Never verified successfully.
    case unverified
    /// Last successful answer was valid.
    case verified
    /// Apple rejects the receipt itself.
    case invalid
}

/// Which receipts a run takes.
public enum ReceiptSelection: Sendable, Hashable {
    /// Receipts with `next_check_at <= asOf`, soonest first (cursor: next_check_at, id).
    case due(asOf: Date)
    /// A backfill: the rows the selector names, whatever their schedule (cursor: id).
    case backfill(BackfillSelector)
}

/// A backfill's selectors; all given selectors must match (AND). `all` alone selects every receipt.
public struct BackfillSelector: Sendable, Hashable {
    public var all: Bool
    public var userIDs: [String]
    /// Receipts holding a subscription of one of these products (or imported with that product).
    public var productIDs: [String]
    /// Receipts holding a subscription in one of these states (`unverified` matches never-verified receipts).
    public var states: [SubscriptionState]
    /// Receipts holding a subscription that expired at or after this instant and is not entitled now
    /// ("everything expired in the last 30 days").
    public var expiredSince: Date?
    /// Receipts whose last answer came from this environment.
    public var environment: AppStoreEnvironment?

    public init(
        all: Bool = false, userIDs: [String] = [], productIDs: [String] = [], states: [SubscriptionState] = [],
        expiredSince: Date? = nil, environment: AppStoreEnvironment? = nil
    ) {
        self.all = all
        self.userIDs = userIDs
        self.productIDs = productIDs
        self.states = states
        self.expiredSince = expiredSince
        self.environment = environment
    }

    /// True when nothing narrows the selection and `all` was not given.
    public var isEmpty: Bool {
        !all && userIDs.isEmpty && productIDs.isEmpty && states.isEmpty && expiredSince == nil && environment == nil
    }
}

/// Keyset pagination position.
public struct ReceiptCursor: Sendable, Hashable {
    public var nextCheckAt: Date
    public var id: Int64

    public init(nextCheckAt: Date, id: Int64) {
        self.nextCheckAt = nextCheckAt
        self.id = id
    }
}

/// A claim on receipts by one worker, until it expires.
public struct Lease: Sendable, Hashable {
    public var owner: String
    public var until: Date
    /// Leases that ended at or before this instant are free to take.
    public var now: Date

    public init(owner: String, until: Date, now: Date) {
        self.owner = owner
        self.until = until
        self.now = now
    }
}

/// A stored receipt with the subscriptions it owns.
public struct StoredReceipt: Sendable, Hashable {
    public var id: Int64
    public var userID: String
    /// Never logged or reported.
    public var latestReceipt: String
    /// `product_id` given at import, if any.
    public var importedProductID: String?
    public var status: ReceiptStatus
    public var environment: AppStoreEnvironment?
    public var nextCheckAt: Date
    public var lastVerifiedAt: Date?
    public var consecutiveFailures: Int
    /// Consecutive checks answered 21002.
    public var consecutiveMalformed: Int
    public var subscriptions: [StoredSubscription]

    public init(
        id: Int64, userID: String, latestReceipt: String, importedProductID: String?, status: ReceiptStatus,
        environment: AppStoreEnvironment?, nextCheckAt: Date, lastVerifiedAt: Date?, consecutiveFailures: Int,
        consecutiveMalformed: Int, subscriptions: [StoredSubscription]
    ) {
        self.id = id
        self.userID = userID
        self.latestReceipt = latestReceipt
        self.importedProductID = importedProductID
        self.status = status
        self.environment = environment
        self.nextCheckAt = nextCheckAt
        self.lastVerifiedAt = lastVerifiedAt
        self.consecutiveFailures = consecutiveFailures
        self.consecutiveMalformed = consecutiveMalformed
        self.subscriptions = subscriptions
    }

    public var cursor: ReceiptCursor { ReceiptCursor(nextCheckAt: nextCheckAt, id: id) }
}

/// A stored subscription: the last derived snapshot plus bookkeeping.
public struct StoredSubscription: Sendable, Hashable {
    public var snapshot: SubscriptionSnapshot
    public var lastVerifiedAt: Date?
    public var nextCheckAt: Date

    public init(snapshot: SubscriptionSnapshot, lastVerifiedAt: Date?, nextCheckAt: Date) {
        self.snapshot = snapshot
        self.lastVerifiedAt = lastVerifiedAt
        self.nextCheckAt = nextCheckAt
    }
}

public struct SubscriptionOwner: Sendable, Hashable {
    public var receiptID: Int64
    public var userID: String

    public init(receiptID: Int64, userID: String) {
        self.receiptID = receiptID
        self.userID = userID
    }
}

/// Everything one check writes, in one transaction.
public struct ReceiptWrite: Sendable, Hashable {
    public var receiptID: Int64
    public var userID: String
    /// Nil for writes outside a stored run (never happens in dry runs: they write nothing).
    public var runID: String?
    public var checkedAt: Date
    /// A newer receipt Apple returned; replaces the stored one when set.
    public var newLatestReceipt: String?
    public var status: ReceiptStatus
    public var environment: AppStoreEnvironment?
    /// Set when this check got a valid or rejecting answer from Apple.
    public var verifiedAt: Date?
    public var nextCheckAt: Date
    public var consecutiveFailures: Int
    public var consecutiveMalformed: Int
    /// Upserted by original transaction id; only rows owned by this receipt (or new ones) are written.
    public var subscriptions: [StoredSubscription]
    public var changes: [SubscriptionEvent]
    /// The failure of this check, if it failed (`reason`: a short stable code).
    public var failure: CheckFailure?
    public var conflicts: [OwnershipConflict]
    /// The lease owner to release; nil when the row was not leased.
    public var leaseOwner: String?

    public init(
        receiptID: Int64, userID: String, runID: String?, checkedAt: Date, newLatestReceipt: String?,
        status: ReceiptStatus, environment: AppStoreEnvironment?, verifiedAt: Date?, nextCheckAt: Date,
        consecutiveFailures: Int, consecutiveMalformed: Int, subscriptions: [StoredSubscription],
        changes: [SubscriptionEvent], failure: CheckFailure?, conflicts: [OwnershipConflict], leaseOwner: String?
    ) {
        self.receiptID = receiptID
        self.userID = userID
        self.runID = runID
        self.checkedAt = checkedAt
        self.newLatestReceipt = newLatestReceipt
        self.status = status
        self.environment = environment
        self.verifiedAt = verifiedAt
        self.nextCheckAt = nextCheckAt
        self.consecutiveFailures = consecutiveFailures
        self.consecutiveMalformed = consecutiveMalformed
        self.subscriptions = subscriptions
        self.changes = changes
        self.failure = failure
        self.conflicts = conflicts
        self.leaseOwner = leaseOwner
    }
}

public struct CheckFailure: Sendable, Hashable, Codable {
    /// Short stable code: `timeout`, `http_503`, `apple_status_21005`, `invalid_answer`, …
    public var reason: String
    /// A sentence for humans; never contains receipt data or secrets.
    public var message: String

    public init(reason: String, message: String) {
        self.reason = reason
        self.message = message
    }
}

/// A receipt of one user resolved to a subscription another user already owns (`shared_apple_id`).
public struct OwnershipConflict: Sendable, Hashable, Codable {
    public var originalTransactionID: String
    public var ownerUserID: String
    public var claimantUserID: String
    public var productID: String?

    public init(originalTransactionID: String, ownerUserID: String, claimantUserID: String, productID: String?) {
        self.originalTransactionID = originalTransactionID
        self.ownerUserID = ownerUserID
        self.claimantUserID = claimantUserID
        self.productID = productID
    }
}

/// One row of the `runs` table.
public struct RunRecord: Sendable, Hashable {
    public var id: String
    /// `run` or `backfill`.
    public var command: String
    public var startedAt: Date
    public var finishedAt: Date?
    /// `running`, `completed`, `completed_with_failures`, `aborted_apple_unavailable`,
    /// `aborted_configuration`, `interrupted`, `failed`.
    public var status: String
    public var exitCode: Int?
    public var checked: Int
    public var changed: Int
    public var unchanged: Int
    public var failed: Int
    public var conflicts: Int
    public var host: String
    public var processID: Int

    public init(
        id: String, command: String, startedAt: Date, finishedAt: Date? = nil, status: String = "running",
        exitCode: Int? = nil, checked: Int = 0, changed: Int = 0, unchanged: Int = 0, failed: Int = 0,
        conflicts: Int = 0, host: String, processID: Int
    ) {
        self.id = id
        self.command = command
        self.startedAt = startedAt
        self.finishedAt = finishedAt
        self.status = status
        self.exitCode = exitCode
        self.checked = checked
        self.changed = changed
        self.unchanged = unchanged
        self.failed = failed
        self.conflicts = conflicts
        self.host = host
        self.processID = processID
    }
}

public struct StatusCursor: Sendable, Hashable {
    public var userID: String
    /// "" for a receipt's never-verified placeholder.
    public var originalTransactionID: String

    public init(userID: String, originalTransactionID: String) {
        self.userID = userID
        self.originalTransactionID = originalTransactionID
    }
}

/// One element of `renewal status --json`.
public struct StatusRow: Sendable, Hashable {
    public var userID: String
    public var originalTransactionID: String?
    public var productID: String?
    public var state: SubscriptionState
    public var entitled: Bool
    public var expiresAt: Date?
    public var autoRenew: Bool?
    public var environment: AppStoreEnvironment?
    public var gracePeriodExpiresAt: Date?
    public var lastVerifiedAt: Date?
    public var nextCheckAt: Date?
    public var ownershipType: String?
    public var lastFailure: String?

    public init(
        userID: String, originalTransactionID: String?, productID: String?, state: SubscriptionState, entitled: Bool,
        expiresAt: Date?, autoRenew: Bool?, environment: AppStoreEnvironment?, gracePeriodExpiresAt: Date?,
        lastVerifiedAt: Date?, nextCheckAt: Date?, ownershipType: String?, lastFailure: String?
    ) {
        self.userID = userID
        self.originalTransactionID = originalTransactionID
        self.productID = productID
        self.state = state
        self.entitled = entitled
        self.expiresAt = expiresAt
        self.autoRenew = autoRenew
        self.environment = environment
        self.gracePeriodExpiresAt = gracePeriodExpiresAt
        self.lastVerifiedAt = lastVerifiedAt
        self.nextCheckAt = nextCheckAt
        self.ownershipType = ownershipType
        self.lastFailure = lastFailure
    }

    public var cursor: StatusCursor {
        StatusCursor(userID: userID, originalTransactionID: originalTransactionID ?? "")
    }
}

/// The storage module's one error type. Descriptions name the problem and the fix; they never
/// contain receipts or passwords.
public enum SubscriptionStoreError: Error, Sendable, CustomStringConvertible {
    /// The database cannot be opened or reached.
    case unavailable(String)
    /// The schema is missing or older than this build.
    case notMigrated(found: Int, expected: Int)
    /// The schema is newer than this build.
    case schemaTooNew(found: Int, expected: Int)
    /// Another run holds the lock.
    case locked(String)
    /// A statement failed.
    case query(String)
    /// A stored value cannot be read back.
    case corruptRow(String)

    public var description: String {
        switch self {
        case .unavailable(let detail): return "Database unavailable: \(detail)"
        case .notMigrated(let found, let expected):
            return "Database schema is at version \(found), this build needs \(expected). Run `renewal migrate` first."
        case .schemaTooNew(let found, let expected):
            return "Database schema is at version \(found), newer than this build's \(expected). Upgrade renewal."
        case .locked(let detail): return "Another renewal run holds the lock (\(detail)). Try again when it ends."
        case .query(let detail): return "Database error: \(detail)"
        case .corruptRow(let detail): return "Unreadable stored row: \(detail)"
        }
    }
}
