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
}

/// One row of `entitlement_changes`.
public struct RecordedChange: Sendable, Hashable {
    public var userID: String
    public var event: SubscriptionEvent
    public var ownershipType: String?
    public var occurredAt: Date

    public init(userID: String, event: SubscriptionEvent, ownershipType: String?, occurredAt: Date) {
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

    public init(receiptID: Int64, userID: String, failure: CheckFailure, occurredAt: Date) {
        self.receiptID = receiptID
        self.userID = userID
        self.failure = failure
        self.occurredAt = occurredAt
    }
}
