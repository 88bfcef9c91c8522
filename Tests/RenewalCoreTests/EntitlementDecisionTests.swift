import Foundation
import Testing

@testable import RenewalCore

/// The entitlement decision as a pure function of Core values: screening once, the claims it hands
/// storage, ownership conflicts, and the same answer deciding the same way every time.
@Suite("Entitlement decision: one pure function in the core")
struct EntitlementDecisionTests {
    static let bundle = "com.example.app"

    static func receipt(holding subscriptions: [StoredSubscription] = [], bundleID: String? = bundle) -> StoredReceipt {
        StoredReceipt(
            id: 7, userID: "alice", latestReceipt: "opaque", importedProductID: nil, status: .unverified,
            environment: nil, nextCheckAt: Clock.now, lastVerifiedAt: nil, consecutiveFailures: 2,
            consecutiveMalformed: 0, bundleID: bundleID, subscriptions: subscriptions)
    }

    static func evidence(_ ids: [String], bundleID: String? = bundle, product: String = "pro.monthly") -> AppleEvidence
    {
        AppleEvidence(
            environment: .production, bundleID: bundleID, latestReceipt: nil,
            subscriptions: ids.map {
                SubscriptionEvidence(
                    originalTransactionID: $0, productID: product, expiresAt: Clock.at(20 * Clock.day),
                    autoRenew: true, environment: .production)
            })
    }

    static let rules = EntitlementDecision.Rules(
        identity: AppIdentity(bundleID: bundle, productIDs: ["pro.monthly"]))

    static func context(rules: EntitlementDecision.Rules = rules) -> EntitlementDecision.Context {
        EntitlementDecision.Context(now: Clock.now, random: 0.5, runID: "run-1", leaseOwner: "w1", rules: rules)
    }

    @Test("an answer about another app is screened out once, claims nothing and changes nothing")
    func anotherApp() {
        let receipt = Self.receipt()
        let screened = Self.rules.screen(.verified(Self.evidence(["1"], bundleID: "com.other.app")), of: receipt)
        guard case .notThisApp(let failure) = screened else {
            Issue.record("screened as \(screened)")
            return
        }
        #expect(failure.reason == .wrongBundle)
        let request = EntitlementDecision.Request(receipt: receipt, answer: screened, context: Self.context())
        #expect(request.claims.isEmpty)
        let decision = request.decide(owners: [:])
        #expect(decision.outcome == .failed(outage: false))
        #expect(decision.update.subscriptions.isEmpty && decision.changes.isEmpty)
        #expect(decision.update.status == .unverified && decision.update.consecutiveFailures == 3)
    }

    @Test("products the app does not sell are dropped before the claims are taken")
    func unknownProductsAreNotClaimed() {
        let receipt = Self.receipt()
        var evidence = Self.evidence(["1"])
        evidence.subscriptions += Self.evidence(["2"], product: "other.product").subscriptions
        let screened = Self.rules.screen(.verified(evidence), of: receipt)
        #expect(screened.claims(of: receipt) == ["1"])
    }

    @Test("claims are the answer's subscriptions the receipt does not hold; one another receipt owns is a conflict")
    func claimsAndConflicts() {
        let held = StoredSubscription(
            snapshot: SubscriptionSnapshot(
                evidence: Self.evidence(["1"]).subscriptions[0], now: Clock.at(-Clock.day)),
            lastVerifiedAt: Clock.at(-Clock.day), nextCheckAt: Clock.now)
        let receipt = Self.receipt(holding: [held])
        let request = EntitlementDecision.Request(
            receipt: receipt, answer: Self.rules.screen(.verified(Self.evidence(["1", "2", "3"])), of: receipt),
            context: Self.context())
        #expect(request.claims == ["2", "3"])
        let decision = request.decide(owners: ["3": SubscriptionOwner(receiptID: 99, userID: "bob")])
        #expect(decision.outcome == .verified)
        #expect(decision.update.subscriptions.map(\.snapshot.originalTransactionID).sorted() == ["1", "2"])
        #expect(
            decision.update.conflicts == [
                OwnershipConflict(
                    originalTransactionID: "3", ownerUserID: "bob", claimantUserID: "alice", productID: "pro.monthly")
            ])
        #expect(decision.update.leaseOwner == "w1" && decision.update.runID == "run-1")
    }

    @Test("the decision is a function of its inputs: the same request decides the same way twice")
    func pure() {
        let receipt = Self.receipt()
        for answer in [
            AppleAnswer.verified(Self.evidence(["1"])),
            .transient(CheckFailure(reason: .timeout, message: "slow"), isOutage: true),
            .rejected(AppleRejection(kind: .malformedOrTemporary, status: .malformedOrTemporary, environment: nil)),
        ] {
            let request = EntitlementDecision.Request(
                receipt: receipt, answer: Self.rules.screen(answer, of: receipt), context: Self.context())
            #expect(request.decide(owners: [:]) == request.decide(owners: [:]))
        }
        let outage = EntitlementDecision.Request(
            receipt: receipt,
            answer: Self.rules.screen(
                .transient(CheckFailure(reason: .timeout, message: "slow"), isOutage: true), of: receipt),
            context: Self.context()
        ).decide(owners: [:])
        #expect(outage.outcome == .failed(outage: true) && outage.update.nextCheckAt > Clock.now)
    }
}
