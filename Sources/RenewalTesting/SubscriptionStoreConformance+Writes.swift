import Foundation
import RenewalCore
import RenewalStorage
import Testing

/// Checks of what `save`, `releaseLeases`, `owners`, `statusPage`, the runs and the run lock write and read.
extension SubscriptionStoreConformance {
    public static func saveWritesEverything(_ store: any RunHistoryStore) async throws {
        try await migrate(store)
        try await importReceipt(store, user: "u", product: "p")
        let now = at(minutes: 1)
        // Given a receipt leased by A within a run
        let receipt = try #require(
            try await store.nextBatch(.due(asOf: now), after: nil, limit: 1, lease: lease("A", now: now)).first
        )
        let subscriptions = [
            subscription("otid-1", product: "p", state: .active, expiresAt: at(minutes: 40_000), verifiedAt: now),
            subscription("otid-2", product: "q", state: .gracePeriod, expiresAt: at(minutes: -10), verifiedAt: now),
        ]
        let change = SubscriptionEvent(
            kind: .verified, originalTransactionID: "otid-1", productID: "p", fromState: .unverified, toState: .active,
            oldExpiresAt: nil, newExpiresAt: at(minutes: 40_000), environment: .production
        )
        let conflict = OwnershipConflict(
            originalTransactionID: "otid-9", ownerUserID: "other", claimantUserID: "u", productID: "p")
        var write = verifiedWrite(
            receipt, subscriptions: subscriptions, runID: "run-1", checkedAt: now, nextCheckAt: at(minutes: 30_000),
            newLatestReceipt: "newer", leaseOwner: "A"
        )
        write.changes = [change]
        write.conflicts = [conflict]
        write.consecutiveMalformed = 1
        write.failure = CheckFailure(reason: "apple_status_21002", message: "Apple could not read the receipt data.")
        // When the check is saved
        try await store.save(write)
        // Then every part is stored
        let saved = try await stored(store, user: "u")
        #expect(saved.latestReceipt == "newer")
        #expect(saved.status == .verified)
        #expect(saved.environment == .production)
        #expect(saved.nextCheckAt == at(minutes: 30_000))
        #expect(saved.lastVerifiedAt == now)
        #expect(saved.consecutiveFailures == 0)
        #expect(saved.consecutiveMalformed == 1)
        #expect(saved.importedProductID == "p")
        #expect(saved.subscriptions == subscriptions)
        let changes = try await store.changes(ofRun: "run-1")
        #expect(changes == [RecordedChange(userID: "u", event: change, ownershipType: "PURCHASED", occurredAt: now)])
        let failures = try await store.failures(ofRun: "run-1")
        #expect(
            failures == [
                RecordedFailure(
                    receiptID: receipt.id, userID: "u", failure: try #require(write.failure), occurredAt: now)
            ])
        #expect(try await store.conflicts(ofRun: "run-1") == [conflict])
        // And the lease is released: B takes the receipt before A's lease would have ended
        let backfill = ReceiptSelection.backfill(BackfillSelector(all: true))
        #expect(
            try await store.nextBatch(backfill, after: nil, limit: 1, lease: lease("B", now: now)).map(\.id) == [
                receipt.id
            ])
    }

    public static func saveBatchWritesHeldLeasesOnly(_ store: any RunHistoryStore) async throws {
        try await migrate(store)
        for user in ["u1", "u2", "u3"] { try await importReceipt(store, user: user) }
        let now = at(minutes: 1)
        // Given three receipts leased by A, the second then taken over by B (A's lease ended)
        let leased = try await store.nextBatch(.due(asOf: now), after: nil, limit: 3, lease: lease("A", now: now))
        #expect(leased.count == 3)
        let later = now.addingTimeInterval(601)
        let taken = try await store.nextBatch(.due(asOf: later), after: nil, limit: 1, lease: lease("B", now: later))
        let lost = try #require(taken.first)
        // When A writes all three in one batch, each claiming its own new subscription
        let items = leased.map { receipt in
            let evidence = AppleEvidence(
                environment: .production, bundleID: nil, latestReceipt: nil,
                subscriptions: [
                    SubscriptionEvidence(
                        originalTransactionID: "otid-\(receipt.userID)", productID: "p",
                        expiresAt: at(minutes: 40_000), autoRenew: true, environment: .production)
                ])
            let context = EntitlementDecision.Context(
                now: now, random: 0, runID: "run-1", leaseOwner: "A", rules: EntitlementDecision.Rules())
            return PendingSave.deciding(
                EntitlementDecision.Request(receipt: receipt, answer: .verified(evidence), context: context))
        }
        // (each result named by its user, or "owned elsewhere" when another receipt held its subscription)
        let results = try await store.saveBatch(items).map { decision in
            decision.map { $0.update.conflicts.isEmpty ? $0.update.userID : "owned elsewhere" }
        }
        // Then the two it still held are written, the lost one gives nil and is untouched
        #expect(results == leased.map { $0.id == lost.id ? nil : $0.userID })
        for receipt in leased {
            let saved = try await stored(store, user: receipt.userID)
            if receipt.id == lost.id {
                #expect(saved.status == .unverified && saved.subscriptions.isEmpty)
            } else {
                #expect(
                    saved.status == .verified
                        && saved.subscriptions.map(\.snapshot.originalTransactionID) == ["otid-\(receipt.userID)"])
            }
        }
        #expect(
            try await store.owners(ofOriginalTransactionIDs: ["otid-\(lost.userID)"]).isEmpty,
            "the lost item claimed nothing")
    }

    public static func saveIsAtomic(_ store: any RunHistoryStore) async throws {
        try await migrate(store)
        let receipt = try await importReceipt(store, user: "u")
        // Given a write whose receipt row does not exist
        var write = verifiedWrite(receipt, subscriptions: [], runID: "run-1")
        write.receiptID = receipt.id + 1000
        write.changes = [
            SubscriptionEvent(
                kind: .expired, originalTransactionID: "x", productID: "p", fromState: .active, toState: .expired,
                oldExpiresAt: origin, newExpiresAt: origin, environment: .production
            )
        ]
        write.failure = CheckFailure(reason: "timeout", message: "Apple did not answer in time.")
        write.conflicts = [
            OwnershipConflict(originalTransactionID: "x", ownerUserID: "o", claimantUserID: "u", productID: nil)
        ]
        // When it is saved, it fails, and nothing of it remains
        await #expect(throws: SubscriptionStoreError.self) { try await store.save(write) }
        #expect(try await store.changes(ofRun: "run-1").isEmpty)
        #expect(try await store.failures(ofRun: "run-1").isEmpty)
        #expect(try await store.conflicts(ofRun: "run-1").isEmpty)
        #expect(try await stored(store, user: "u") == receipt)
    }

    public static func latestReceiptReplacedOnlyWhenGiven(_ store: any RunHistoryStore) async throws {
        try await migrate(store)
        let receipt = try await importReceipt(store, user: "u", receipt: "original")
        try await store.save(
            verifiedWrite(receipt, subscriptions: [], environment: .sandbox, checkedAt: at(minutes: 1)))
        #expect(try await stored(store, user: "u").latestReceipt == "original")
        try await store.save(
            verifiedWrite(receipt, subscriptions: [], checkedAt: at(minutes: 2), newLatestReceipt: "newer"))
        #expect(try await stored(store, user: "u").latestReceipt == "newer")
        // A failed check keeps the receipt, the last verification time and the environment
        var failed = verifiedWrite(receipt, subscriptions: [], environment: nil, checkedAt: at(minutes: 3))
        failed.verifiedAt = nil
        failed.consecutiveFailures = 2
        failed.failure = CheckFailure(reason: "http_503", message: "Apple answered 503.")
        try await store.save(failed)
        let after = try await stored(store, user: "u")
        #expect(after.latestReceipt == "newer")
        #expect(after.lastVerifiedAt == at(minutes: 2))
        #expect(after.environment == .production)
        #expect(after.consecutiveFailures == 2)
    }

    public static func foreignSubscriptionIsNotOverwritten(_ store: any RunHistoryStore) async throws {
        try await migrate(store)
        let owner = try await importReceipt(store, user: "owner")
        let claimant = try await importReceipt(store, user: "claimant")
        let original = subscription("shared", product: "p", state: .active, expiresAt: at(minutes: 1000))
        try await store.save(verifiedWrite(owner, subscriptions: [original]))
        // When another user's receipt resolves to the same original transaction id
        let claim = subscription("shared", product: "other", state: .revoked, expiresAt: at(minutes: 5))
        try await store.save(verifiedWrite(claimant, subscriptions: [claim], checkedAt: at(minutes: 2)))
        // Then the owner's row is untouched and the claimant owns nothing
        #expect(try await stored(store, user: "owner").subscriptions == [original])
        #expect(try await stored(store, user: "claimant").subscriptions.isEmpty)
        #expect(
            try await store.owners(ofOriginalTransactionIDs: ["shared"]) == [
                "shared": SubscriptionOwner(receiptID: owner.id, userID: "owner")
            ])
    }

    public static func ownersMapsTransactionIDs(_ store: any RunHistoryStore) async throws {
        try await migrate(store)
        let first = try await importReceipt(store, user: "u1")
        let second = try await importReceipt(store, user: "u2")
        try await store.save(
            verifiedWrite(first, subscriptions: [subscription("t1", product: "p", state: .active, expiresAt: nil)]))
        try await store.save(
            verifiedWrite(second, subscriptions: [subscription("t2", product: "p", state: .expired, expiresAt: nil)]))
        let owners = try await store.owners(ofOriginalTransactionIDs: ["t1", "t2", "unknown", "t1"])
        #expect(
            owners == [
                "t1": SubscriptionOwner(receiptID: first.id, userID: "u1"),
                "t2": SubscriptionOwner(receiptID: second.id, userID: "u2"),
            ])
        #expect(try await store.owners(ofOriginalTransactionIDs: []).isEmpty)
    }

    public static func releaseLeasesTouchesOnlyLeases(_ store: any RunHistoryStore) async throws {
        try await migrate(store)
        let receipt = try await importReceipt(store, user: "u")
        try await store.save(
            verifiedWrite(
                receipt, subscriptions: [subscription("t", product: "p", state: .active, expiresAt: nil)],
                nextCheckAt: at(minutes: 2)))
        let before = try await stored(store, user: "u")
        let now = at(minutes: 3)
        #expect(
            try await store.nextBatch(.due(asOf: now), after: nil, limit: 5, lease: lease("A", now: now)) == [before])
        // Another owner's release changes nothing
        try await store.releaseLeases(receiptIDs: [receipt.id], owner: "B")
        #expect(try await store.nextBatch(.due(asOf: now), after: nil, limit: 5, lease: lease("B", now: now)).isEmpty)
        // The holder's release frees the row and leaves every other column as it was
        try await store.releaseLeases(receiptIDs: [receipt.id, 999_999], owner: "A")
        #expect(try await stored(store, user: "u") == before)
        #expect(
            try await store.nextBatch(.due(asOf: now), after: nil, limit: 5, lease: lease("B", now: now)) == [before])
    }

    public static func statusPages(_ store: any RunHistoryStore) async throws {
        try await migrate(store)
        // Given alice never verified, bob with two subscriptions, carol invalid
        try await importReceipt(store, user: "alice", product: "pro")
        let bob = try await importReceipt(store, user: "bob")
        let carol = try await importReceipt(store, user: "carol")
        try await store.save(
            verifiedWrite(
                bob,
                subscriptions: [
                    subscription("b-2", product: "basic", state: .expired, expiresAt: at(minutes: -60)),
                    subscription("b-1", product: "pro", state: .active, expiresAt: at(minutes: 600)),
                ]))
        var invalid = verifiedWrite(carol, subscriptions: [], status: .invalid)
        invalid.failure = CheckFailure(reason: "apple_status_21003", message: "Apple rejected the receipt.")
        try await store.save(invalid)
        // When reading all rows at once and one by one
        let all = try await store.statusPage(userID: nil, after: nil, limit: 100)
        var paged: [StatusRow] = []
        var cursor: StatusCursor?
        while let row = try await store.statusPage(userID: nil, after: cursor, limit: 1).first {
            paged.append(row)
            cursor = row.cursor
        }
        // Then
        #expect(
            all.map { "\($0.userID)/\($0.originalTransactionID ?? "-")" } == [
                "alice/-", "bob/b-1", "bob/b-2", "carol/-",
            ])
        #expect(paged == all)
        let alice = try #require(all.first)
        #expect(alice.state == .unverified && !alice.entitled && alice.productID == "pro")
        #expect(alice.nextCheckAt == origin && alice.expiresAt == nil && alice.autoRenew == nil)
        let bobActive = all[1]
        #expect(bobActive.state == .active && bobActive.entitled && bobActive.autoRenew == true)
        #expect(bobActive.expiresAt == at(minutes: 600) && bobActive.environment == .production)
        #expect(bobActive.ownershipType == "PURCHASED" && bobActive.nextCheckAt == at(minutes: 60))
        #expect(all[2].state == .expired && !all[2].entitled)
        #expect(all[3].state == .invalid && !all[3].entitled && all[3].lastFailure == "apple_status_21003")
        let onlyBob = try await store.statusPage(userID: "bob", after: nil, limit: 10)
        #expect(onlyBob.map(\.originalTransactionID) == ["b-1", "b-2"])
        #expect(
            try await store.statusPage(userID: "bob", after: onlyBob[0].cursor, limit: 10).map(\.originalTransactionID)
                == ["b-2"])
        #expect(try await store.statusPage(userID: "nobody", after: nil, limit: 10).isEmpty)
    }

    public static func runsRoundTrip(_ store: any RunHistoryStore) async throws {
        try await migrate(store)
        var run = RunRecord(id: "run-1", command: "backfill", startedAt: origin, host: "worker-1", processID: 4242)
        try await store.beginRun(run)
        #expect(try await store.run(id: "run-1") == run)
        run.finishedAt = at(minutes: 5)
        run.status = "completed_with_failures"
        run.exitCode = 3
        run.checked = 10
        run.changed = 4
        run.unchanged = 5
        run.failed = 1
        run.conflicts = 2
        try await store.finishRun(run)
        #expect(try await store.run(id: "run-1") == run)
        #expect(try await store.run(id: "run-2") == nil)
    }

    public static func runLockRunsBody(_ store: any RunHistoryStore) async throws {
        try await migrate(store)
        let value = try await store.withRunLock(owner: "run-1") { 42 }
        #expect(value == 42)
        // Released after the body: taking it again works
        #expect(try await store.withRunLock(owner: "run-2") { "again" } == "again")
        #expect(!store.backendName.isEmpty)
    }
}
