import Foundation
import RenewalCore
import RenewalStorage
import Testing

/// Checks of fenced writes and of taking back the work of dead processes.
extension SubscriptionStoreConformance {
    public static func fencedWriteNeedsTheLease(_ store: any RunHistoryStore) async throws {
        try await migrate(store)
        _ = try await importReceipt(store, user: "u", product: "p")
        // Given A claimed the receipt for a minute, and after A's lease ran out B claimed it
        let claimedByA = try #require(
            try await store.nextBatch(
                .due(asOf: at(minutes: 1)), after: nil, limit: 1, lease: lease("A", now: at(minutes: 1))
            ).first)
        let claimedByB = try #require(
            try await store.nextBatch(
                .due(asOf: at(minutes: 1)), after: nil, limit: 1, lease: lease("B", now: at(minutes: 12))
            ).first)
        #expect(claimedByA.id == claimedByB.id)
        // When slow A saves its result
        var late = verifiedWrite(
            claimedByA, subscriptions: [subscription("t-a", product: "p", state: .expired, expiresAt: at(minutes: -5))],
            runID: "run-a", checkedAt: at(minutes: 13), newLatestReceipt: "older-answer", leaseOwner: "A")
        late.changes = [
            SubscriptionEvent(
                kind: .verified, originalTransactionID: "t-a", productID: "p", fromState: .unverified,
                toState: .expired,
                oldExpiresAt: nil, newExpiresAt: at(minutes: -5), environment: .production)
        ]
        await #expect(throws: SubscriptionStoreError.self) { try await store.save(late) }
        do {
            try await store.save(late)
        } catch SubscriptionStoreError.leaseLost(let receiptID) {
            #expect(receiptID == claimedByA.id)
        }
        // Then nothing of it was written, and B's lease stands
        let afterA = try await stored(store, user: "u")
        #expect(afterA.latestReceipt == "receipt-of-u" && afterA.status == .unverified && afterA.subscriptions.isEmpty)
        #expect(try await store.changes(ofRun: "run-a").isEmpty)
        #expect(
            try await store.recordFailures(
                [
                    RecordedFailure(
                        receiptID: claimedByA.id, userID: "u", failure: CheckFailure(reason: "timeout", message: "m"),
                        occurredAt: at(minutes: 13))
                ],
                runID: "run-a", releasingLeasesOf: "A") == 1)
        // And B, which holds the lease, writes
        try await store.save(
            verifiedWrite(
                claimedByB,
                subscriptions: [subscription("t-b", product: "p", state: .active, expiresAt: at(minutes: 900))],
                runID: "run-b", checkedAt: at(minutes: 14), newLatestReceipt: "newer-answer", leaseOwner: "B"))
        let afterB = try await stored(store, user: "u")
        #expect(
            afterB.latestReceipt == "newer-answer"
                && afterB.subscriptions.map(\.snapshot.originalTransactionID) == ["t-b"])
        // A second write by B finds its lease already released
        await #expect(throws: SubscriptionStoreError.self) {
            try await store.save(
                verifiedWrite(
                    claimedByB, subscriptions: [], runID: "run-b", checkedAt: at(minutes: 15), leaseOwner: "B"))
        }
    }

    public static func importOfANewReceiptFencesOutTheCheckInFlight(_ store: any RunHistoryStore) async throws {
        try await migrate(store)
        _ = try await importReceipt(store, user: "u", product: "p")
        let claimed = try #require(
            try await store.nextBatch(
                .due(asOf: at(minutes: 1)), after: nil, limit: 1, lease: lease("A", now: at(minutes: 1))
            ).first)
        // While A checks the old receipt, the app stores a newer one
        _ = try await store.importReceipts(
            [ReceiptImport(userID: "u", latestReceipt: "from-the-app", productID: "p")], now: at(minutes: 2))
        // A's answer about the old receipt is not written over it
        await #expect(throws: SubscriptionStoreError.self) {
            try await store.save(
                verifiedWrite(
                    claimed, subscriptions: [], checkedAt: at(minutes: 3), newLatestReceipt: "apple-old",
                    leaseOwner: "A"))
        }
        let row = try await stored(store, user: "u")
        #expect(row.latestReceipt == "from-the-app" && row.nextCheckAt == at(minutes: 2))
    }

    public static func deadProcessesWorkIsTakenBack(_ store: any RunHistoryStore) async throws {
        try await migrate(store)
        for user in ["u1", "u2", "u3"] { _ = try await importReceipt(store, user: user, product: "p") }
        // Given a run of worker "dead" that claimed two receipts, then its process died
        try await store.beginRun(
            RunRecord(
                id: "run-dead", command: "run", startedAt: at(minutes: 1), host: "host-a", processID: 4242,
                workerID: "dead"))
        let claimed = try await store.nextBatch(
            .due(asOf: at(minutes: 1)), after: nil, limit: 2, lease: lease("dead", now: at(minutes: 1)))
        #expect(claimed.count == 2)
        // When the next worker starts (on SQLite it holds the run lock; on PostgreSQL no session holds "dead"'s
        // liveness lock)
        let recovered = try await store.withRunLock(owner: "next") {
            try await store.recoverAbandonedWork(except: "next", now: at(minutes: 2))
        }
        // Then the dead run is abandoned, named by host and pid, and its leases are free at once
        #expect(recovered.abandonedRuns.map(\.runID) == ["run-dead"])
        #expect(recovered.abandonedRuns.first?.host == "host-a" && recovered.abandonedRuns.first?.processID == 4242)
        #expect(recovered.releasedLeases == 2)
        let run = try #require(try await store.run(id: "run-dead"))
        #expect(run.status == "abandoned" && run.finishedAt == at(minutes: 2))
        let free = try await store.nextBatch(
            .due(asOf: at(minutes: 2)), after: nil, limit: 10, lease: lease("next", now: at(minutes: 2)))
        #expect(free.count == 3)
        #expect(try await store.countDue(asOf: at(minutes: 2), unleasedAt: at(minutes: 2)) == 0)
        #expect(try await store.releaseEveryLease(of: "next") == 3)
        #expect(try await store.countDue(asOf: at(minutes: 2), unleasedAt: at(minutes: 2)) == 3)
        // And a second probe finds nothing more
        #expect(try await store.recoverAbandonedWork(except: "next", now: at(minutes: 3)).isEmpty)
    }
}
