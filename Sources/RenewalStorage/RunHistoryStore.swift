import Foundation
import RenewalCore

/// Read access to what runs recorded (`runs`, `entitlement_changes`, `run_failures`,
/// `ownership_conflicts`), the tables dashboards read. The conformance suite uses it to check that
/// `save`, `beginRun` and `finishRun` wrote what they were given.
public protocol RunHistoryStore: SubscriptionStore {
    /// The stored run with this id, if any.
    func run(id: String) async throws -> RunRecord?

    /// The entitlement changes a run recorded, in insertion order.
    func changes(ofRun runID: String) async throws -> [RecordedChange]

    /// The failures a run recorded, in insertion order.
    func failures(ofRun runID: String) async throws -> [RecordedFailure]

    /// The ownership conflicts a run recorded, in insertion order.
    func conflicts(ofRun runID: String) async throws -> [OwnershipConflict]

    /// Runs that started in `[since, until)` (either bound optional), oldest first, `limit` at a
    /// time after `cursor` (the last run of the previous page). Dashboards and `renewal report`
    /// page through them, so memory stays flat however many runs there are.
    func runs(startedFrom since: Date?, before until: Date?, after cursor: RunRecord?, limit: Int) async throws
        -> [RunRecord]
    /// The run that started last, if any.
    func lastRun() async throws -> RunRecord?
    /// When the last run that exited 0 ended, if any.
    func lastSuccess() async throws -> Date?
    /// The `limit` runs that started last at or before `upTo`, newest first.
    func recentRuns(upTo: Date, limit: Int) async throws -> [RunRecord]
    /// Up to `limit` of a run's changes with an id above `afterID`, in insertion order; with `app`,
    /// only the changes of that app's receipts.
    func changes(ofRun runID: String, app: String?, afterID: Int64, limit: Int) async throws -> [(
        id: Int64, change: RecordedChange
    )]
    /// Up to `limit` of the changes recorded outside any run (`run_id` NULL: `renewal claim`, an import
    /// line whose token claims a purchase) with an id above `afterID` and `occurred_at` in `[since, until)`
    /// (either bound optional), in insertion order; with `app`, only that app's. `renewal report` lists
    /// them beside the runs, so a claim support made between runs is not missing from it.
    func changesOutsideRuns(from since: Date?, before until: Date?, app: String?, afterID: Int64, limit: Int)
        async throws -> [(id: Int64, change: RecordedChange)]
    /// Up to `limit` of a run's failures with an id above `afterID`, in insertion order; with `app`,
    /// only that app's.
    func failures(ofRun runID: String, app: String?, afterID: Int64, limit: Int) async throws -> [(
        id: Int64, failure: RecordedFailure
    )]
    /// How many changes of each kind a run recorded (of `app` only, when given).
    func changeCounts(ofRun runID: String, app: String?) async throws -> [String: Int]
    /// How many failures of each reason a run recorded (of `app` only, when given).
    func failureCounts(ofRun runID: String, app: String?) async throws -> [String: Int]
    /// Entitled subscriptions per product and environment now: the decision stored on each row
    /// (`subscriptions.entitled`, Core's `SubscriptionState.grantsAccess`).
    func entitledNow() async throws -> [EntitledPlan: Int]
    /// For each run that started at or after `since`: the net change it made to entitled
    /// subscriptions per product and environment. Each subscription's move in one answer counts
    /// once, however many events it made: out of the plan it was on (the product a
    /// `product_changed` change names as `from_product_id`) and into the one it is on now.
    func entitledDeltas(since: Date) async throws -> [String: [EntitledPlan: Int]]
}

/// One row of `entitlement_changes`.
public struct RecordedChange: Sendable, Hashable {
    public var userID: String
    public var event: SubscriptionEvent
    public var ownershipType: String?
    public var occurredAt: Date
    /// The API whose answer made the change (`verify_receipt`, `server_api`); nil before schema v5.
    public var source: String?
    /// The app of the receipt; nil when it was not known yet (or before schema v10).
    public var bundleID: String?

    public init(
        userID: String, event: SubscriptionEvent, ownershipType: String?, occurredAt: Date, source: String? = nil,
        bundleID: String? = nil
    ) {
        self.source = source
        self.bundleID = bundleID
        self.userID = userID
        self.event = event
        self.ownershipType = ownershipType
        self.occurredAt = occurredAt
    }
}

/// One row of `run_failures`.
public struct RecordedFailure: Sendable, Hashable {
    public var receiptID: Int64
    public var userID: String
    public var failure: CheckFailure
    public var occurredAt: Date
    /// The app of the receipt; nil when it was not known yet (or before schema v10).
    public var bundleID: String?

    public init(receiptID: Int64, userID: String, failure: CheckFailure, occurredAt: Date, bundleID: String? = nil) {
        self.bundleID = bundleID
        self.receiptID = receiptID
        self.userID = userID
        self.failure = failure
        self.occurredAt = occurredAt
    }
}

/// A product in one environment: what the entitled-subscribers chart counts, so sandbox testers
/// never show as paying customers.
public struct EntitledPlan: Sendable, Hashable, Comparable {
    /// The product id; empty when not known.
    public var productID: String
    /// `Production`, `Sandbox`, or empty when not known.
    public var environment: String

    public init(productID: String, environment: String) {
        self.productID = productID
        self.environment = environment
    }

    /// Production first, then by product.
    public static func < (a: EntitledPlan, b: EntitledPlan) -> Bool {
        let rank = { (plan: EntitledPlan) in plan.environment == "Production" ? 0 : 1 }
        return (rank(a), a.environment, a.productID) < (rank(b), b.environment, b.productID)
    }
}
