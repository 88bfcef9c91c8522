import Foundation
import RenewalCore
import RenewalStorage
import Testing

/// Checks of the schema, imports and which receipts a batch selects.
extension SubscriptionStoreConformance {
    public static func migrateIsIdempotent(_ store: any RunHistoryStore) async throws {
        let first = try await store.migrate()
        #expect(!first.isEmpty)
        #expect(try await store.migrate() == [])
        try await store.checkSchema()
    }

    public static func checkSchemaRejectsUnmigratedStore(_ store: any RunHistoryStore) async throws {
        do {
            try await store.checkSchema()
            Issue.record("checkSchema accepted an unmigrated store")
        } catch SubscriptionStoreError.notMigrated(let found, let expected) {
            #expect(found == 0)
            #expect(expected > 0)
        }
    }

    public static func importUpsertsAndMakesDue(_ store: any RunHistoryStore) async throws {
        try await migrate(store)
        // Given two imported receipts, one of them checked and scheduled far ahead
        let first = try await store.importReceipts(
            [
                ReceiptImport(userID: "u1", latestReceipt: "r1"),
                ReceiptImport(userID: "u2", latestReceipt: "r2", productID: "p"),
            ],
            now: origin
        )
        #expect(first == [.inserted, .inserted])
        let u2 = try await stored(store, user: "u2")
        #expect(u2.status == .unverified)
        #expect(u2.importedProductID == "p")
        #expect(u2.nextCheckAt == origin)
        let sub = subscription("otid-u2", product: "p", state: .active, expiresAt: at(minutes: 9_000))
        try await store.save(verifiedWrite(u2, subscriptions: [sub], nextCheckAt: at(minutes: 5_000)))
        // When both are imported again, one unchanged and one with a new receipt
        let later = at(minutes: 10)
        let second = try await store.importReceipts(
            [ReceiptImport(userID: "u1", latestReceipt: "r1"), ReceiptImport(userID: "u2", latestReceipt: "r2-new")],
            now: later
        )
        // Then both are due now, the new receipt replaced the old, and subscriptions are kept
        #expect(second == [.unchanged, .replaced])
        let u1After = try await stored(store, user: "u1")
        let u2After = try await stored(store, user: "u2")
        #expect(u1After.latestReceipt == "r1")
        #expect(u2After.latestReceipt == "r2-new")
        #expect(u1After.nextCheckAt == later)
        #expect(u2After.nextCheckAt == later)
        #expect(u2After.id == u2.id)
        #expect(u2After.subscriptions.map(\.snapshot.originalTransactionID) == ["otid-u2"])
        let due = try await store.nextBatch(.due(asOf: later), after: nil, limit: 10, lease: nil)
        #expect(due.map(\.userID).sorted() == ["u1", "u2"])
        // And a receipt Apple rejected is checked again once a new one is imported
        // (`ReceiptStatus.afterReplacement`); a verified one keeps its status until its check
        try await store.save(verifiedWrite(u1After, subscriptions: [], status: .invalid))
        let third = try await store.importReceipts(
            [
                ReceiptImport(userID: "u1", latestReceipt: "r1-new"),
                ReceiptImport(userID: "u2", latestReceipt: "r2-newer"),
            ],
            now: at(minutes: 20))
        #expect(third == [.replaced, .replaced])
        #expect(try await stored(store, user: "u1").status == .unverified)
        #expect(try await stored(store, user: "u2").status == .verified)
    }

    public static func dueSelectionPagesInOrder(_ store: any RunHistoryStore) async throws {
        try await migrate(store)
        // Given 250 receipts over 83 distinct times (ties, broken by id, straddle page ends), imported
        // latest first so id order and time order disagree
        for minute in (0..<83).reversed() {
            let items = stride(from: minute, to: 250, by: 83).map {
                ReceiptImport(userID: "user-\($0)", latestReceipt: "r")
            }
            _ = try await store.importReceipts(items, now: at(minutes: Double(minute)))
        }
        // When paging through the due receipts 40 at a time
        let asOf = at(minutes: 100)
        let receipts = try await allPages(store, .due(asOf: asOf), pageSize: 40)
        // Then every receipt comes exactly once, soonest first, ties by id
        #expect(receipts.count == 250)
        #expect(Set(receipts.map(\.id)).count == 250)
        let keys = receipts.map { ($0.nextCheckAt, $0.id) }
        #expect(zip(keys, keys.dropFirst()).allSatisfy { $0 < $1 })
        // And the same with leases (each page leased as it is taken)
        let leased = try await allPages(store, .due(asOf: asOf), pageSize: 40, lease: lease("worker", now: asOf))
        #expect(leased.map(\.id) == receipts.map(\.id))
    }

    public static func receiptNotDueIsNeverSelected(_ store: any RunHistoryStore) async throws {
        try await migrate(store)
        try await importReceipt(store, user: "due", now: at(minutes: 0))
        try await importReceipt(store, user: "later", now: at(minutes: 30))
        let asOf = at(minutes: 29)
        let plain = try await store.nextBatch(.due(asOf: asOf), after: nil, limit: 10, lease: nil)
        #expect(plain.map(\.userID) == ["due"])
        let leased = try await store.nextBatch(.due(asOf: asOf), after: nil, limit: 10, lease: lease("w", now: asOf))
        #expect(leased.map(\.userID) == ["due"])
        let exactlyDue = try await store.nextBatch(.due(asOf: at(minutes: 30)), after: nil, limit: 10, lease: nil)
        #expect(exactlyDue.map(\.userID) == ["due", "later"])
    }

    public static func leasesHideAndExpire(_ store: any RunHistoryStore) async throws {
        try await migrate(store)
        try await importReceipt(store, user: "u")
        let now = at(minutes: 1)
        // Given a receipt leased by A for ten minutes
        let taken = try await store.nextBatch(.due(asOf: now), after: nil, limit: 10, lease: lease("A", now: now))
        #expect(taken.map(\.userID) == ["u"])
        // Then B sees nothing while the lease lives, in a run or a backfill
        let during = at(minutes: 5)
        #expect(
            try await store.nextBatch(.due(asOf: during), after: nil, limit: 10, lease: lease("B", now: during)).isEmpty
        )
        let backfill = ReceiptSelection.backfill(BackfillSelector(all: true))
        #expect(try await store.nextBatch(backfill, after: nil, limit: 10, lease: lease("B", now: during)).isEmpty)
        // And B takes it over once the lease has expired (at its expiry instant included)
        let expiry = now.addingTimeInterval(600)
        let takenOver = try await store.nextBatch(
            .due(asOf: expiry), after: nil, limit: 10, lease: lease("B", now: expiry))
        #expect(takenOver.map(\.userID) == ["u"])
        // And now A is the one locked out
        let afterTakeOver = at(minutes: 12)
        #expect(
            try await store.nextBatch(
                .due(asOf: afterTakeOver), after: nil, limit: 10, lease: lease("A", now: afterTakeOver)
            )
            .isEmpty
        )
    }

    public static func batchWithoutLeaseWritesNothing(_ store: any RunHistoryStore) async throws {
        try await migrate(store)
        let before = try await importReceipt(store, user: "u")
        let now = at(minutes: 1)
        let first = try await store.nextBatch(.due(asOf: now), after: nil, limit: 10, lease: nil)
        let second = try await store.nextBatch(.due(asOf: now), after: nil, limit: 10, lease: nil)
        #expect(first == [before])
        #expect(second == [before])
        // Nothing was leased: another worker takes the receipt at once
        let leased = try await store.nextBatch(.due(asOf: now), after: nil, limit: 10, lease: lease("A", now: now))
        #expect(leased == [before])
    }

    public static func backfillSelectors(_ store: any RunHistoryStore) async throws {
        try await migrate(store)
        // Given: a never verified (imported pro), b active pro, c sandbox basic expired 5 days ago,
        // d invalid, e basic yearly expired 100 days ago
        let now = at(minutes: 0)
        let a = try await importReceipt(store, user: "a", product: "pro.monthly")
        let b = try await importReceipt(store, user: "b")
        let c = try await importReceipt(store, user: "c")
        let d = try await importReceipt(store, user: "d")
        let e = try await importReceipt(store, user: "e")
        let day = 1440.0
        try await store.save(
            verifiedWrite(
                b,
                subscriptions: [
                    subscription("b1", product: "pro.monthly", state: .active, expiresAt: at(minutes: 30 * day))
                ]))
        try await store.save(
            verifiedWrite(
                c,
                subscriptions: [
                    subscription(
                        "c1", product: "basic.monthly", state: .expired, expiresAt: at(minutes: -5 * day),
                        environment: .sandbox)
                ], environment: .sandbox))
        try await store.save(verifiedWrite(d, subscriptions: [], status: .invalid))
        try await store.save(
            verifiedWrite(
                e,
                subscriptions: [
                    subscription("e1", product: "basic.yearly", state: .expired, expiresAt: at(minutes: -100 * day))
                ]))
        func users(_ selector: BackfillSelector) async throws -> [String] {
            try await allPages(store, .backfill(selector), pageSize: 2).map(\.userID)
        }
        // Then
        #expect(try await users(BackfillSelector(all: true)) == ["a", "b", "c", "d", "e"])
        #expect(try await users(BackfillSelector()) == [])
        #expect(try await users(BackfillSelector(userIDs: ["d", "b", "nobody"])) == ["b", "d"])
        #expect(try await users(BackfillSelector(productIDs: ["pro.monthly"])) == ["a", "b"])
        #expect(try await users(BackfillSelector(states: [.unverified])) == ["a"])
        #expect(try await users(BackfillSelector(states: [.expired])) == ["c", "e"])
        #expect(try await users(BackfillSelector(states: [.unverified, .active])) == ["a", "b"])
        #expect(try await users(BackfillSelector(expiredSince: at(minutes: -30 * day))) == ["c"])
        #expect(try await users(BackfillSelector(environment: .sandbox)) == ["c"])
        #expect(try await users(BackfillSelector(environment: .production)) == ["b", "d", "e"])
        #expect(
            try await users(BackfillSelector(productIDs: ["basic.monthly", "basic.yearly"], environment: .production))
                == ["e"]
        )
        #expect(try await users(BackfillSelector(all: true, userIDs: ["a", "c"], states: [.expired])) == ["c"])
        // And a backfill ignores the schedule: b, c, d, e are not due until minute 60
        #expect(try await store.nextBatch(.due(asOf: now), after: nil, limit: 10, lease: nil).map(\.userID) == ["a"])
        #expect(a.importedProductID == "pro.monthly")
    }
}
