import Foundation
import RenewalCore
import RenewalStorage
import Testing

/// The storage conformance suite: one static check per behaviour of `SubscriptionStore`, run against
/// every backend (SQLite always, PostgreSQL when a server is configured).
///
/// Each check takes a fresh, empty, **not yet migrated** store of its own (the checks migrate it
/// themselves, so one of them can check the unmigrated case). A backend's test file runs them all:
///
/// ```swift
/// @Test(arguments: SubscriptionStoreConformance.checks)
/// func conformance(_ check: SubscriptionStoreConformance.Check) async throws {
///     try await check.run(try makeFreshStore())
/// }
/// ```
public enum SubscriptionStoreConformance {
    /// One named behaviour.
    public struct Check: Sendable, CustomStringConvertible, CustomTestStringConvertible {
        public let name: String
        public let run: @Sendable (any RunHistoryStore) async throws -> Void

        public init(_ name: String, _ run: @escaping @Sendable (any RunHistoryStore) async throws -> Void) {
            self.name = name
            self.run = run
        }

        public var description: String { name }
        public var testDescription: String { name }
    }

    /// Every check, in a stable order.
    public static let checks: [Check] = [
        Check("migrate is idempotent", migrateIsIdempotent),
        Check("checkSchema on an unmigrated store throws notMigrated", checkSchemaRejectsUnmigratedStore),
        Check("import inserts, replaces and keeps unchanged receipts, all due now", importUpsertsAndMakesDue),
        Check("due selection is soonest first and pages without gaps or duplicates", dueSelectionPagesInOrder),
        Check("a receipt not yet due is never selected", receiptNotDueIsNeverSelected),
        Check("a live lease hides a receipt from another owner; an expired one is taken over", leasesHideAndExpire),
        Check("a batch without a lease writes nothing", batchWithoutLeaseWritesNothing),
        Check(
            "save writes receipt, subscriptions, changes, failure and conflicts and releases the lease",
            saveWritesEverything),
        Check("save is atomic: a failing write leaves nothing behind", saveIsAtomic),
        Check(
            "saveBatch writes the items whose lease holds in one go and skips a lost one untouched",
            saveBatchWritesHeldLeasesOnly),
        Check("latest_receipt is replaced only when a new one is given", latestReceiptReplacedOnlyWhenGiven),
        Check("a subscription owned by another receipt is never overwritten", foreignSubscriptionIsNotOverwritten),
        Check("owners maps original transaction ids to their receipt and user", ownersMapsTransactionIDs),
        Check("releaseLeases clears only this owner's lease columns", releaseLeasesTouchesOnlyLeases),
        Check("status pages include never-verified receipts, page by cursor and filter by user", statusPages),
        Check("backfill selectors select by all, user, product, state, expiry and environment", backfillSelectors),
        Check("runs round-trip through beginRun and finishRun", runsRoundTrip),
        Check("withRunLock runs the body and returns its value", runLockRunsBody),
        Check("a write is fenced by its lease: a worker that lost it writes nothing", fencedWriteNeedsTheLease),
        Check(
            "importing a new receipt fences out the check in flight on the old one",
            importOfANewReceiptFencesOutTheCheckInFlight),
        Check("a dead process's run is abandoned and its leases taken back at once", deadProcessesWorkIsTakenBack),
        Check(
            "StoreKit 2 rows: imported by transaction id, same id unchanged, new id replaces, receipt and id kept",
            importByTransactionID),
        Check(
            "change feed: each notification once, due unless already shown, unknown listed, cursor only forward",
            feedNotificationsAndCursor),
        Check(
            "change feed: a notification's signed data applies when newer, in Apple's order; an older one does nothing",
            feedNotificationsApplyInApplesOrder),
        Check(
            "falling back to polling moves stretched receipts back to their polling check, per environment",
            fallBackToPollingMovesReceiptsBack),
        Check(
            "webhook outbox: queued with the change, one per user in order, leased, recorded by the holder only",
            webhookOutbox),
    ] + adoptionChecks
}

// MARK: - Fixtures shared by the checks

extension SubscriptionStoreConformance {
    /// A whole-millisecond instant (the stores keep milliseconds).
    static let origin = Date(timeIntervalSince1970: 1_700_000_000)

    /// `origin` plus `minutes`.
    static func at(minutes: Double) -> Date {
        origin.addingTimeInterval(minutes * 60)
    }

    static func migrate(_ store: any RunHistoryStore) async throws {
        _ = try await store.migrate()
    }

    /// Imports one receipt and returns it as stored.
    @discardableResult
    static func importReceipt(
        _ store: any RunHistoryStore, user: String, receipt: String? = nil, product: String? = nil, now: Date = origin
    ) async throws -> StoredReceipt {
        let item = ReceiptImport(userID: user, latestReceipt: receipt ?? "receipt-of-\(user)", productID: product)
        _ = try await store.importReceipts([item], now: now)
        return try await stored(store, user: user)
    }

    /// The stored receipt of `user`, read without a lease.
    static func stored(_ store: any RunHistoryStore, user: String) async throws -> StoredReceipt {
        let page = try await store.nextBatch(
            .backfill(BackfillSelector(userIDs: [user])), after: nil, limit: 2, lease: nil)
        #expect(page.count == 1)
        return try #require(page.first)
    }

    /// Every receipt `selection` yields, page after page.
    static func allPages(
        _ store: any RunHistoryStore, _ selection: ReceiptSelection, pageSize: Int, lease: Lease? = nil
    ) async throws -> [StoredReceipt] {
        var receipts: [StoredReceipt] = []
        var cursor: ReceiptCursor?
        while true {
            let page = try await store.nextBatch(selection, after: cursor, limit: pageSize, lease: lease)
            #expect(page.count <= pageSize)
            receipts += page
            guard page.count == pageSize, let last = page.last else { return receipts }
            cursor = last.cursor
        }
    }

    static func subscription(
        _ otid: String, product: String?, state: SubscriptionState, expiresAt: Date?,
        environment: AppStoreEnvironment? = .production, verifiedAt: Date = origin, nextCheckAt: Date = at(minutes: 60)
    ) -> StoredSubscription {
        let snapshot = SubscriptionSnapshot(
            originalTransactionID: otid, productID: product, state: state, expiresAt: expiresAt,
            autoRenew: state == .active ? true : nil, autoRenewProductID: product,
            gracePeriodExpiresAt: state == .gracePeriod ? expiresAt?.addingTimeInterval(86_400) : nil,
            isInBillingRetry: state == .billingRetry || state == .gracePeriod, ownershipType: "PURCHASED",
            environment: environment, latestTransactionID: "\(otid)-latest", subscriptionGroupIdentifier: "group-1"
        )
        return StoredSubscription(snapshot: snapshot, lastVerifiedAt: verifiedAt, nextCheckAt: nextCheckAt)
    }

    /// A successful check of `receipt` that stores `subscriptions`.
    static func verifiedWrite(
        _ receipt: StoredReceipt, subscriptions: [StoredSubscription], status: ReceiptStatus = .verified,
        environment: AppStoreEnvironment? = .production, runID: String? = nil, checkedAt: Date = at(minutes: 1),
        nextCheckAt: Date = at(minutes: 60), newLatestReceipt: String? = nil, leaseOwner: String? = nil
    ) -> ReceiptUpdate {
        ReceiptUpdate(
            receiptID: receipt.id, userID: receipt.userID, runID: runID, checkedAt: checkedAt,
            newLatestReceipt: newLatestReceipt, status: status, environment: environment, verifiedAt: checkedAt,
            nextCheckAt: nextCheckAt, consecutiveFailures: 0, consecutiveMalformed: 0, subscriptions: subscriptions,
            changes: [], failure: nil, conflicts: [], leaseOwner: leaseOwner
        )
    }

    /// A lease for `owner` taken at `now` for ten minutes.
    static func lease(_ owner: String, now: Date) -> Lease {
        Lease(owner: owner, until: now.addingTimeInterval(600), now: now)
    }
}
