import Foundation
import RenewalCore
import RenewalStorage
import Testing

extension SubscriptionStoreConformance {
    /// StoreKit 2 rows: imported by transaction id, with or without a receipt.
    static func importByTransactionID(_ store: any RunHistoryStore) async throws {
        try await migrate(store)
        let token = "6d1b1e9c-3f5e-4b0a-9a57-0c1c1c1c1c1c"
        // An id-only row: no receipt, the Server API's from import on, due now.
        var outcomes = try await store.importReceipts(
            [
                ReceiptImport(
                    userID: "sk2", latestReceipt: nil, productID: "p", originalTransactionID: "2000000000000001",
                    appAccountToken: token, environment: .sandbox)
            ], now: origin)
        #expect(outcomes == [.inserted])
        var row = try await stored(store, user: "sk2")
        #expect(row.latestReceipt == nil && row.originalTransactionID == "2000000000000001")
        #expect(row.source == .serverAPI && row.environment == .sandbox && row.status == .unverified)
        #expect(row.importedProductID == "p" && row.nextCheckAt == origin)
        #expect(try await store.countWithoutReceipt() == 1)

        // The same id again: unchanged, due now; a newer id: replaced, the lease released.
        let lease = lease("worker-a", now: at(minutes: 1))
        _ = try await store.nextBatch(.due(asOf: at(minutes: 1)), after: nil, limit: 10, lease: lease)
        outcomes = try await store.importReceipts(
            [ReceiptImport(userID: "sk2", latestReceipt: nil, originalTransactionID: "2000000000000001")],
            now: at(minutes: 2))
        #expect(outcomes == [.unchanged])
        #expect(try await store.countDue(asOf: at(minutes: 2), unleasedAt: at(minutes: 2)) == 0, "lease kept")
        outcomes = try await store.importReceipts(
            [ReceiptImport(userID: "sk2", latestReceipt: nil, originalTransactionID: "2000000000000002")],
            now: at(minutes: 3))
        #expect(outcomes == [.replaced])
        #expect(try await store.countDue(asOf: at(minutes: 3), unleasedAt: at(minutes: 3)) == 1, "lease released")
        row = try await stored(store, user: "sk2")
        #expect(row.originalTransactionID == "2000000000000002" && row.environment == .sandbox)

        // A receipt row that gets an id keeps its receipt; a receipt line keeps the id; a row that
        // gains a receipt is no longer counted as waiting for the Server API.
        try await importReceipt(store, user: "both", receipt: "r1")
        outcomes = try await store.importReceipts(
            [ReceiptImport(userID: "both", latestReceipt: nil, originalTransactionID: "2000000000000003")],
            now: at(minutes: 4))
        #expect(outcomes == [.replaced])
        row = try await stored(store, user: "both")
        #expect(row.latestReceipt == "r1" && row.originalTransactionID == "2000000000000003" && row.source == nil)
        outcomes = try await store.importReceipts(
            [ReceiptImport(userID: "both", latestReceipt: "r1")], now: at(minutes: 5))
        #expect(outcomes == [.unchanged])
        #expect(try await stored(store, user: "both").originalTransactionID == "2000000000000003")
        outcomes = try await store.importReceipts(
            [ReceiptImport(userID: "sk2", latestReceipt: "r2")], now: at(minutes: 6))
        #expect(outcomes == [.replaced])
        row = try await stored(store, user: "sk2")
        #expect(row.latestReceipt == "r2" && row.originalTransactionID == "2000000000000002")
        #expect(try await store.countWithoutReceipt() == 0)
    }
}
