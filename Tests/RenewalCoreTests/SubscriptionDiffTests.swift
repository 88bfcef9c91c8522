import Foundation
import Testing

@testable import RenewalCore

/// `SubscriptionEvent.events(from:to:)` and `.invalidation(of:)`: stored vs derived.
@Suite struct SubscriptionDiffTests {
    static let e1 = Clock.at(-10 * Clock.day)
    static let e2 = Clock.at(20 * Clock.day)

    static func snapshot(
        _ state: SubscriptionState, expires: Date? = e2, autoRenew: Bool? = true,
        product: String? = "com.example.monthly",
        environment: AppStoreEnvironment? = .production
    ) -> SubscriptionSnapshot {
        SubscriptionSnapshot(
            originalTransactionID: "1000000000000001", productID: product, state: state, expiresAt: expires,
            autoRenew: autoRenew, environment: environment)
    }

    @Test("The first successful check emits exactly one verified event, whatever the state")
    func firstCheck() throws {
        for state in SubscriptionState.allCases where state != .unverified {
            let derived = Self.snapshot(state)

            let events = SubscriptionEvent.events(from: nil, to: derived)

            #expect(events.count == 1)
            let event = try #require(events.first)
            #expect(event.kind == .verified)
            #expect(event.fromState == .unverified)
            #expect(event.toState == state)
            #expect(event.oldExpiresAt == nil)
            #expect(event.newExpiresAt == derived.expiresAt)
            #expect(event.originalTransactionID == "1000000000000001")
            #expect(event.environment == .production)
        }
    }

    @Test("A stored unverified placeholder becoming verified emits one verified event, not a transition")
    func placeholderVerified() {
        let placeholder = Self.snapshot(.unverified, expires: nil, autoRenew: nil, product: "other")

        let events = SubscriptionEvent.events(from: placeholder, to: Self.snapshot(.active))

        #expect(events.map(\.kind) == [.verified])
    }

    @Test(
        "A re-check that changes nothing emits nothing",
        arguments: SubscriptionState.allCases.filter { $0 != .unverified })
    func identicalRecheck(state: SubscriptionState) {
        let stored = Self.snapshot(state)
        #expect(SubscriptionEvent.events(from: stored, to: stored).isEmpty)
    }

    static let transitions: [(String, SubscriptionSnapshot, SubscriptionSnapshot, [SubscriptionEvent.Kind])] = [
        ("later expiry", snapshot(.active, expires: e1), snapshot(.active, expires: e2), [.renewed]),
        ("earlier expiry is not a renewal", snapshot(.active, expires: e2), snapshot(.active, expires: e1), []),
        ("period over", snapshot(.active), snapshot(.expired), [.expired]),
        ("renewal failed, no grace", snapshot(.active), snapshot(.billingRetry), [.billingIssue]),
        ("renewal failed, grace", snapshot(.active), snapshot(.gracePeriod), [.gracePeriodStarted]),
        ("grace over", snapshot(.gracePeriod), snapshot(.billingRetry), [.billingIssue]),
        (
            "recovered in grace", snapshot(.gracePeriod, expires: e1), snapshot(.active, expires: e2),
            [.billingRecovered]
        ),
        (
            "recovered in retry", snapshot(.billingRetry, expires: e1), snapshot(.active, expires: e2),
            [.billingRecovered]
        ),
        ("Apple gave up", snapshot(.billingRetry), snapshot(.expired), [.expired]),
        ("resubscribed", snapshot(.expired, expires: e1), snapshot(.active, expires: e2), [.renewed]),
        ("refund", snapshot(.active), snapshot(.revoked), [.refunded]),
        ("refund of a lapsed period", snapshot(.expired), snapshot(.revoked), [.refunded]),
        ("refund reversed", snapshot(.revoked), snapshot(.active), [.refundReversed]),
        (
            "refund reversed on the same transaction", with(snapshot(.revoked), transaction: "t1"),
            with(snapshot(.active), transaction: "t1"), [.refundReversed]
        ),
        (
            "a new purchase after a refund", with(snapshot(.revoked, expires: e1), transaction: "t1"),
            with(snapshot(.active, expires: e2), transaction: "t2"), [.resubscribed]
        ),
        (
            "a new purchase after a refund, already over", with(snapshot(.revoked, expires: e1), transaction: "t1"),
            with(snapshot(.expired, expires: e2), transaction: "t2"), [.expired]
        ),
        ("rejected", snapshot(.active), snapshot(.invalid), [.invalidated]),
        ("refunded, then rejected", snapshot(.revoked), snapshot(.invalid), [.invalidated]),
        (
            "auto-renew off", snapshot(.active, autoRenew: true), snapshot(.active, autoRenew: false),
            [.autoRenewDisabled]
        ),
        ("auto-renew on", snapshot(.active, autoRenew: false), snapshot(.active, autoRenew: true), [.autoRenewEnabled]),
        ("auto-renew now known", snapshot(.active, autoRenew: nil), snapshot(.active, autoRenew: false), []),
        ("auto-renew no longer said", snapshot(.expired, autoRenew: true), snapshot(.expired, autoRenew: nil), []),
        (
            "product changed", snapshot(.active, product: "basic"), snapshot(.active, product: "premium"),
            [.productChanged]
        ),
        (
            "lapsed after turning auto-renew off", snapshot(.active, autoRenew: true),
            snapshot(.expired, autoRenew: false),
            [.expired, .autoRenewDisabled]
        ),
        (
            "upgrade with a later expiry", snapshot(.active, expires: e1, product: "basic"),
            snapshot(.active, expires: e2, product: "premium"), [.renewed, .productChanged]
        ),
        (
            "environment alone", snapshot(.active, environment: .production), snapshot(.active, environment: .sandbox),
            []
        ),
    ]

    /// `snapshot` with its current transaction id set.
    static func with(_ snapshot: SubscriptionSnapshot, transaction: String) -> SubscriptionSnapshot {
        var snapshot = snapshot
        snapshot.latestTransactionID = transaction
        return snapshot
    }

    @Test("Each transition emits the events named for it", arguments: transitions)
    func transition(
        label: String, stored: SubscriptionSnapshot, derived: SubscriptionSnapshot, expected: [SubscriptionEvent.Kind]
    ) {
        let events = SubscriptionEvent.events(from: stored, to: derived)

        #expect(events.map(\.kind) == expected, "\(label)")
        for event in events {
            #expect(event.fromState == stored.state)
            #expect(event.toState == derived.state)
            #expect(event.oldExpiresAt == stored.expiresAt)
            #expect(event.newExpiresAt == derived.expiresAt)
            #expect(event.productID == derived.productID)
            #expect(event.originalTransactionID == derived.originalTransactionID)
        }
    }

    @Test("Every kind of event is reachable")
    func everyKindReachable() {
        var reached: Set<SubscriptionEvent.Kind> = []
        for (_, stored, derived, _) in Self.transitions {
            reached.formUnion(SubscriptionEvent.events(from: stored, to: derived).map(\.kind))
        }
        reached.formUnion(SubscriptionEvent.events(from: nil, to: Self.snapshot(.active)).map(\.kind))
        if let invalidation = SubscriptionEvent.invalidation(of: Self.snapshot(.active)) {
            reached.insert(invalidation.kind)
        }
        reached.insert(SubscriptionEvent.unlistedExpiry(of: Self.snapshot(.active)).kind)
        reached.insert(SubscriptionEvent.noSubscription(from: .unverified, environment: .production).kind)
        let adoption = PurchaseAdoption(
            originalTransactionID: "1", environment: .production, bundleID: nil, productID: nil, appAccountToken: nil,
            at: Date(timeIntervalSince1970: 0))
        reached.insert(SubscriptionEvent.purchaseUnclaimed(adoption).kind)
        reached.insert(
            SubscriptionEvent.purchaseClaimed(
                originalTransactionID: "1", productID: nil, state: .active, expiresAt: nil, environment: nil
            ).kind)

        #expect(reached == Set(SubscriptionEvent.Kind.allCases))
    }

    @Test("Kinds carry the contract's strings")
    func kindRawValues() {
        #expect(
            SubscriptionEvent.Kind.allCases.map(\.rawValue) == [
                "verified", "renewed", "expired", "billing_issue", "grace_period_started", "billing_recovered",
                "auto_renew_disabled", "auto_renew_enabled", "product_changed", "refunded", "refund_reversed",
                "resubscribed",
                "invalidated", "expired_unlisted", "no_subscription", "purchase_unclaimed", "purchase_claimed",
            ])
        #expect(
            SubscriptionState.allCases.map(\.rawValue) == [
                "unverified", "active", "grace_period", "billing_retry", "expired", "revoked", "invalid",
                "no_subscription",
            ])
        #expect(SubscriptionState.allCases.filter(\.grantsAccess) == [.active, .gracePeriod])
    }

    // MARK: invalidation

    @Test(
        "A rejected receipt invalidates its stored subscription",
        arguments: [SubscriptionState.active, .gracePeriod, .expired, .revoked])
    func invalidation(state: SubscriptionState) throws {
        let stored = Self.snapshot(state)

        let event = try #require(SubscriptionEvent.invalidation(of: stored))

        #expect(event.kind == .invalidated)
        #expect(event.fromState == state)
        #expect(event.toState == .invalid)
        #expect(event.originalTransactionID == stored.originalTransactionID)
        #expect(event.productID == stored.productID)
        #expect(event.oldExpiresAt == stored.expiresAt)
        #expect(event.environment == .production)
    }

    @Test("A never-verified receipt that Apple rejects is invalidated from unverified, with no transaction id")
    func invalidationOfPlaceholder() throws {
        let event = try #require(SubscriptionEvent.invalidation(of: nil))

        #expect(event.kind == .invalidated)
        #expect(event.fromState == .unverified)
        #expect(event.toState == .invalid)
        #expect(event.originalTransactionID == nil)
    }

    @Test("A receipt already invalid is not invalidated again")
    func invalidationIsIdempotent() {
        #expect(SubscriptionEvent.invalidation(of: Self.snapshot(.invalid)) == nil)
    }

    @Test("An event encodes with the contract's kind string")
    func eventEncodes() throws {
        let event = try #require(
            SubscriptionEvent.events(from: Self.snapshot(.active), to: Self.snapshot(.gracePeriod)).first)

        let json = String(decoding: try JSONEncoder().encode(event), as: UTF8.self)

        #expect(json.contains(#""kind":"grace_period_started""#))
        #expect(json.contains(#""toState":"grace_period""#))
        #expect(try JSONDecoder().decode(SubscriptionEvent.self, from: Data(json.utf8)) == event)
    }
}
