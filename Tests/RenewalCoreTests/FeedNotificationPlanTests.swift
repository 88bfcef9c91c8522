import Foundation
import Testing

@testable import RenewalCore

/// The change feed's rules as plain values: what each notification type records, when it is
/// unmatched, applied, already known or checked instead, and when its receipt is made due. Storage
/// only reads these inputs and writes the plan (the feed suites run it on both databases).
@Suite("Feed notification plan: the feed's rules in the core")
struct FeedNotificationPlanTests {
    static let bundle = "com.example.app"
    static let signed = Clock.at(-Clock.hour)
    static let rules = EntitlementDecision.Rules(identity: AppIdentity(bundleID: bundle, productIDs: ["pro.monthly"]))
    static let context = EntitlementDecision.Context(
        now: Clock.now, random: 0.5, runID: "run-1", leaseOwner: nil, rules: rules)

    static func subscription(signedAt: Date = signed, expires: Date = Clock.at(30 * Clock.day)) -> SubscriptionEvidence
    {
        SubscriptionEvidence(
            originalTransactionID: "1000", productID: "pro.monthly", expiresAt: expires, autoRenew: true,
            environment: .production, signedAt: signedAt)
    }

    static func evidence(
        _ type: String = "DID_RENEW", signedAt: Date = signed, expires: Date = Clock.at(30 * Clock.day),
        transactions: [LedgerTransaction] = []
    ) -> NotificationEvidence {
        var subscription = subscription(signedAt: signedAt, expires: expires)
        subscription.transactions = transactions
        return NotificationEvidence(
            type: type, subtype: nil, signedDate: signedAt, environment: .production, bundleID: bundle,
            subscription: subscription)
    }

    static func facts(
        _ type: String, subtype: String? = nil, originalTransactionID: String? = "1000", transactionID: String? = nil,
        evidence: NotificationEvidence? = nil, summary: ExtensionSummary? = nil, uuid: String = "n-1",
        signedAt: Date = signed
    ) -> FeedNotificationFacts {
        FeedNotificationFacts(
            uuid: uuid, type: type, subtype: subtype, originalTransactionID: originalTransactionID,
            transactionID: transactionID, signedAt: signedAt, evidence: evidence, extensionSummary: summary)
    }

    static func receipt(holding subscriptions: [StoredSubscription] = [], bundleID: String? = bundle) -> StoredReceipt {
        StoredReceipt(
            id: 7, userID: "alice", latestReceipt: nil, importedProductID: nil, status: .verified,
            environment: .production, nextCheckAt: Clock.at(Clock.day), lastVerifiedAt: nil, consecutiveFailures: 0,
            consecutiveMalformed: 0, bundleID: bundleID, subscriptions: subscriptions)
    }

    static func held(appleSignedAt: Date?, lastVerifiedAt: Date? = nil) -> StoredSubscription {
        StoredSubscription(
            snapshot: SubscriptionSnapshot(evidence: subscription(), now: Clock.at(-Clock.day)),
            lastVerifiedAt: lastVerifiedAt, nextCheckAt: Clock.at(Clock.day), appleSignedAt: appleSignedAt)
    }

    static let due = MakeDue(at: Clock.now, unlessVerifiedSince: signed.addingTimeInterval(60))

    static func plan(_ facts: FeedNotificationFacts, heldBy receiptID: Int64? = 7, applying: Bool = true)
        -> FeedNotificationPlan
    {
        FeedNotificationPlan(for: facts, heldBy: receiptID, applying: applying ? context : nil, now: Clock.now)
    }

    // MARK: what a notification records, by type

    @Test("a refund request is recorded to be answered 12 hours after Apple signed it, and changes no entitlement")
    func refundRequest() {
        let plan = Self.plan(Self.facts("CONSUMPTION_REQUEST", transactionID: "t1", evidence: Self.evidence()))
        #expect(
            plan.record
                == .refundRequest(
                    transactionID: "t1", requestedAt: Self.signed, answerBy: Self.signed.addingTimeInterval(12 * 3600)))
        #expect(plan.entitlement == .changesNoEntitlement)
        // Also about a subscription the database does not know: recorded, not unmatched.
        #expect(
            Self.plan(Self.facts("CONSUMPTION_REQUEST", transactionID: "t1"), heldBy: nil).entitlement
                == .changesNoEntitlement)
    }

    @Test("a refund request without its transaction records nothing and goes on like any other type")
    func refundRequestWithoutTransaction() {
        let evidence = Self.evidence("CONSUMPTION_REQUEST")
        let plan = Self.plan(Self.facts("CONSUMPTION_REQUEST", evidence: evidence))
        #expect(plan.record == nil)
        #expect(plan.entitlement == .weigh(receiptID: 7, evidence, Self.context))
        let weighed = FeedNotificationPlan.weigh(
            evidence, of: Self.facts("CONSUMPTION_REQUEST"), stored: Self.receipt(), leasedUntil: nil,
            context: Self.context, now: Clock.now)
        #expect(weighed == .recheck(.unmodelledType, Self.due))
        #expect(Self.plan(Self.facts("CONSUMPTION_REQUEST"), heldBy: nil).entitlement == .unmatched)
    }

    @Test("RENEWAL_EXTENDED confirms the subscription's extensions at its signing time and is applied as well")
    func renewalExtended() {
        let evidence = Self.evidence("RENEWAL_EXTENDED")
        let plan = Self.plan(Self.facts("RENEWAL_EXTENDED", evidence: evidence))
        #expect(plan.record == .extensionsConfirmed(originalTransactionID: "1000", at: Self.signed))
        #expect(plan.entitlement == .weigh(receiptID: 7, evidence, Self.context))
        let unnamed = Self.plan(Self.facts("RENEWAL_EXTENDED", originalTransactionID: nil), heldBy: nil)
        #expect(unnamed.record == nil && unnamed.entitlement == .namesNoSubscription)
    }

    @Test("a RENEWAL_EXTENSION summary completes its mass extension; other subtypes or no summary record nothing")
    func massExtensionSummary() {
        let summary = ExtensionSummary(requestIdentifier: "mass-1", succeeded: 40, failed: 2)
        let plan = Self.plan(
            Self.facts("RENEWAL_EXTENSION", subtype: "SUMMARY", originalTransactionID: nil, summary: summary),
            heldBy: nil)
        #expect(plan.record == .massExtensionComplete(summary, at: Self.signed))
        #expect(plan.entitlement == .namesNoSubscription)
        #expect(
            Self.plan(Self.facts("RENEWAL_EXTENSION", subtype: "FAILURE", summary: summary), heldBy: nil).record == nil)
        #expect(Self.plan(Self.facts("RENEWAL_EXTENSION", subtype: "SUMMARY"), heldBy: nil).record == nil)
    }

    @Test("REFUND and REFUND_DECLINED record Apple's decision on the transaction, with the refund's revocation")
    func refundOutcome() {
        let refunded = LedgerTransaction(
            transactionID: "t1", originalTransactionID: "1000", productID: "pro.monthly", purchasedAt: nil,
            expiresAt: nil, revocationType: "REFUND_PRORATED", revocationPercentage: 40_000, origin: .notification)
        let evidence = Self.evidence("REFUND", transactions: [refunded])
        let plan = Self.plan(Self.facts("REFUND", transactionID: "t1", evidence: evidence))
        #expect(
            plan.record
                == .refundOutcome(
                    RefundOutcome(
                        transactionID: "t1", kind: .refunded, at: Self.signed, revocationType: "REFUND_PRORATED",
                        revocationPercentage: 40_000)))
        #expect(plan.entitlement == .weigh(receiptID: 7, evidence, Self.context))
        let declined = Self.plan(Self.facts("REFUND_DECLINED", transactionID: "t2", evidence: evidence))
        #expect(
            declined.record
                == .refundOutcome(
                    RefundOutcome(
                        transactionID: "t2", kind: .refundDeclined, at: Self.signed, revocationType: nil,
                        revocationPercentage: nil)))
        #expect(RefundOutcome.Kind.refundDeclined.rawValue == "refund_declined")
        #expect(Self.plan(Self.facts("REFUND", evidence: evidence)).record == nil)
    }

    @Test("other types record nothing")
    func otherTypes() {
        for type in ["DID_RENEW", "EXPIRED", "TEST", "SOMETHING_NEW"] {
            #expect(Self.plan(Self.facts(type, transactionID: "t1")).record == nil)
        }
    }

    // MARK: the entitlement step from what storage read

    @Test("a subscription the database does not hold is unmatched; a notification naming none acts on nothing")
    func unmatched() {
        #expect(Self.plan(Self.facts("DID_RENEW", evidence: Self.evidence()), heldBy: nil).entitlement == .unmatched)
        #expect(
            Self.plan(Self.facts("TEST", originalTransactionID: nil), heldBy: nil).entitlement == .namesNoSubscription)
    }

    @Test("without signed data, or when nothing is applied (a dry run), the receipt is made due")
    func makeDueWithoutEvidence() {
        #expect(Self.plan(Self.facts("DID_RENEW")).entitlement == .makeDue(receiptID: 7, Self.due))
        let dry = Self.plan(Self.facts("DID_RENEW", evidence: Self.evidence()), applying: false)
        #expect(dry.entitlement == .makeDue(receiptID: 7, Self.due))
    }

    @Test("signed data about a held receipt is weighed against it")
    func weighed() {
        let evidence = Self.evidence()
        #expect(
            Self.plan(Self.facts("DID_RENEW", evidence: evidence)).entitlement
                == .weigh(receiptID: 7, evidence, Self.context))
    }

    // MARK: weighing signed data against the stored receipt

    static func weigh(
        _ evidence: NotificationEvidence = evidence(), stored: StoredReceipt? = receipt(), leasedUntil: Date? = nil,
        context: EntitlementDecision.Context = context
    ) -> FeedNotificationPlan.Weighed {
        FeedNotificationPlan.weigh(
            evidence, of: facts(evidence.type, evidence: evidence), stored: stored, leasedUntil: leasedUntil,
            context: context, now: Clock.now)
    }

    @Test("a receipt row gone since it was found is checked instead (not_held)")
    func rowGone() {
        #expect(Self.weigh(stored: nil) == .recheck(.notHeld, Self.due))
    }

    @Test("a receipt a worker holds the lease of is being checked: made due, not written")
    func beingChecked() {
        #expect(Self.weigh(leasedUntil: Clock.at(Clock.minute)) == .recheck(.beingChecked, Self.due))
        // A lease that ran out (or ends now) holds nothing.
        guard case .decide = Self.weigh(leasedUntil: Clock.now) else {
            Issue.record("a lease ending now still held the receipt")
            return
        }
    }

    @Test("data Apple signed at or before what is stored is already known: counted only")
    func known() {
        let stored = Self.receipt(holding: [Self.held(appleSignedAt: Self.signed)])
        #expect(Self.weigh(stored: stored) == .known)
        let verifiedLater = Self.receipt(
            holding: [Self.held(appleSignedAt: nil, lastVerifiedAt: Self.signed.addingTimeInterval(60))])
        #expect(Self.weigh(stored: verifiedLater) == .known)
    }

    @Test("data that cannot be applied on its own is checked instead, with the reason")
    func recheck() {
        #expect(Self.weigh(Self.evidence("REFUND_DECLINED")) == .recheck(.unmodelledType, Self.due))
        let older = Self.receipt(holding: [Self.held(appleSignedAt: Clock.at(-Clock.day))])
        #expect(
            Self.weigh(Self.evidence(expires: Clock.at(-Clock.day)), stored: older)
                == .recheck(.earlierPeriod, Self.due))
    }

    @Test("newer data is decided as a status answer, and the subscription follows the feed's schedule")
    func decide() {
        guard case .decide(let request) = Self.weigh() else {
            Issue.record("newer signed data was not applied")
            return
        }
        #expect(request.receipt == Self.receipt())
        #expect(request.context.rules.feedStreams == [FeedStream(.production)])
        #expect(request.context.now == Clock.now && request.context.runID == "run-1")
        // Several apps: the stream of the receipt's app.
        var rules = Self.rules
        rules.apps = [Self.bundle: rules.identity]
        var context = Self.context
        context.rules = rules
        guard case .decide(let severalApps) = Self.weigh(context: context) else {
            Issue.record("newer signed data was not applied with several apps")
            return
        }
        #expect(severalApps.context.rules.feedStreams == [FeedStream(.production, app: Self.bundle)])
    }

    // MARK: making due, and Apple's order

    @Test("a receipt is made due unless it is due already or a check verified it a minute after Apple signed")
    func makeDueRule() {
        let due = Self.due
        #expect(due.applies(nextCheckAt: Clock.at(Clock.hour), lastVerifiedAt: nil))
        #expect(!due.applies(nextCheckAt: Clock.now, lastVerifiedAt: nil))
        #expect(!due.applies(nextCheckAt: Clock.at(-Clock.hour), lastVerifiedAt: nil))
        #expect(due.applies(nextCheckAt: Clock.at(Clock.hour), lastVerifiedAt: Self.signed.addingTimeInterval(59)))
        #expect(!due.applies(nextCheckAt: Clock.at(Clock.hour), lastVerifiedAt: Self.signed.addingTimeInterval(60)))
        // In the database's milliseconds: less than half of one later is the same time.
        #expect(!due.applies(nextCheckAt: Clock.at(0.0004), lastVerifiedAt: nil))
    }

    @Test("notifications apply in the order Apple signed their data, then by uuid")
    func appleOrder() {
        let late = Self.facts(
            "DID_RENEW", evidence: Self.evidence(signedAt: Clock.at(-60)), uuid: "a", signedAt: Clock.now)
        let early = Self.facts(
            "DID_RENEW", evidence: Self.evidence(signedAt: Clock.at(-120)), uuid: "b", signedAt: Clock.at(-30))
        #expect(early.precedes(late) && !late.precedes(early))
        let plainA = Self.facts("TEST", uuid: "a", signedAt: Clock.now)
        let plainB = Self.facts("TEST", uuid: "b", signedAt: Clock.now)
        #expect(plainA.precedes(plainB) && !plainB.precedes(plainA))
        #expect(FeedStream.renewalKinds == [.renewed, .billingRecovered])
    }
}
