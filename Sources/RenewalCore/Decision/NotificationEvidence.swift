import Foundation

/// A verified notification from Apple's change feed, with the signed data it carries about one
/// subscription: what the feed applies through `EntitlementDecision` without asking Apple again.
public struct NotificationEvidence: Sendable, Hashable {
    public var type: String
    public var subtype: String?
    /// When Apple signed the notification.
    public var signedDate: Date
    public var environment: AppStoreEnvironment
    /// The app it is about (`data.bundleId`).
    public var bundleID: String?
    /// The subscription as Apple signed it with the notification (its transaction and renewal info);
    /// nil when the notification carries no signed transaction or no signed renewal info.
    public var subscription: SubscriptionEvidence?
    /// The `appAccountToken` of its signed transaction (the UUID the app set at purchase), lowercased;
    /// what claims a subscription the feed adopts for the user the app registered it for.
    public var appAccountToken: String?
    /// Its signed transaction is of an auto-renewable subscription: only those are adopted.
    public var isAutoRenewableSubscription = false

    public init(
        type: String, subtype: String?, signedDate: Date, environment: AppStoreEnvironment, bundleID: String?,
        subscription: SubscriptionEvidence?
    ) {
        self.type = type
        self.subtype = subtype
        self.signedDate = signedDate
        self.environment = environment
        self.bundleID = bundleID
        self.subscription = subscription
    }

    /// When Apple signed the data: its transaction's and renewal info's signing time, else the
    /// notification's. What orders two notifications about one subscription, never their arrival.
    public var signedAt: Date { subscription?.signedAt ?? signedDate }

    /// A receipt verifyReceipt answered at least this long after Apple signed a notification already
    /// shows its change: the two clocks differ by seconds, not a minute.
    public static let verifiedAfterMargin: TimeInterval = 60

    /// The notification types whose signed data is the subscription's whole state at signing, applied
    /// on their own. Others (a refund request, a declined refund, a summary, a type this version does
    /// not know) re-read the statuses.
    public static let appliedTypes: Set<String> = [
        "SUBSCRIBED", "DID_RENEW", "DID_CHANGE_RENEWAL_STATUS", "DID_CHANGE_RENEWAL_PREF", "DID_FAIL_TO_RENEW",
        "GRACE_PERIOD_EXPIRED", "EXPIRED", "REFUND", "REFUND_REVERSED", "REVOKE", "OFFER_REDEEMED", "PRICE_INCREASE",
        "RENEWAL_EXTENDED",
    ]
}

/// What the feed does with one notification about a receipt the database holds.
public enum NotificationUse: Sendable, Hashable {
    /// Decide with its signed data, as with a status answer about that one subscription.
    case apply(ScreenedAnswer)
    /// What is stored is as new or newer (Apple signed it at or after the notification): nothing
    /// changes and nothing is asked.
    case known
    /// It cannot be applied on its own: the receipt is made due and its check re-reads the statuses.
    case recheck(Recheck)

    public enum Recheck: String, Sendable, Hashable, CaseIterable {
        /// A type (or subtype) whose effect the job does not model.
        case unmodelledType = "unmodelled_type"
        /// No signed transaction or renewal info.
        case missingData = "missing_data"
        /// Signed after what is stored, about an earlier billing period than the stored one (a refund
        /// of an old renewal): it does not say what the subscription is now.
        case earlierPeriod = "earlier_period"
        /// The receipt holds other subscriptions, not this one: its check settles who owns it.
        case notHeld = "not_held"
        /// Another environment, or no product of the app: the check records why.
        case notThisApp = "not_this_app"
        /// A worker holds the receipt's lease and is checking it now; its check stands.
        case beingChecked = "being_checked"
    }
}

extension EntitlementDecision.Rules {
    /// How `notification` is used for `receipt`, the receipt holding (or imported by) the
    /// subscription it names.
    public func use(of notification: NotificationEvidence, for receipt: StoredReceipt) -> NotificationUse {
        guard NotificationEvidence.appliedTypes.contains(notification.type) else { return .recheck(.unmodelledType) }
        guard let evidence = notification.subscription, evidence.autoRenew != nil else {
            return .recheck(.missingData)
        }
        if let environment = receipt.environment, environment != notification.environment {
            return .recheck(.notThisApp)
        }
        let id = evidence.originalTransactionID
        if let held = receipt.subscriptions.first(where: { $0.snapshot.originalTransactionID == id }) {
            if let signed = held.appleSignedAt {
                if notification.signedAt <= signed { return .known }
            } else if let verified = held.lastVerifiedAt,
                verified >= notification.signedAt.addingTimeInterval(NotificationEvidence.verifiedAfterMargin)
            {
                return .known
            }
            if let expires = evidence.expiresAt, let stored = held.snapshot.expiresAt, expires < stored {
                return .recheck(.earlierPeriod)
            }
        } else if !receipt.subscriptions.isEmpty {
            return .recheck(.notHeld)
        }
        var answer = AppleEvidence(
            environment: notification.environment, bundleID: notification.bundleID, latestReceipt: nil,
            subscriptions: [evidence], source: .serverAPI, lookupTransactionID: receipt.originalTransactionID ?? id)
        answer.scope = .subscription
        switch screen(answer, of: receipt) {
        case .success(let screened): return .apply(.verified(screened))
        case .failure: return .recheck(.notThisApp)
        }
    }
}
