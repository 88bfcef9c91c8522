import Foundation
import RenewalCore
import RenewalPostgres
import RenewalSQLite
import Testing

@testable import RenewalSQL
@testable import RenewalStorage

/// `SQLSubscriptionStore.ownerSQL`, the owner rule as an SQL expression, answers as Core's `ReceiptOwner`
/// for every kind of row, on both databases.
@Suite("Receipt owner in storage: ownerSQL equals Core's ReceiptOwner, on SQLite and PostgreSQL")
struct ReceiptOwnerStoreTests {
    typealias Backend = StoreBackend

    @Test("each row's owner through ownerSQL is Core's", arguments: Backend.available)
    func owners(backend: Backend) async throws {
        try await backend.withMigratedStore { store in
            let adopted = PurchaseAdoption.reservedUserPrefix + "1000"
            let rows: [(owner: String?, user: String)] = [
                ("alice", "bob"), ("alice", adopted), (nil, adopted + "-2"), (nil, "carol"), (nil, "adopted"),
                (nil, "x" + adopted),
            ]
            for (index, row) in rows.enumerated() {
                try await store.run(
                    """
                    INSERT INTO receipts (id, user_id, owner_user_id, latest_receipt, status, next_check_at,
                        created_at, updated_at)
                    VALUES (\(index + 1), '\(row.user)', \(row.owner.map { "'\($0)'" } ?? "NULL"), 'r', 'verified',
                        0, 0, 0)
                    """)
            }
            for (index, row) in rows.enumerated() {
                let owner = try await store.text(
                    "SELECT \(SQLSubscriptionStore<SQLiteDatabase>.ownerSQL("r")) AS v FROM receipts r WHERE id = \(index + 1)"
                )
                #expect(owner == ReceiptOwner.of(ownerUserID: row.owner, userID: row.user), "\(row)")
            }
        }
    }
}

extension SQLSubscriptionStore {
    func text(_ sql: String) async throws -> String? {
        try await database.withConnection { try $0.execute(sql, []).first?.optionalText("v") }
    }
}
