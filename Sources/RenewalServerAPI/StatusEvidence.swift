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

extension SignedDataVerifier {
    /// The facts of a status answer in the same terms as a verifyReceipt answer, so the same history
    /// gives the same states whichever source read it. Every signed part must verify: one that does
    /// not fails the whole answer, since leaving a subscription out would read as "no longer listed".
    /// What each item means (status codes, renewal info, commitments, revocations) is Core's
    /// `ServerAPISubscriptionFacts.statusAnswerEvidence`; this only verifies and decodes.
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
                let facts = ServerAPISubscriptionFacts(
                    status: item.status, originalTransactionID: item.originalTransactionId,
                    subscriptionGroupIdentifier: group.subscriptionGroupIdentifier, transaction: transaction,
                    renewal: renewal)
                let subscription: SubscriptionEvidence?
                do {
                    subscription = try facts.statusAnswerEvidence(
                        environment: AppStoreEnvironment(rawValue: environment))
                } catch {
                    throw .malformed(error.detail)
                }
                if let subscription { subscriptions.append(subscription) } else { others += 1 }
            }
        }
        return AppleEvidence(
            environment: AppStoreEnvironment(rawValue: environment), bundleID: response.bundleId ?? bundleID,
            latestReceipt: nil,
            subscriptions: subscriptions, otherPurchases: others)
    }
}

extension Optional {
    func asyncMap<T, E: Error>(_ transform: (Wrapped) async throws(E) -> T) async throws(E) -> T? {
        guard let value = self else { return nil }
        return try await transform(value)
    }
}
