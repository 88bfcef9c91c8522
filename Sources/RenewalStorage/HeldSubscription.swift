import Foundation
import RenewalCore

/// One subscription as the database holds it, found by its original transaction id: what support needs
/// to answer "I paid but have no access" (`renewal lookup`, `renewal claim`), whose it is included.
public struct HeldSubscription: Sendable, Hashable {
    public var originalTransactionID: String
    /// The user it belongs to; nil when it is unclaimed (adopted from Apple's change feed, no user yet).
    public var userID: String?
    public var productID: String?
    public var state: SubscriptionState
    public var entitled: Bool
    public var expiresAt: Date?
    public var environment: AppStoreEnvironment?
    /// The token stored for its receipt (`appAccountToken`), if any.
    public var appAccountToken: String?
    /// The receipt's app; nil until known.
    public var bundleID: String?

    public init(
        originalTransactionID: String, userID: String?, productID: String?, state: SubscriptionState, entitled: Bool,
        expiresAt: Date?, environment: AppStoreEnvironment?, appAccountToken: String?, bundleID: String?
    ) {
        self.originalTransactionID = originalTransactionID
        self.userID = userID
        self.productID = productID
        self.state = state
        self.entitled = entitled
        self.expiresAt = expiresAt
        self.environment = environment
        self.appAccountToken = appAccountToken
        self.bundleID = bundleID
    }
}

/// Reads subscriptions by original transaction id, writing nothing: a port of its own so the support
/// commands can ask it without widening `SubscriptionStore`, which every backend and test double implements.
public protocol HeldSubscriptionReading: Sendable {
    /// The subscriptions among `originalTransactionIDs` the database holds, keyed by that id: a stored
    /// subscription row, else a receipts row imported or adopted by that id and not verified yet (state
    /// `unverified`). Ids it does not hold are absent.
    func heldSubscriptions(originalTransactionIDs: [String]) async throws -> [String: HeldSubscription]

    /// Stores `token` as the `appAccountToken` of the receipt holding the subscription (and of its adopted
    /// purchase), after `renewal claim --set-app-account-token` bound it at Apple, so the database says
    /// what Apple's later transactions will. Returns false when the database holds no such subscription.
    func recordAppAccountToken(_ token: String, originalTransactionID: String, now: Date) async throws -> Bool
}
