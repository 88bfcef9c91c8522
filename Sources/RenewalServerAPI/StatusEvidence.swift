import Foundation
import RenewalCore

/// Get All Subscription Statuses' answer (`StatusResponse`), with the signed parts still signed.
public struct StatusResponse: Decodable, Sendable, Hashable {
    public struct Group: Decodable, Sendable, Hashable {
        public var subscriptionGroupIdentifier: String?
        public var lastTransactions: [LastTransaction]?
    }

    public struct LastTransaction: Decodable, Sendable, Hashable {
        /// 1 active, 2 expired, 3 billing retry, 4 billing grace period, 5 revoked.
        public var status: Int?
        public var originalTransactionId: String?
        public var signedTransactionInfo: String?
        public var signedRenewalInfo: String?
    }

    public var environment: String?
    public var bundleId: String?
    public var data: [Group]?
}

/// The Server API's status codes for a subscription.
public enum ServerAPIStatus: Int, Sendable {
    case active = 1, expired, billingRetry, gracePeriod, revoked
}

extension SignedDataVerifier {
    /// The facts of a status answer in the same terms as a verifyReceipt answer, so the same history
    /// gives the same states whichever source read it. Every signed part must verify: one that does
    /// not fails the whole answer, since leaving a subscription out would read as "no longer listed".
    public func evidence(from response: StatusResponse, environment: String) async throws(SignedDataFailure)
        -> AppleEvidence
    {
        guard response.environment == environment else {
            throw .wrongEnvironment(expected: environment, found: response.environment ?? "none")
        }
        if let bundle = response.bundleId, bundle != bundleID { throw .wrongBundle(expected: bundleID, found: bundle) }
        var subscriptions: [SubscriptionEvidence] = []
        var others = 0
        for group in response.data ?? [] {
            for item in group.lastTransactions ?? [] {
                guard let signedTransaction = item.signedTransactionInfo else {
                    throw .malformed("a status item has no signedTransactionInfo")
                }
                let transaction = try await self.transaction(signedTransaction, environment: environment)
                let renewal = try await item.signedRenewalInfo.asyncMap { jws async throws(SignedDataFailure) in
                    try await self.renewalInfo(jws, environment: environment)
                }
                guard transaction.type == nil || transaction.type == "Auto-Renewable Subscription" else {
                    others += 1
                    continue
                }
                guard let original = transaction.originalTransactionId ?? item.originalTransactionId else {
                    throw .malformed("a transaction has no originalTransactionId")
                }
                if let claimed = item.originalTransactionId, claimed != original {
                    throw .malformed(
                        """
                        the status item's originalTransactionId \(claimed) differs from its signed transaction's \
                        \(original)
                        """
                    )
                }
                subscriptions.append(
                    Self.subscription(
                        original: original, status: item.status.flatMap(ServerAPIStatus.init(rawValue:)),
                        transaction: transaction,
                        renewal: renewal, group: group.subscriptionGroupIdentifier, environment: environment))
            }
        }
        return AppleEvidence(
            environment: AppStoreEnvironment(rawValue: environment), bundleID: response.bundleId ?? bundleID,
            latestReceipt: nil,
            subscriptions: subscriptions, otherPurchases: others)
    }

    static func subscription(
        original: String, status: ServerAPIStatus?, transaction: JWSTransaction, renewal: JWSRenewalInfo?,
        group: String?, environment: String, origin: LedgerTransaction.Origin = .statusAnswer
    ) -> SubscriptionEvidence {
        var autoRenew = renewal?.autoRenewStatus.map { $0 == 1 }
        // A monthly plan inside a 12-month commitment keeps billing every month until the commitment
        // ends, whatever the customer chose for the next commitment: not churn until then.
        if let commitmentEnd = transaction.commitmentInfo?.commitmentExpiresDate, let expires = transaction.expiresDate,
            commitmentEnd > expires, transaction.revocationDate == nil
        {
            autoRenew = true
        }
        let isIntroductory = transaction.offerType == 1
        var evidence = SubscriptionEvidence(
            originalTransactionID: original,
            productID: transaction.productId,
            expiresAt: transaction.expiresDate,
            isUpgraded: transaction.isUpgraded ?? false,
            // Status 5 without a revocation date still means revoked: Apple's summary wins.
            cancelledAt: transaction.revocationDate ?? (status == .revoked ? transaction.signedDate : nil),
            autoRenew: autoRenew,
            autoRenewProductID: renewal?.autoRenewProductId,
            gracePeriodExpiresAt: renewal?.gracePeriodExpiresDate,
            isInBillingRetry: renewal?.isInBillingRetryPeriod ?? (status == .billingRetry || status == .gracePeriod),
            expirationIntent: renewal?.expirationIntent.map(String.init),
            isTrialPeriod: isIntroductory && transaction.offerDiscountType == "FREE_TRIAL",
            isInIntroOfferPeriod: isIntroductory && transaction.offerDiscountType != "FREE_TRIAL",
            ownershipType: transaction.inAppOwnershipType,
            environment: AppStoreEnvironment(rawValue: environment),
            latestTransactionID: transaction.transactionId,
            subscriptionGroupIdentifier: transaction.subscriptionGroupIdentifier ?? group,
            signedAt: [transaction.signedDate, renewal?.signedDate].compactMap { $0 }.max())
        evidence.transactions = [transaction.ledgerTransaction(origin: origin, originalTransactionID: original)]
            .compactMap { $0 }
        return evidence
    }
}

extension Optional {
    func asyncMap<T, E: Error>(_ transform: (Wrapped) async throws(E) -> T) async throws(E) -> T? {
        guard let value = self else { return nil }
        return try await transform(value)
    }
}
