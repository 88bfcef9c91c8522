import Foundation

/// The App Store Server API's status codes for a subscription (`status` of a status answer's item, or of
/// a notification's `data`). A code not listed here reads as no code: the signed data alone decides.
public enum ServerAPIStatus: Int, Sendable {
    case active = 1, expired, billingRetry, gracePeriod, revoked
}

/// One subscription as the App Store Server API reports it, in plain decoded values: an item of a status
/// answer's `lastTransactions` (with its group's identifier), or a notification's `data`. The adapter
/// verified the signed parts before Core reads them; what they mean is decided here, next to
/// verifyReceipt's mapping, so the same history gives the same states whichever API read it.
public struct ServerAPISubscriptionFacts: Sendable, Hashable {
    /// `status` as Apple sent it (1 active, 2 expired, 3 billing retry, 4 grace period, 5 revoked); nil
    /// when it sent none (older notifications).
    public var status: Int?
    /// The original transaction id the item names beside its signed transaction (a status item's
    /// `originalTransactionId`); nil when it names none.
    public var originalTransactionID: String?
    /// The status answer's `subscriptionGroupIdentifier` for the item, used when the transaction names none.
    public var subscriptionGroupIdentifier: String?
    public var transaction: JWSTransaction
    public var renewal: JWSRenewalInfo?

    public init(
        status: Int?, originalTransactionID: String?, subscriptionGroupIdentifier: String?,
        transaction: JWSTransaction, renewal: JWSRenewalInfo?
    ) {
        self.status = status
        self.originalTransactionID = originalTransactionID
        self.subscriptionGroupIdentifier = subscriptionGroupIdentifier
        self.transaction = transaction
        self.renewal = renewal
    }

    /// `status` as a code Core knows; nil for none or one Apple added later.
    public var statusCode: ServerAPIStatus? { status.flatMap(ServerAPIStatus.init(rawValue:)) }
}

/// A status answer whose parts verified but contradict each other or lack what identifies a
/// subscription: the whole answer is refused, since leaving one subscription out would read as
/// "no longer listed". `detail` names the problem (ids only, never signed data).
public struct ServerAPIAnswerProblem: Error, Hashable, Sendable, CustomStringConvertible {
    public var detail: String

    public init(detail: String) {
        self.detail = detail
    }

    public var description: String { detail }
}

extension ServerAPISubscriptionFacts {
    /// What a status answer's item says: its subscription's evidence, or nil when the transaction is
    /// not of an auto-renewable subscription (the answer counts it among other purchases).
    public func statusAnswerEvidence(environment: AppStoreEnvironment) throws(ServerAPIAnswerProblem)
        -> SubscriptionEvidence?
    {
        guard transaction.isAutoRenewableSubscription else { return nil }
        guard let original = transaction.originalTransactionId ?? originalTransactionID else {
            throw ServerAPIAnswerProblem(detail: "a transaction has no originalTransactionId")
        }
        if let claimed = originalTransactionID, claimed != original {
            throw ServerAPIAnswerProblem(
                detail: """
                    the status item's originalTransactionId \(claimed) differs from its signed transaction's \
                    \(original)
                    """)
        }
        return SubscriptionEvidence(
            serverAPI: self, originalTransactionID: original, environment: environment, origin: .statusAnswer)
    }

    /// What a notification's signed data says about its subscription: the subscription's whole state only
    /// with renewal info of that same subscription beside the transaction (a transaction alone does not
    /// say whether it renews or retries); nil otherwise, and the notification is applied by its type.
    public func notificationEvidence(environment: AppStoreEnvironment) -> SubscriptionEvidence? {
        guard let renewal, let original = transaction.originalTransactionId,
            renewal.originalTransactionId == nil || renewal.originalTransactionId == original
        else { return nil }
        return SubscriptionEvidence(
            serverAPI: self, originalTransactionID: original, environment: environment, origin: .notification)
    }
}

extension SubscriptionEvidence {
    /// The Server API's facts in the terms verifyReceipt's answers give (`init(originalTransactionID:rows:…)`):
    /// the signed transaction is the current one, the renewal info says what comes next, and `status`
    /// fills in only what the signed data leaves unsaid.
    init(
        serverAPI facts: ServerAPISubscriptionFacts, originalTransactionID original: String,
        environment: AppStoreEnvironment, origin: LedgerTransaction.Origin
    ) {
        let transaction = facts.transaction, renewal = facts.renewal
        self.init(
            originalTransactionID: original,
            productID: transaction.productId,
            expiresAt: transaction.expiresDate,
            isUpgraded: transaction.isUpgraded ?? false,
            cancelledAt: Self.revokedAt(transaction, status: facts.statusCode),
            autoRenew: Self.autoRenew(transaction, renewal),
            autoRenewProductID: renewal?.autoRenewProductId,
            gracePeriodExpiresAt: renewal?.gracePeriodExpiresDate,
            isInBillingRetry: Self.isInBillingRetry(renewal, status: facts.statusCode),
            expirationIntent: renewal?.expirationIntent.map(String.init),
            isTrialPeriod: transaction.isFreeTrial,
            isInIntroOfferPeriod: transaction.isIntroductoryPrice,
            ownershipType: transaction.inAppOwnershipType,
            environment: environment,
            latestTransactionID: transaction.transactionId,
            subscriptionGroupIdentifier: transaction.subscriptionGroupIdentifier ?? facts.subscriptionGroupIdentifier,
            signedAt: [transaction.signedDate, renewal?.signedDate].compactMap { $0 }.max())
        transactions = [transaction.ledgerTransaction(origin: origin, originalTransactionID: original)]
            .compactMap { $0 }
    }

    /// When the entitlement was taken back: the transaction's `revocationDate` (a full or prorated
    /// refund, or family sharing revoked), whatever the status says, since the summary may lag the
    /// signed transaction. Status 5 without a date still means revoked: Apple's summary wins, as of
    /// when Apple signed the transaction. A seat refund (`multiSeatInfo`) carries no date and revokes
    /// nobody.
    static func revokedAt(_ transaction: JWSTransaction, status: ServerAPIStatus?) -> Date? {
        transaction.revocationDate ?? (status == .revoked ? transaction.signedDate : nil)
    }

    /// Renewal info's `autoRenewStatus` (1 on, anything else off; nil when there is none), except inside
    /// a commitment: a monthly plan inside a 12-month commitment (`commitmentInfo`) keeps billing every
    /// month until the commitment ends, whatever the customer chose for the next commitment, so it is
    /// not churn until then. The commitment counts only while it ends after the current period and the
    /// transaction is not revoked; `billingPlanType` alone, or a commitment without an end, changes nothing.
    static func autoRenew(_ transaction: JWSTransaction, _ renewal: JWSRenewalInfo?) -> Bool? {
        if let commitmentEnd = transaction.commitmentInfo?.commitmentExpiresDate, let expires = transaction.expiresDate,
            commitmentEnd > expires, transaction.revocationDate == nil
        {
            return true
        }
        return renewal?.autoRenewStatus.map { $0 == 1 }
    }

    /// Renewal info's `isInBillingRetryPeriod` when it says; else the status: 3 (billing retry) and 4
    /// (grace period, during which Apple is retrying too) mean Apple is retrying, any other code not.
    static func isInBillingRetry(_ renewal: JWSRenewalInfo?, status: ServerAPIStatus?) -> Bool {
        renewal?.isInBillingRetryPeriod ?? (status == .billingRetry || status == .gracePeriod)
    }
}

extension JWSTransaction {
    /// A transaction of an auto-renewable subscription: `type` says so, or names no type. Other
    /// purchases (consumables, non-consumables, non-renewing subscriptions) make no subscription.
    public var isAutoRenewableSubscription: Bool { type == nil || type == "Auto-Renewable Subscription" }

    /// An introductory offer (`offerType` 1) that is a free trial.
    public var isFreeTrial: Bool { offerType == 1 && offerDiscountType == "FREE_TRIAL" }

    /// An introductory offer at a price (pay as you go, pay up front, or a discount type not named).
    public var isIntroductoryPrice: Bool { offerType == 1 && offerDiscountType != "FREE_TRIAL" }

    /// This transaction for the ledger; nil without a transaction id.
    public func ledgerTransaction(origin: LedgerTransaction.Origin, originalTransactionID: String)
        -> LedgerTransaction?
    {
        guard let transactionId else { return nil }
        return LedgerTransaction(
            transactionID: transactionId, originalTransactionID: originalTransactionID, productID: productId,
            purchasedAt: purchaseDate, expiresAt: expiresDate, priceMilliunits: price, currency: currency,
            storefront: storefront, offerType: offerType, offerDiscountType: offerDiscountType,
            isTrial: isFreeTrial, quantity: quantity ?? 1,
            ownershipType: inAppOwnershipType, revokedAt: revocationDate, revocationReason: revocationReason,
            revocationType: revocationType, revocationPercentage: revocationPercentage,
            transactionReason: transactionReason, isUpgraded: isUpgraded ?? false, origin: origin,
            signedAt: signedDate, revokedSeatQuantity: multiSeatInfo?.revokedSeatQuantity)
    }
}
