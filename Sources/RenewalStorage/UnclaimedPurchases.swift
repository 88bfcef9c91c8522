import Foundation
import RenewalCore

/// Purchases the change feed adopted that no user has claimed yet (docs/design.md §7): revenue the
/// app's server does not know whose it is. `renewal status --unclaimed` lists them, the run's metrics
/// count them, so support can attach each before its customer asks where their subscription went.
public protocol UnclaimedPurchaseStore: Sendable {
    /// One page of unclaimed purchases, by original transaction id after `after` (nil: from the start),
    /// so a caller streams any number of them in pages.
    func unclaimedPage(after: String?, limit: Int) async throws -> [UnclaimedPurchase]

    /// How many wait, per app and environment, and since when: what the metrics report.
    func unclaimedSummary() async throws -> [UnclaimedSummary]
}

/// One adopted purchase not claimed yet, with its subscription's latest state and its revenue so far.
public struct UnclaimedPurchase: Sendable, Hashable {
    public var originalTransactionID: String
    public var bundleID: String?
    public var productID: String?
    public var environment: String
    public var adoptedAt: Date
    /// The `appAccountToken` the purchase carries; nil when the app set none (only `renewal claim` helps).
    public var appAccountToken: String?
    /// The subscription's latest state and expiry; nil before its first check.
    public var state: SubscriptionState?
    public var expiresAt: Date?
    /// The ledger's transactions of the purchase, not revoked, per currency (milliunits).
    public var revenue: [String: Int64]

    public init(
        originalTransactionID: String, bundleID: String?, productID: String?, environment: String, adoptedAt: Date,
        appAccountToken: String?, state: SubscriptionState?, expiresAt: Date?, revenue: [String: Int64]
    ) {
        self.originalTransactionID = originalTransactionID
        self.bundleID = bundleID
        self.productID = productID
        self.environment = environment
        self.adoptedAt = adoptedAt
        self.appAccountToken = appAccountToken
        self.state = state
        self.expiresAt = expiresAt
        self.revenue = revenue
    }
}

/// The unclaimed purchases of one app and environment.
public struct UnclaimedSummary: Sendable, Hashable {
    public var bundleID: String?
    public var environment: String
    public var count: Int
    /// When the oldest of them was adopted.
    public var oldestAdoptedAt: Date

    public init(bundleID: String?, environment: String, count: Int, oldestAdoptedAt: Date) {
        self.bundleID = bundleID
        self.environment = environment
        self.count = count
        self.oldestAdoptedAt = oldestAdoptedAt
    }
}
