import Foundation
import RenewalCore
import RenewalStorage
import Testing

/// Issue 44's storage: purchases adopted from the change feed, tokens registered by import, claims.
extension SubscriptionStoreConformance {
    static let adoptionChecks: [Check] = [
        Check(
            "adoption: an unheld subscription's verified notification creates it unclaimed, due now, once",
            adoptionCreatesUnclaimedOnce),
        Check(
            "tokens: a token-only line registers it, a second user's refused; a registered token claims, now or later",
            tokensClaimAdoptedPurchases),
        Check(
            "claim by hand: unclaimed to a user, another's refused and recorded unless reassigned, unknown not held",
            claimByHand),
    ]

    /// A verified `SUBSCRIBED` notification about `otid` with an auto-renewable subscription's signed data.
    static func adoptable(
        _ uuid: String, about otid: String, token: String?, signedAt: Date = at(minutes: 1),
        autoRenewable: Bool = true
    ) -> FeedNotificationRecord {
        var record = signedNotification(
            uuid, "SUBSCRIBED", about: otid, signedAt: signedAt, state: evidence(otid, expiresAt: at(minutes: 40_000)))
        record.evidence?.appAccountToken = token
        record.evidence?.isAutoRenewableSubscription = autoRenewable
        return record
    }

    static func adoptionContext(_ runID: String, now: Date) -> EntitlementDecision.Context {
        EntitlementDecision.Context(
            now: now, random: 0.5, runID: runID, leaseOwner: nil, rules: EntitlementDecision.Rules())
    }

    static func adopt(
        _ store: any RunHistoryStore, _ records: [FeedNotificationRecord], runID: String = "run-a",
        now: Date = at(minutes: 10)
    ) async throws -> FeedRecordResult {
        try await store.recordFeedNotifications(
            records, runID: runID, now: now, applying: adoptionContext(runID, now: now))
    }

    static func adoptionCreatesUnclaimedOnce(_ store: any RunHistoryStore) async throws {
        try await migrate(store)
        let now = at(minutes: 10)
        let result = try await adopt(store, [adoptable("n-1", about: "otid-a", token: nil)], now: now)
        #expect(result.adopted == 1 && result.claimedAtAdoption == 0 && result.unmatched.isEmpty, "\(result)")
        let row = try await stored(store, user: "adopted:otid-a")
        #expect(row.nextCheckAt == now && row.source == .serverAPI && row.originalTransactionID == "otid-a")
        #expect(row.environment == .production && row.latestReceipt == nil)
        let changes = try await store.changes(ofRun: "run-a")
        #expect(changes.map(\.event.kind) == [.purchaseUnclaimed] && changes.first?.userID == "adopted:otid-a")
        #expect(changes.first?.event.originalTransactionID == "otid-a" && changes.first?.event.productID == "p")

        // The same notification again, and another one about the same subscription: still one.
        let again = try await adopt(
            store, [adoptable("n-1", about: "otid-a", token: nil), adoptable("n-2", about: "otid-a", token: nil)],
            runID: "run-b", now: at(minutes: 11))
        #expect(again.adopted == 0 && again.unmatched.isEmpty, "\(again)")
        let all = try await allPages(store, .backfill(BackfillSelector(all: true)), pageSize: 10)
        #expect(all.count == 1)
        #expect(try await store.changes(ofRun: "run-b").allSatisfy { $0.event.kind != .purchaseUnclaimed })

        // A dry run writes nothing; a purchase that is not an auto-renewable subscription is not adopted.
        let dry = try await store.recordFeedNotifications(
            [adoptable("n-3", about: "otid-b", token: nil)], runID: nil, now: now, applying: nil)
        #expect(dry.adopted == 0 && dry.unmatched.map(\.uuid) == ["n-3"])
        let other = try await adopt(store, [adoptable("n-4", about: "otid-c", token: nil, autoRenewable: false)])
        #expect(other.adopted == 0 && other.unmatched.map(\.uuid) == ["n-4"])
        #expect(try await allPages(store, .backfill(BackfillSelector(all: true)), pageSize: 10).count == 1)
    }

    static func tokensClaimAdoptedPurchases(_ store: any RunHistoryStore) async throws {
        try await migrate(store)
        let t1 = "11111111-1111-4111-8111-111111111111"
        let t2 = "22222222-2222-4222-8222-222222222222"
        let t3 = "33333333-3333-4333-8333-333333333333"
        func token(_ user: String, _ token: String) -> ReceiptImport {
            ReceiptImport(userID: user, latestReceipt: nil, appAccountToken: token)
        }
        #expect(try await store.importReceipts([token("alice", t1)], now: origin) == [.tokenRecorded])
        #expect(try await store.importReceipts([token("alice", t1)], now: origin) == [.tokenRecorded])
        #expect(try await store.importReceipts([token("bob", t1)], now: origin) == [.tokenConflict])
        #expect(try await allPages(store, .backfill(BackfillSelector(all: true)), pageSize: 10).isEmpty)

        // Registered before the purchase is adopted: the user's at once.
        let first = try await adopt(store, [adoptable("n-1", about: "otid-a", token: t1)])
        #expect(first.adopted == 1 && first.claimedAtAdoption == 1, "\(first)")
        #expect(try await stored(store, user: "alice").originalTransactionID == "otid-a")
        let changes = try await store.changes(ofRun: "run-a")
        #expect(changes.map(\.event.kind) == [.purchaseClaimed] && changes.first?.userID == "alice")

        // Registered after: the import line claims the purchase waiting unclaimed.
        _ = try await adopt(store, [adoptable("n-2", about: "otid-b", token: t2)], runID: "run-b")
        #expect(try await store.importReceipts([token("carol", t2)], now: at(minutes: 20)) == [.tokenRecorded])
        #expect(try await stored(store, user: "carol").originalTransactionID == "otid-b")

        // A user who holds a receipts row already gets it as its owner; the row keeps its reserved key.
        try await importReceipt(store, user: "dave")
        _ = try await adopt(store, [adoptable("n-3", about: "otid-c", token: t3)], runID: "run-c")
        #expect(try await store.importReceipts([token("dave", t3)], now: at(minutes: 20)) == [.tokenRecorded])
        #expect(try await stored(store, user: "adopted:otid-c").userID == "dave")
        // Dave's selection (backfill --user dave) takes his own row and the one claimed for him.
        let daves = try await store.nextBatch(
            .backfill(BackfillSelector(userIDs: ["dave"])), after: nil, limit: 3, lease: nil)
        #expect(daves.count == 2 && daves.allSatisfy { $0.userID == "dave" }, "\(daves.map(\.userID))")
        #expect(daves.contains { $0.latestReceipt == "receipt-of-dave" })

        // The app's server stores the purchase late, by transaction id: the line claims the adopted row
        // instead of storing a second one for the same subscription.
        _ = try await adopt(store, [adoptable("n-4", about: "otid-d", token: nil)], runID: "run-d")
        let late = ReceiptImport(userID: "gina", latestReceipt: nil, originalTransactionID: "otid-d")
        #expect(try await store.importReceipts([late], now: at(minutes: 21)) == [.claimed])
        #expect(try await store.importReceipts([late], now: at(minutes: 22)) == [.claimed])
        let rows = try await allPages(store, .backfill(BackfillSelector(all: true)), pageSize: 20)
        #expect(rows.filter { $0.originalTransactionID == "otid-d" }.map(\.userID) == ["gina"])
    }

    static func claimByHand(_ store: any RunHistoryStore) async throws {
        try await migrate(store)
        let claims = try #require(store as? any PurchaseClaiming)
        _ = try await adopt(store, [adoptable("n-1", about: "otid-a", token: nil)])
        func claim(_ id: String, _ user: String, reassign: Bool = false) async throws -> ClaimResult {
            try await claims.claim(
                originalTransactionID: id, user: user, reassign: reassign, method: .hand, runID: "run-h",
                queueWebhooks: false, now: at(minutes: 30))
        }
        let first = try await claim("otid-a", "erin")
        #expect(first.changed && first.previousOwner == nil && first.userID == "erin")
        #expect(try await stored(store, user: "erin").originalTransactionID == "otid-a")
        #expect(try await claim("otid-a", "erin").changed == false)
        await #expect(throws: ClaimError.ownedByAnotherUser(originalTransactionID: "otid-a", owner: "erin")) {
            try await claim("otid-a", "frank")
        }
        #expect(try await store.conflicts(ofRun: "run-h").map(\.claimantUserID) == ["frank"])
        let moved = try await claim("otid-a", "frank", reassign: true)
        #expect(moved.changed && moved.previousOwner == "erin")
        #expect(try await stored(store, user: "frank").originalTransactionID == "otid-a")
        let kinds = try await store.changes(ofRun: "run-h").map { "\($0.event.kind.rawValue) \($0.userID)" }
        #expect(kinds == ["purchase_claimed erin", "purchase_claimed frank"])
        await #expect(throws: ClaimError.notHeld(originalTransactionID: "otid-none")) {
            try await claim("otid-none", "erin")
        }
        await #expect(throws: ClaimError.reservedUserID("adopted:otid-x")) {
            try await claim("otid-a", "adopted:otid-x")
        }
    }
}
