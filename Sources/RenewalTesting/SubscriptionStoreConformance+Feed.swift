import Foundation
import RenewalCore
import RenewalStorage
import Testing

extension SubscriptionStoreConformance {
    static func notification(
        _ uuid: String, about otid: String?, signedAt: Date, environment: AppStoreEnvironment = .production
    ) -> FeedNotificationRecord {
        FeedNotificationRecord(
            uuid: uuid, environment: environment, type: "DID_RENEW", subtype: nil, originalTransactionID: otid,
            signedAt: signedAt)
    }

    /// The change feed's records: each notification once, its receipt due unless a later valid answer
    /// already showed it, unknown subscriptions listed; the cursor only forward.
    static func feedNotificationsAndCursor(_ store: any RunHistoryStore) async throws {
        try await migrate(store)
        for user in ["u1", "u2"] { try await importReceipt(store, user: user) }
        let u1 = try await stored(store, user: "u1")
        let u2 = try await stored(store, user: "u2")
        // Both verified at minute 1, next check far away.
        try await store.save(
            verifiedWrite(
                u1,
                subscriptions: [subscription("otid-1", product: "p", state: .active, expiresAt: at(minutes: 9_000))],
                nextCheckAt: at(minutes: 5_000)))
        try await store.save(
            verifiedWrite(
                u2,
                subscriptions: [subscription("otid-2", product: "p", state: .active, expiresAt: at(minutes: 9_000))],
                nextCheckAt: at(minutes: 5_000)))

        let now = at(minutes: 10)
        let result = try await store.recordFeedNotifications(
            [
                notification("n-1", about: "otid-1", signedAt: at(minutes: 5)),
                // Signed before u2's last valid answer (minute 1): that answer showed it already.
                notification("n-2", about: "otid-2", signedAt: at(minutes: -5)),
                notification("n-3", about: "otid-unknown", signedAt: at(minutes: 6)),
                notification("n-4", about: nil, signedAt: at(minutes: 6)),
            ], runID: nil, now: now, applying: nil)
        #expect(result.new == 4 && result.madeDue == 1, "\(result)")
        #expect(result.unmatched.map(\.uuid) == ["n-3"])
        #expect(try await stored(store, user: "u1").nextCheckAt == now)
        #expect(try await stored(store, user: "u2").nextCheckAt == at(minutes: 5_000))

        // The same page again (an overlapping window): nothing new, nothing acted on.
        let again = try await store.recordFeedNotifications(
            [notification("n-1", about: "otid-1", signedAt: at(minutes: 5))], runID: nil, now: at(minutes: 11),
            applying: nil)
        #expect(again.new == 0 && again.madeDue == 0)

        #expect(try await store.feedCursor(environment: .production) == nil)
        try await store.advanceFeedCursor(environment: .production, from: at(minutes: -15), to: now, now: now)
        try await store.advanceFeedCursor(
            environment: .production, from: at(minutes: -30), to: at(minutes: -5), now: now)
        #expect(try await store.feedCursor(environment: .production) == now, "never backwards")
        var activity = try await store.feedActivity(environment: .production, since: at(minutes: 0))
        #expect(activity.pulledSince == at(minutes: -15) && activity.notified && !activity.renewed)
        // A window starting after the cursor (a gap) restarts the unbroken span.
        try await store.advanceFeedCursor(
            environment: .production, from: at(minutes: 100), to: at(minutes: 120), now: at(minutes: 120))
        activity = try await store.feedActivity(environment: .production, since: at(minutes: 60))
        #expect(activity.pulledSince == at(minutes: 100) && !activity.notified)
        #expect(try await store.feedCursor(environment: .sandbox) == nil)
    }

    /// Falling back to polling moves each receipt the feed's schedule put later back to its polling
    /// check, in that environment only, once.
    static func fallBackToPollingMovesReceiptsBack(_ store: any RunHistoryStore) async throws {
        try await migrate(store)
        for user in ["stretched", "plain", "sandbox"] { try await importReceipt(store, user: user) }
        for (user, environment, polling) in [
            ("stretched", AppStoreEnvironment.production, at(minutes: 600)),
            ("plain", .production, nil), ("sandbox", .sandbox, at(minutes: 700)),
        ] {
            var write = verifiedWrite(
                try await stored(store, user: user),
                subscriptions: [
                    subscription(
                        "otid-\(user)", product: "p", state: .active, expiresAt: at(minutes: 90_000),
                        environment: environment, nextCheckAt: at(minutes: 50_000))
                ], environment: environment, nextCheckAt: at(minutes: 50_000))
            write.pollingCheckAt = polling
            try await store.save(write)
        }
        #expect(try await store.fallBackToPolling(environment: .production) == 1)
        #expect(try await stored(store, user: "stretched").nextCheckAt == at(minutes: 600))
        #expect(try await stored(store, user: "stretched").subscriptions.first?.nextCheckAt == at(minutes: 600))
        #expect(try await stored(store, user: "plain").nextCheckAt == at(minutes: 50_000))
        #expect(try await stored(store, user: "sandbox").nextCheckAt == at(minutes: 50_000))
        #expect(try await store.fallBackToPolling(environment: .production) == 0, "once")
        #expect(try await store.fallBackToPolling(environment: .sandbox) == 1)
        #expect(try await stored(store, user: "sandbox").nextCheckAt == at(minutes: 700))
    }
}

extension SubscriptionStoreConformance {
    /// A notification's signed data about `otid` as Apple signed it at `signedAt`.
    static func signedNotification(
        _ uuid: String, _ type: String, about otid: String, signedAt: Date, state evidence: SubscriptionEvidence
    ) -> FeedNotificationRecord {
        var evidence = evidence
        evidence.signedAt = signedAt
        return FeedNotificationRecord(
            uuid: uuid, environment: .production, type: type, subtype: nil, originalTransactionID: otid,
            signedAt: signedAt,
            evidence: NotificationEvidence(
                type: type, subtype: nil, signedDate: signedAt, environment: .production, bundleID: nil,
                subscription: evidence))
    }

    static func evidence(_ otid: String, expiresAt: Date, refundedAt: Date? = nil, autoRenew: Bool = true)
        -> SubscriptionEvidence
    {
        SubscriptionEvidence(
            originalTransactionID: otid, productID: "p", expiresAt: expiresAt, cancelledAt: refundedAt,
            autoRenew: autoRenew, environment: .production)
    }

    /// Notifications applied from their signed data: a newer one changes the subscription (and
    /// records its change); one signed at or before what is stored changes nothing and makes nothing
    /// due; two in one page apply in Apple's order whatever their order in the page.
    static func feedNotificationsApplyInApplesOrder(_ store: any RunHistoryStore) async throws {
        try await migrate(store)
        try await importReceipt(store, user: "u1")
        let u1 = try await stored(store, user: "u1")
        let expiry = at(minutes: 40_000)
        var held = subscription("otid-1", product: "p", state: .active, expiresAt: expiry)
        held.appleSignedAt = at(minutes: 1)
        try await store.save(verifiedWrite(u1, subscriptions: [held], nextCheckAt: at(minutes: 5_000)))
        let context = EntitlementDecision.Context(
            now: at(minutes: 20), random: 0.5, runID: nil, leaseOwner: nil, rules: EntitlementDecision.Rules())

        // Signed before the stored answer (minute 1), saying something else: nothing changes, nothing is due.
        let older = try await store.recordFeedNotifications(
            [
                signedNotification(
                    "o-1", "REFUND", about: "otid-1", signedAt: at(minutes: 0.5),
                    state: evidence(
                        "otid-1", expiresAt: expiry, refundedAt: at(minutes: 0.4)))
            ],
            runID: nil, now: at(minutes: 20), applying: context)
        #expect(older.new == 1 && older.known == 1 && older.applied.isEmpty && older.madeDue == 0, "\(older)")
        var now = try await stored(store, user: "u1")
        #expect(now.nextCheckAt == at(minutes: 5_000))
        #expect(now.subscriptions.first?.snapshot.state == .active)

        // Auto-renew turned off at minute 10, then a refund at minute 11, listed newest first.
        let page = try await store.recordFeedNotifications(
            [
                signedNotification(
                    "n-2", "REFUND", about: "otid-1", signedAt: at(minutes: 11),
                    state: evidence("otid-1", expiresAt: expiry, refundedAt: at(minutes: 11), autoRenew: false)),
                signedNotification(
                    "n-1", "DID_CHANGE_RENEWAL_STATUS", about: "otid-1", signedAt: at(minutes: 10),
                    state: evidence("otid-1", expiresAt: expiry, autoRenew: false)),
            ], runID: nil, now: at(minutes: 20), applying: context)
        #expect(page.applied.count == 2 && page.known == 0 && page.madeDue == 0, "\(page)")
        let kinds = page.applied.map { $0.decision.changes.map(\.kind) }
        #expect(kinds == [[.autoRenewDisabled], [.refunded]], "\(kinds)")
        now = try await stored(store, user: "u1")
        #expect(now.subscriptions.first?.snapshot.state == .revoked)
        #expect(now.subscriptions.first?.appleSignedAt == at(minutes: 11))
        #expect(now.source == .serverAPI)
    }
}
