import Foundation

/// A purchase the app's server never stored, adopted from the change feed (docs/design.md §7): a verified
/// notification about an original transaction id no receipt holds, whose signed transaction is an
/// auto-renewable subscription of a configured app. Storage creates its receipts row under `userKey`, due
/// `at` so the same run checks it by the App Store Server API like any row imported by transaction id.
public struct PurchaseAdoption: Sendable, Hashable {
    public var originalTransactionID: String
    public var environment: AppStoreEnvironment
    /// The app it is of, when the notification names it.
    public var bundleID: String?
    public var productID: String?
    /// The UUID the app set at purchase, lowercased; nil when the app set none.
    public var appAccountToken: String?
    /// When the adopted row is due: now, so the run that adopts it checks it.
    public var at: Date

    public init(
        originalTransactionID: String, environment: AppStoreEnvironment, bundleID: String?, productID: String?,
        appAccountToken: String?, at: Date
    ) {
        self.originalTransactionID = originalTransactionID
        self.environment = environment
        self.bundleID = bundleID
        self.productID = productID
        self.appAccountToken = appAccountToken
        self.at = at
    }

    /// The prefix of the user ids adopted receipts rows are stored under. `receipts.user_id` is NOT NULL
    /// and UNIQUE; an adopted purchase has no user yet, so its row gets a key no app user id can take
    /// (import refuses user ids with this prefix).
    public static let reservedUserPrefix = "adopted:"

    /// The user id an adopted subscription's receipts row is stored under until it is claimed.
    public var userKey: String { Self.userKey(of: originalTransactionID) }

    public static func userKey(of originalTransactionID: String) -> String {
        reservedUserPrefix + originalTransactionID
    }

    /// Whether `userID` is one of the reserved keys, never an app user's.
    public static func isReserved(_ userID: String) -> Bool { userID.hasPrefix(reservedUserPrefix) }

    /// The adoption `notification` asks for, or nil: nothing is adopted from a notification without a
    /// verified signed transaction and renewal info of an auto-renewable subscription, one about another
    /// subscription than it names, or one whose app or product the rules do not accept (another app's
    /// notification changes nothing here, as another app's answer does not).
    public static func of(
        _ notification: FeedNotificationFacts, rules: EntitlementDecision.Rules, now: Date
    ) -> PurchaseAdoption? {
        guard let id = notification.originalTransactionID, let evidence = notification.evidence,
            evidence.isAutoRenewableSubscription, let subscription = evidence.subscription,
            subscription.originalTransactionID == id
        else { return nil }
        var answer = AppleEvidence(
            environment: evidence.environment, bundleID: evidence.bundleID, latestReceipt: nil,
            subscriptions: [subscription], source: .serverAPI, lookupTransactionID: id)
        answer.scope = .subscription
        let identity: AppIdentity?
        if rules.apps.isEmpty {
            identity = rules.identity
        } else {
            identity = evidence.bundleID.flatMap { rules.apps[$0] }
        }
        guard let identity, case .success(let screened) = identity.screen(answer), !screened.subscriptions.isEmpty
        else { return nil }
        return PurchaseAdoption(
            originalTransactionID: id, environment: evidence.environment, bundleID: evidence.bundleID,
            productID: subscription.productID, appAccountToken: evidence.appAccountToken, at: now)
    }
}

extension SubscriptionEvent {
    /// The change recorded when the feed adopts a purchase no user claims yet.
    public static func purchaseUnclaimed(_ adoption: PurchaseAdoption) -> SubscriptionEvent {
        SubscriptionEvent(
            kind: .purchaseUnclaimed, originalTransactionID: adoption.originalTransactionID,
            productID: adoption.productID, fromState: .unverified, toState: .unverified, oldExpiresAt: nil,
            newExpiresAt: nil, environment: adoption.environment)
    }

    /// The change recorded when a subscription becomes its user's (by token or by hand), in the state it
    /// is in: a claim changes whose it is, not what Apple says of it.
    public static func purchaseClaimed(
        originalTransactionID: String, productID: String?, state: SubscriptionState, expiresAt: Date?,
        environment: AppStoreEnvironment?
    ) -> SubscriptionEvent {
        SubscriptionEvent(
            kind: .purchaseClaimed, originalTransactionID: originalTransactionID, productID: productID,
            fromState: state, toState: state, oldExpiresAt: expiresAt, newExpiresAt: expiresAt,
            environment: environment)
    }
}

extension SubscriptionEvent.Kind {
    /// The webhook event type a change of this kind is delivered as: the purchase kinds have their own
    /// (`purchase.unclaimed`, `purchase.claimed`) so the app can route them; every other kind is
    /// `entitlement.changed`.
    public var webhookType: String {
        switch self {
        case .purchaseUnclaimed: "purchase.unclaimed"
        case .purchaseClaimed: "purchase.claimed"
        default: "entitlement.changed"
        }
    }
}
