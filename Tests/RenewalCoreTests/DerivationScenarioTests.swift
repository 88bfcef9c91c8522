import Foundation
import RenewalTesting
import Testing

@testable import RenewalCore

/// Synthetic answers, one per scenario of docs/design.md §3, evaluated at `Clock.now`.
@Suite struct DerivationScenarioTests {
    let now = Clock.now
    let day = Clock.day

    @Test("A later row after a renewal makes the later expiry current and emits renewed")
    func renewal() throws {
        let firstPeriod = Wire.row(transaction: "1001", purchased: Clock.at(-40 * day), expires: Clock.at(-10 * day))
        let renewal = Wire.row(transaction: "1002", purchased: Clock.at(-10 * day), expires: Clock.at(20 * day))
        let before = try deriveOne(
            Wire.answer(rows: [firstPeriod], pending: [Wire.pending()]), now: Clock.at(-11 * day))

        let after = try deriveOne(Wire.answer(rows: [firstPeriod, renewal], pending: [Wire.pending()]), now: now)

        #expect(before.state == .active)
        #expect(after.state == .active)
        #expect(after.entitled)
        #expect(after.expiresAt == Clock.at(20 * day))
        #expect(after.latestTransactionID == "1002")
        #expect(after.autoRenew == true)
        #expect(SubscriptionEvent.events(from: before, to: after).map(\.kind) == [.renewed])
    }

    @Test("With auto-renew off the subscription stays active until expiry, then expires")
    func voluntaryExpiry() throws {
        let row = Wire.row(transaction: "1001", purchased: Clock.at(-20 * day), expires: Clock.at(10 * day))
        let stillPaid = Wire.answer(rows: [row], pending: [Wire.pending(autoRenew: false)])
        let lapsed = Wire.answer(rows: [row], pending: [Wire.pending(autoRenew: false, retrying: false, intent: "1")])

        let active = try deriveOne(stillPaid, now: now)
        let expired = try deriveOne(lapsed, now: Clock.at(10 * day + 1))

        #expect(active.state == .active)
        #expect(active.entitled)
        #expect(active.autoRenew == false)
        #expect(active.expirationIntent == nil)
        #expect(expired.state == .expired)
        #expect(!expired.entitled)
        #expect(expired.expirationIntent == "1")
        #expect(SubscriptionEvent.events(from: active, to: expired).map(\.kind) == [.expired])
    }

    @Test("A failed renewal with Apple retrying and no grace period is billing retry, without access")
    func billingRetry() throws {
        let row = Wire.row(transaction: "1001", purchased: Clock.at(-33 * day), expires: Clock.at(-3 * day))
        let answer = Wire.answer(rows: [row], pending: [Wire.pending(retrying: true, intent: "2")])
        let stored = try deriveOne(answer, now: Clock.at(-4 * day))

        let subscription = try deriveOne(answer, now: now)

        #expect(stored.state == .active)
        #expect(subscription.state == .billingRetry)
        #expect(!subscription.entitled)
        #expect(subscription.isInBillingRetry)
        #expect(subscription.gracePeriodExpiresAt == nil)
        #expect(subscription.expirationIntent == "2")
        #expect(SubscriptionEvent.events(from: stored, to: subscription).map(\.kind) == [.billingIssue])
    }

    @Test(
        "A grace period end in the future grants access whatever the retry flag says",
        arguments: [true, false, nil] as [Bool?]
    )
    func gracePeriod(retrying: Bool?) throws {
        let row = Wire.row(transaction: "1001", purchased: Clock.at(-31 * day), expires: Clock.at(-1 * day))
        let graceEnd = Clock.at(15 * day)
        let answer = Wire.answer(
            rows: [row], pending: [Wire.pending(retrying: retrying, intent: "2", graceEnds: graceEnd)])
        let stored = try deriveOne(answer, now: Clock.at(-2 * day))

        let subscription = try deriveOne(answer, now: now)

        #expect(subscription.state == .gracePeriod)
        #expect(subscription.entitled)
        #expect(subscription.gracePeriodExpiresAt == graceEnd)
        #expect(subscription.isInBillingRetry == (retrying ?? false))
        #expect(SubscriptionEvent.events(from: stored, to: subscription).map(\.kind) == [.gracePeriodStarted])
    }

    @Test("Once the grace period is over, a still-retrying subscription is billing retry")
    func graceOver() throws {
        let row = Wire.row(transaction: "1001", purchased: Clock.at(-46 * day), expires: Clock.at(-16 * day))
        let graceEnd = Clock.at(-day)
        let answer = Wire.answer(rows: [row], pending: [Wire.pending(retrying: true, intent: "2", graceEnds: graceEnd)])
        let inGrace = try deriveOne(answer, now: graceEnd.addingTimeInterval(-60))

        let afterGrace = try deriveOne(answer, now: now)

        #expect(inGrace.state == .gracePeriod)
        #expect(afterGrace.state == .billingRetry)
        #expect(!afterGrace.entitled)
        #expect(afterGrace.gracePeriodExpiresAt == nil)
        #expect(SubscriptionEvent.events(from: inGrace, to: afterGrace).map(\.kind) == [.billingIssue])
    }

    @Test("A grace period that is over with Apple no longer retrying is expired")
    func graceOverNotRetrying() throws {
        let row = Wire.row(transaction: "1001", purchased: Clock.at(-46 * day), expires: Clock.at(-16 * day))
        let answer = Wire.answer(
            rows: [row],
            pending: [Wire.pending(autoRenew: false, retrying: false, intent: "2", graceEnds: Clock.at(-day))])

        #expect(try deriveOne(answer, now: now).state == .expired)
    }

    @Test("A payment collected after billing retry is billing_recovered")
    func billingRecovered() throws {
        let lapsed = Wire.row(transaction: "1001", purchased: Clock.at(-35 * day), expires: Clock.at(-5 * day))
        let recovered = Wire.row(transaction: "1002", purchased: Clock.at(-1 * day), expires: Clock.at(29 * day))
        let stored = try deriveOne(
            Wire.answer(rows: [lapsed], pending: [Wire.pending(retrying: true, intent: "2")]), now: Clock.at(-2 * day))

        let derived = try deriveOne(
            Wire.answer(rows: [lapsed, recovered], pending: [Wire.pending(retrying: false)]), now: now)

        #expect(stored.state == .billingRetry)
        #expect(derived.state == .active)
        #expect(derived.isInBillingRetry == false)
        #expect(SubscriptionEvent.events(from: stored, to: derived).map(\.kind) == [.billingRecovered])
    }

    @Test("A cancellation date on the current transaction revokes the subscription")
    func refund() throws {
        let cancelled = Clock.at(-2 * day)
        let plain = Wire.row(transaction: "1002", purchased: Clock.at(-5 * day), expires: Clock.at(25 * day))
        let refunded = Wire.row(
            transaction: "1002", purchased: Clock.at(-5 * day), expires: Clock.at(25 * day),
            extra: Wire.dateTriple("cancellation_date", cancelled) + #", "cancellation_reason": "0""#)
        let older = Wire.row(transaction: "1001", purchased: Clock.at(-35 * day), expires: Clock.at(-5 * day))
        let stored = try deriveOne(
            Wire.answer(rows: [older, plain], pending: [Wire.pending()]), now: Clock.at(-3 * day))

        let derived = try deriveOne(Wire.answer(rows: [older, refunded], pending: [Wire.pending()]), now: now)

        #expect(derived.state == .revoked)
        #expect(!derived.entitled)
        #expect(derived.cancelledAt == cancelled)
        #expect(derived.latestTransactionID == "1002")
        let events = SubscriptionEvent.events(from: stored, to: derived)
        #expect(events.map(\.kind) == [.refunded])
        #expect(events.first?.fromState == .active)
        #expect(events.first?.toState == .revoked)
    }

    @Test("A cancellation date on an older transaction does not revoke the current one")
    func refundOfOlderRow() throws {
        let olderRefunded = Wire.row(
            transaction: "1001", purchased: Clock.at(-35 * day), expires: Clock.at(-5 * day),
            extra: Wire.dateTriple("cancellation_date", Clock.at(-20 * day)))
        let current = Wire.row(transaction: "1002", purchased: Clock.at(-5 * day), expires: Clock.at(25 * day))

        let subscription = try deriveOne(
            Wire.answer(rows: [current, olderRefunded], pending: [Wire.pending()]), now: now)

        #expect(subscription.state == .active)
        #expect(subscription.cancelledAt == nil)
        #expect(subscription.latestTransactionID == "1002")
    }

    @Test("A refund that disappears from Apple's answer restores access and emits refund_reversed")
    func refundReversed() throws {
        let refunded = Wire.row(
            transaction: "1002", purchased: Clock.at(-5 * day), expires: Clock.at(25 * day),
            extra: Wire.dateTriple("cancellation_date", Clock.at(-2 * day)))
        let reinstated = Wire.row(transaction: "1002", purchased: Clock.at(-5 * day), expires: Clock.at(25 * day))
        let stored = try deriveOne(Wire.answer(rows: [refunded], pending: [Wire.pending()]), now: Clock.at(-day))

        let derived = try deriveOne(Wire.answer(rows: [reinstated], pending: [Wire.pending()]), now: now)

        #expect(stored.state == .revoked)
        #expect(derived.state == .active)
        #expect(SubscriptionEvent.events(from: stored, to: derived).map(\.kind) == [.refundReversed])
    }

    @Test("An upgraded row never grants; the upgrade's row does, and the product change is reported")
    func upgrade() throws {
        // A yearly basic plan, upgraded to monthly premium halfway: the basic row still has the later expiry.
        let basic = Wire.row(
            product: "com.example.basic.yearly", transaction: "1001", purchased: Clock.at(-180 * day),
            expires: Clock.at(185 * day))
        let basicUpgraded = Wire.row(
            product: "com.example.basic.yearly", transaction: "1001", purchased: Clock.at(-180 * day),
            expires: Clock.at(185 * day), extra: #""is_upgraded": "true""#)
        let premium = Wire.row(
            product: "com.example.premium.monthly", transaction: "1002", purchased: Clock.at(-day),
            expires: Clock.at(29 * day))
        let stored = try deriveOne(
            Wire.answer(rows: [basic], pending: [Wire.pending(product: "com.example.basic.yearly")]),
            now: Clock.at(-2 * day))

        let derived = try deriveOne(
            Wire.answer(
                rows: [basicUpgraded, premium], pending: [Wire.pending(product: "com.example.premium.monthly")]),
            now: now)

        #expect(derived.state == .active)
        #expect(derived.productID == "com.example.premium.monthly")
        #expect(derived.latestTransactionID == "1002")
        #expect(derived.expiresAt == Clock.at(29 * day))
        #expect(SubscriptionEvent.events(from: stored, to: derived).map(\.kind) == [.productChanged])
    }

    @Test("A subscription whose only rows are upgraded grants nothing")
    func onlyUpgradedRows() throws {
        let upgraded = Wire.row(
            transaction: "1001", purchased: Clock.at(-10 * day), expires: Clock.at(20 * day),
            extra: #""is_upgraded": "true""#)

        let subscription = try deriveOne(Wire.answer(rows: [upgraded]), now: now)

        #expect(subscription.state == .expired)
        #expect(!subscription.entitled)
    }

    @Test("Free-trial and introductory-price periods are active and say so")
    func trialAndIntro() throws {
        let trial = Wire.row(
            transaction: "1001", purchased: Clock.at(-2 * day), expires: Clock.at(5 * day), trial: true)
        let intro = Wire.row(
            transaction: "1001", purchased: Clock.at(-2 * day), expires: Clock.at(5 * day), intro: true)

        let inTrial = try deriveOne(Wire.answer(rows: [trial], pending: [Wire.pending()]), now: now)
        let inIntro = try deriveOne(Wire.answer(rows: [intro], pending: [Wire.pending()]), now: now)

        #expect(inTrial.state == .active)
        #expect(inTrial.isTrialPeriod)
        #expect(!inTrial.isInIntroOfferPeriod)
        #expect(inIntro.state == .active)
        #expect(inIntro.isInIntroOfferPeriod)
        #expect(!inIntro.isTrialPeriod)
    }

    @Test("The same rows in any order give the same snapshot", arguments: [1, 2, 3, 4, 5, 6, 7, 8] as [UInt64])
    func unorderedRows(seed: UInt64) throws {
        var rows: [String] = []
        for period in 0..<8 {
            let start: TimeInterval = Double(period * 30 - 220) * day
            rows.append(
                Wire.row(
                    transaction: "\(1000 + period)", purchased: Clock.at(start), expires: Clock.at(start + 30 * day)))
        }
        // A tie on the expiry with an older purchase must not win either.
        rows.append(Wire.row(transaction: "0999", purchased: Clock.at(-200 * day), expires: Clock.at(20 * day)))
        let expected = try deriveOne(Wire.answer(rows: rows, pending: [Wire.pending()]), now: now)

        var generator = SeededGenerator(seed: seed)
        rows.shuffle(using: &generator)
        let shuffled = try deriveOne(Wire.answer(rows: rows, pending: [Wire.pending()]), now: now)

        #expect(shuffled == expected)
        #expect(shuffled.latestTransactionID == "1007")
        #expect(shuffled.expiresAt == Clock.at(20 * day))
    }

    @Test("One answer describes several subscriptions, each matched with its own renewal info")
    func severalSubscriptions() throws {
        let music = Wire.row(
            product: "com.example.music", transaction: "2001", original: "2000", purchased: Clock.at(-5 * day),
            expires: Clock.at(25 * day))
        let videoOld = Wire.row(
            product: "com.example.video", transaction: "3001", original: "3000", purchased: Clock.at(-70 * day),
            expires: Clock.at(-40 * day))
        let videoLast = Wire.row(
            product: "com.example.video", transaction: "3002", original: "3000", purchased: Clock.at(-40 * day),
            expires: Clock.at(-10 * day))
        let consumable =
            #"{"quantity": "1", "product_id": "com.example.coins", "transaction_id": "4001", "original_transaction_id": "4001", "purchase_date_ms": "1690000000000"}"#
        let answer = Wire.answer(
            rows: [videoLast, music, consumable, videoOld],
            pending: [
                Wire.pending(
                    original: "3000", product: "com.example.video", autoRenew: false, retrying: false, intent: "1"),
                Wire.pending(original: "2000", product: "com.example.music"),
            ])

        let subscriptions = try derive(answer, now: now)

        #expect(subscriptions.count == 2)
        let byID = Dictionary(uniqueKeysWithValues: subscriptions.map { ($0.originalTransactionID, $0) })
        let music2000 = try #require(byID["2000"])
        let video3000 = try #require(byID["3000"])
        #expect(music2000.state == .active)
        #expect(music2000.autoRenew == true)
        #expect(music2000.productID == "com.example.music")
        #expect(video3000.state == .expired)
        #expect(video3000.autoRenew == false)
        #expect(video3000.expirationIntent == "1")
        #expect(video3000.latestTransactionID == "3002")
        #expect(byID["4001"] == nil)
    }

    @Test("Several subscriptions come out the same whatever the row order", arguments: [21, 22, 23] as [UInt64])
    func severalSubscriptionsUnordered(seed: UInt64) throws {
        var rows: [String] = []
        for (index, original) in ["2000", "3000", "4000"].enumerated() {
            for period in 0..<4 {
                let start: TimeInterval = Double(period * 30 - 100 + index * 7) * day
                rows.append(
                    Wire.row(
                        product: "com.example.p\(index)", transaction: "\(original)\(period)", original: original,
                        purchased: Clock.at(start), expires: Clock.at(start + 30 * day)))
            }
        }
        let pending = [
            Wire.pending(original: "2000", product: "com.example.p0"),
            Wire.pending(original: "4000", product: "com.example.p2", autoRenew: false),
        ]
        let expected = try derive(Wire.answer(rows: rows, pending: pending), now: now)

        var generator = SeededGenerator(seed: seed)
        rows.shuffle(using: &generator)
        let shuffled = try derive(Wire.answer(rows: rows, pending: pending.reversed()), now: now)

        #expect(expected.count == 3)
        #expect(Set(shuffled) == Set(expected))
        #expect(Set(shuffled.compactMap(\.latestTransactionID)) == ["20003", "30003", "40003"])
    }

    @Test("Family-shared ownership is kept on the snapshot")
    func familyShared() throws {
        let row = Wire.row(
            transaction: "1001", purchased: Clock.at(-day), expires: Clock.at(29 * day), ownership: "FAMILY_SHARED")

        let subscription = try deriveOne(Wire.answer(rows: [row], pending: [Wire.pending()]), now: now)

        #expect(subscription.ownershipType == "FAMILY_SHARED")
        #expect(subscription.isFamilyShared)
        #expect(subscription.entitled)
    }

    @Test(
        "The environment of the body wins; the answering endpoint fills in when the body names none",
        arguments: [
            ("Sandbox", AppStoreEnvironment.production, AppStoreEnvironment.sandbox),
            ("Production", .sandbox, .production),
            (nil, .sandbox, .sandbox),
            (nil, nil, nil),
        ] as [(String?, AppStoreEnvironment?, AppStoreEnvironment?)]
    )
    func environmentKept(body: String?, answeredBy: AppStoreEnvironment?, expected: AppStoreEnvironment?) throws {
        let row = Wire.row(transaction: "1001", purchased: Clock.at(-day), expires: Clock.at(29 * day))

        let verified = DerivedAnswer(
            response: try decodeAnswer(Wire.answer(rows: [row], environment: body)), answeredBy: answeredBy, now: now)

        #expect(verified.environment == expected)
        #expect(verified.subscriptions.first?.environment == expected)
    }

    @Test("A valid answer with no subscription rows describes no subscriptions")
    func noSubscriptions() throws {
        let answer =
            #"{"status": 0, "environment": "Production", "receipt": {"receipt_type": "Production", "bundle_id": "com.example", "in_app": []}}"#

        let verified = DerivedAnswer(response: try decodeAnswer(answer), answeredBy: .production, now: now)

        #expect(verified.subscriptions.isEmpty)
        #expect(verified.latestReceipt == nil)
    }
}
