import Foundation
import Testing

@testable import RenewalCore

/// Issue 44's adoption rule as plain values: a verified notification about a subscription the database
/// does not hold is adopted only with signed data of an auto-renewable subscription of a configured app,
/// and never in a dry run.
@Suite("Purchase adoption: which unmatched notifications create an unclaimed subscription")
struct PurchaseAdoptionTests {
    typealias Plan = FeedNotificationPlanTests

    static func adoptable(
        token: String? = "6d1b1e9c-3f5e-4b0a-9a57-0c1c1c1c1c1c", autoRenewable: Bool = true,
        bundleID: String = Plan.bundle
    ) -> NotificationEvidence {
        var evidence = Plan.evidence("SUBSCRIBED")
        evidence.bundleID = bundleID
        evidence.appAccountToken = token
        evidence.isAutoRenewableSubscription = autoRenewable
        return evidence
    }

    @Test("an unheld subscription with verified signed data of a configured app is adopted, due now, with its token")
    func adopts() {
        let plan = Plan.plan(Plan.facts("SUBSCRIBED", evidence: Self.adoptable()), heldBy: nil)
        let expected = PurchaseAdoption(
            originalTransactionID: "1000", environment: .production, bundleID: Plan.bundle, productID: "pro.monthly",
            appAccountToken: "6d1b1e9c-3f5e-4b0a-9a57-0c1c1c1c1c1c", at: Clock.now)
        #expect(plan.entitlement == .adopt(expected))
        #expect(expected.userKey == "adopted:1000")
        #expect(PurchaseAdoption.isReserved(expected.userKey))
        #expect(!PurchaseAdoption.isReserved("alice"))
    }

    @Test("without signed data, of another type of purchase, another app or product, or in a dry run: unmatched")
    func refuses() {
        func entitlement(_ evidence: NotificationEvidence?, applying: Bool = true)
            -> FeedNotificationPlan
            .EntitlementStep
        {
            Plan.plan(Plan.facts("SUBSCRIBED", evidence: evidence), heldBy: nil, applying: applying).entitlement
        }
        #expect(entitlement(nil) == .unmatched)
        #expect(entitlement(Self.adoptable(autoRenewable: false)) == .unmatched)
        #expect(entitlement(Self.adoptable(bundleID: "com.other.app")) == .unmatched)
        #expect(entitlement(Self.adoptable(), applying: false) == .unmatched)
        var noRenewal = Self.adoptable()
        noRenewal.subscription = nil
        #expect(entitlement(noRenewal) == .unmatched)
        var otherProduct = Self.adoptable()
        otherProduct.subscription?.productID = "other.product"
        #expect(entitlement(otherProduct) == .unmatched)
        var otherSubscription = Self.adoptable()
        otherSubscription.subscription?.originalTransactionID = "2000"
        #expect(entitlement(otherSubscription) == .unmatched)
        // Held: weighed as before, never adopted again.
        guard case .weigh = Plan.plan(Plan.facts("SUBSCRIBED", evidence: Self.adoptable())).entitlement else {
            Issue.record("a held subscription must be weighed")
            return
        }
    }

    @Test("with several apps, only an app of the apps file is adopted")
    func severalApps() {
        let rules = EntitlementDecision.Rules(apps: [
            "com.example.app": AppIdentity(bundleID: "com.example.app", productIDs: ["pro.monthly"])
        ])
        let context = EntitlementDecision.Context(
            now: Clock.now, random: 0.5, runID: "run-1", leaseOwner: nil, rules: rules)
        func step(_ bundle: String) -> FeedNotificationPlan.EntitlementStep {
            FeedNotificationPlan(
                for: Plan.facts("SUBSCRIBED", evidence: Self.adoptable(bundleID: bundle)), heldBy: nil,
                applying: context, now: Clock.now
            ).entitlement
        }
        guard case .adopt = step("com.example.app") else {
            Issue.record("the listed app's purchase must be adopted")
            return
        }
        #expect(step("com.unlisted.app") == .unmatched)
    }

    @Test("the purchase kinds are webhooks of their own; the others stay entitlement.changed")
    func webhookTypes() {
        #expect(SubscriptionEvent.Kind.purchaseUnclaimed.webhookType == "purchase.unclaimed")
        #expect(SubscriptionEvent.Kind.purchaseClaimed.webhookType == "purchase.claimed")
        #expect(SubscriptionEvent.Kind.renewed.webhookType == "entitlement.changed")
    }
}
