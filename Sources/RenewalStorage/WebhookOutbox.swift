import Foundation
import RenewalCore

/// One queued entitlement change to deliver, with the change as recorded.
public struct PendingDelivery: Sendable, Hashable {
    public var changeID: Int64
    public var runID: String?
    public var change: RecordedChange
    /// Attempts made before this one.
    public var attempts: Int
    /// When the change was queued (its check).
    public var createdAt: Date

    public init(changeID: Int64, runID: String?, change: RecordedChange, attempts: Int, createdAt: Date) {
        self.changeID = changeID
        self.runID = runID
        self.change = change
        self.attempts = attempts
        self.createdAt = createdAt
    }
}

/// What one delivery attempt came to.
public enum DeliveryOutcome: Sendable, Hashable {
    /// The endpoint answered 2xx.
    case delivered
    /// It did not; try again at `next`.
    case retry(error: String, next: Date)
    /// Given up (retried for too long): listed, never silently dropped.
    case failed(error: String)
}

/// One attempt's outcome, to record.
public struct DeliveryRecord: Sendable, Hashable {
    public var changeID: Int64
    public var outcome: DeliveryOutcome
    /// When the attempt ended.
    public var at: Date

    public init(changeID: Int64, outcome: DeliveryOutcome, at: Date) {
        self.changeID = changeID
        self.outcome = outcome
        self.at = at
    }
}

/// A change given up after retrying for too long.
public struct DeliveryFailure: Sendable, Hashable {
    public var changeID: Int64
    public var userID: String
    public var error: String
    public var at: Date

    public init(changeID: Int64, userID: String, error: String, at: Date) {
        self.changeID = changeID
        self.userID = userID
        self.error = error
        self.at = at
    }
}

/// The outbox as `renewal deliver --status` and the report show it.
public struct DeliveryStatus: Sendable, Hashable {
    public var pending = 0
    /// Pending and due now (not waiting for a backoff).
    public var due = 0
    public var delivered = 0
    public var failed = 0
    /// When the oldest undelivered change was queued.
    public var oldestPendingSince: Date?
    /// The most recent changes given up, newest first.
    public var recentFailures: [DeliveryFailure] = []
    /// When the configured URL answered 410 Gone, if it did.
    public var goneAt: Date?

    public init() {}
}

/// The durable side of webhooks: changes queued with their check, claimed with a lease, each
/// user's in the order they happened.
public protocol WebhookOutboxStore: Sendable {
    /// Claims up to `limit` due deliveries for `owner` until `leaseExpiresAt`: for each user, only
    /// the oldest undelivered change, so a user's changes go out in order; leased ones are skipped.
    func claimDeliveries(owner: String, now: Date, leaseExpiresAt: Date, limit: Int) async throws
        -> [PendingDelivery]

    /// Records attempts and releases their leases, in one transaction; a change `owner` no longer
    /// holds is left as it is.
    func recordDeliveries(_ records: [DeliveryRecord], owner: String) async throws

    /// Remembers that `url` answered 410 Gone (`digest` identifies it without storing secrets twice).
    func markEndpointGone(digest: String, url: String, at: Date) async throws

    /// When the endpoint with this digest answered 410, if it did.
    func endpointGoneAt(digest: String) async throws -> Date?

    func deliveryStatus(now: Date) async throws -> DeliveryStatus
}
