import Foundation
import Testing

@testable import RenewalCore

/// The one definition of "entitled at T": a subscription's ledger transactions and the dated facts Apple
/// stated about it, never the subscription row as it is today.
@Suite("EntitlementTimeline: entitled, paid or trial at a moment, from transactions and dated facts")
struct EntitlementTimelineTests {
    static let t0 = Date(timeIntervalSince1970: 1_793_491_200)  // 2026-11-01T00:00:00Z
    static func day(_ n: Double) -> Date { t0.addingTimeInterval(n * 86_400) }

    static func period(
        _ id: String, from start: Double, to end: Double, trial: Bool = false, revokedOn: Double? = nil
    ) -> LedgerTransaction {
        LedgerTransaction(
            transactionID: id, originalTransactionID: "otid", productID: "p.monthly", purchasedAt: day(start),
            expiresAt: day(end), isTrial: trial, ownershipType: "PURCHASED", revokedAt: revokedOn.map(day),
            revocationType: revokedOn == nil ? nil : "REFUND_FULL", origin: .statusAnswer)
    }

    static func grace(after id: String?, from start: Double, to end: Double) -> SubscriptionFact {
        SubscriptionFact(
            originalTransactionID: "otid", kind: .gracePeriod, transactionID: id, startsAt: day(start),
            endsAt: day(end), statedAt: day(start + 0.1))
    }

    @Test("a grace period after an older period still counts once newer periods exist")
    func graceAfterAnOlderPeriod() {
        let first = Self.period("t1", from: 0, to: 30)
        let second = Self.period("t2", from: 40, to: 70)
        let timeline = EntitlementTimeline(
            transactions: [second, first], facts: [Self.grace(after: "t1", from: 30, to: 46)])
        #expect(timeline.standing(at: Self.day(10)) == .paid(first, byGrace: false))
        #expect(timeline.standing(at: Self.day(35)) == .paid(first, byGrace: true))
        #expect(timeline.standing(at: Self.day(47)) == .paid(second, byGrace: false))
        // The grace period ended the day the next period began (day 40), not at its stated end.
        #expect(timeline.standing(at: Self.day(39)) == .paid(first, byGrace: true))
        #expect(timeline.standing(at: Self.day(75)) == .notEntitled)
    }

    @Test("recovery in grace: the new period entitles from its purchase, the grace before it stays")
    func recoveryDuringGrace() {
        let first = Self.period("t1", from: 0, to: 30)
        let recovered = Self.period("t2", from: 33, to: 63)
        let timeline = EntitlementTimeline(
            transactions: [first, recovered], facts: [Self.grace(after: "t1", from: 30, to: 46)])
        #expect(timeline.standing(at: Self.day(31)) == .paid(first, byGrace: true))
        #expect(timeline.standing(at: Self.day(34)) == .paid(recovered, byGrace: false))
        #expect(timeline.standing(at: Self.day(50)) == .paid(recovered, byGrace: false))
    }

    @Test("a refund after grace: the recovered period refunded ends entitlement, the grace does not return")
    func refundAfterGrace() {
        let first = Self.period("t1", from: 0, to: 30)
        let recovered = Self.period("t2", from: 33, to: 63, revokedOn: 40)
        let timeline = EntitlementTimeline(
            transactions: [first, recovered], facts: [Self.grace(after: "t1", from: 30, to: 46)])
        #expect(timeline.standing(at: Self.day(31)) == .paid(first, byGrace: true))
        #expect(timeline.standing(at: Self.day(39)) == .paid(recovered, byGrace: false))
        #expect(timeline.standing(at: Self.day(41)) == .notEntitled)
    }

    @Test("the period a grace period follows, refunded during it, ends the grace at the refund")
    func refundDuringGrace() {
        let first = Self.period("t1", from: 0, to: 30, revokedOn: 35)
        let timeline = EntitlementTimeline(transactions: [first], facts: [Self.grace(after: "t1", from: 30, to: 46)])
        #expect(timeline.standing(at: Self.day(32)) == .paid(first, byGrace: true))
        #expect(timeline.standing(at: Self.day(36)) == .notEntitled)
    }

    @Test("a later grace period does not erase an earlier one")
    func laterGraceKeepsTheEarlier() {
        let first = Self.period("t1", from: 0, to: 30)
        let second = Self.period("t2", from: 35, to: 65)
        let timeline = EntitlementTimeline(
            transactions: [first, second],
            facts: [Self.grace(after: "t1", from: 30, to: 46), Self.grace(after: "t2", from: 65, to: 81)])
        #expect(timeline.standing(at: Self.day(31)) == .paid(first, byGrace: true))
        #expect(timeline.standing(at: Self.day(70)) == .paid(second, byGrace: true))
        #expect(timeline.standing(at: Self.day(82)) == .notEntitled)
    }

    @Test("a trial's grace is a trial; a fact naming no transaction follows the one before it; other apps' facts")
    func trialsAndUnnamedPeriods() {
        let trial = Self.period("t1", from: 0, to: 7, trial: true)
        let timeline = EntitlementTimeline(transactions: [trial], facts: [Self.grace(after: nil, from: 7, to: 10)])
        #expect(timeline.standing(at: Self.day(8)) == .trial(trial, byGrace: true))
        // Nothing counted (a family-shared subscription): a grace fact entitles nothing.
        #expect(
            EntitlementTimeline(transactions: [], facts: [Self.grace(after: "t1", from: 7, to: 10)])
                .standing(at: Self.day(8)) == .notEntitled)
    }

    @Test("a refund Apple reversed and an extension stated after the expiry keep what the job saw then")
    func reversedRefundAndLateExtension() {
        let period = Self.period("t1", from: 0, to: 40)
        let reversed = SubscriptionFact(
            originalTransactionID: "otid", kind: .revocation, transactionID: "t1", startsAt: Self.day(10),
            endsAt: Self.day(12), value: "reversed", statedAt: Self.day(12))
        let extended = SubscriptionFact(
            originalTransactionID: "otid", kind: .renewalExtension, transactionID: "t1", startsAt: Self.day(30),
            endsAt: Self.day(40), statedAt: Self.day(32))
        let timeline = EntitlementTimeline(transactions: [period], facts: [reversed, extended])
        #expect(timeline.standing(at: Self.day(5)) == .paid(period, byGrace: false))
        #expect(timeline.standing(at: Self.day(11)) == .notEntitled)
        #expect(timeline.standing(at: Self.day(13)) == .paid(period, byGrace: false))
        #expect(timeline.standing(at: Self.day(31)) == .notEntitled)
        #expect(timeline.standing(at: Self.day(33)) == .paid(period, byGrace: false))
    }

    @Test("a verified answer in grace adds one grace fact after its latest transaction, once")
    func factsAddedByAnAnswer() {
        var snapshot = SubscriptionSnapshot(
            originalTransactionID: "otid", productID: "p.monthly", state: .gracePeriod, expiresAt: Self.day(30),
            autoRenew: true, gracePeriodExpiresAt: Self.day(46), isInBillingRetry: true, environment: .production,
            latestTransactionID: "t1")
        var before = snapshot
        before.state = .active
        before.gracePeriodExpiresAt = nil
        before.isInBillingRetry = false
        let added = SubscriptionFact.added(by: snapshot, previous: before, now: Self.day(31))
        #expect(
            added == [
                Self.fact(.gracePeriod, start: 30, end: 46, stated: 31),
                Self.fact(.billingRetry, start: 30, end: nil, stated: 31),
            ])
        #expect(SubscriptionFact.added(by: snapshot, previous: snapshot, now: Self.day(32)).isEmpty)
        snapshot.autoRenew = false
        #expect(
            SubscriptionFact.added(by: snapshot, previous: before, now: Self.day(31)).map(\.kind)
                == [.gracePeriod, .billingRetry, .autoRenew])
    }

    @Test("a new version of a transaction: a refund reversed and an expiry moved later become facts")
    func factsAddedByATransaction() {
        let recorded = Self.period("t1", from: 0, to: 30, revokedOn: 10)
        var now = Self.period("t1", from: 0, to: 35)
        now.signedAt = Self.day(12)
        let added = SubscriptionFact.added(by: now, recorded: recorded, now: Self.day(13))
        #expect(added.map(\.kind) == [.revocation, .renewalExtension])
        #expect(added.first?.endsAt == Self.day(12) && added.first?.value == "reversed")
        #expect(SubscriptionFact.added(by: now, recorded: nil, now: Self.day(13)).isEmpty)
    }

    static func fact(_ kind: SubscriptionFact.Kind, start: Double, end: Double?, stated: Double) -> SubscriptionFact {
        SubscriptionFact(
            originalTransactionID: "otid", kind: kind, transactionID: "t1", startsAt: day(start), endsAt: end.map(day),
            statedAt: day(stated))
    }
}
