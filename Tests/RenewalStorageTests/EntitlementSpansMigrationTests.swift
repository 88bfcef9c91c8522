import Foundation
import RenewalCore
import RenewalPostgres
import RenewalSQLite
import Testing

@testable import RenewalSQL
@testable import RenewalStorage

/// Schema 22 on a database at version 20 (21 adds the grace facts): every subscription's entitlement spans are rebuilt from its
/// ledger and facts, and `entitlements_by_product` answers "entitled" from the decision stored on each
/// row (`subscriptions.entitled`) instead of from a list of states, on PostgreSQL through its summary.
@Suite("Entitlement spans: the migration to schema 22 rebuilds spans; the views read the stored decision")
struct EntitlementSpansMigrationTests: FreshStoreCheck {
    typealias Backend = SubscriptionFactsMigrationTests.Backend

    /// SubscriptionFactsMigrationTests' A (billing retry after a past grace period), B (in grace now) and
    /// C (expired), none stored entitled, plus D: a row in billing retry the decision stored as entitled.
    static var seed: [String] {
        SubscriptionFactsMigrationTests.seed + [
            """
            INSERT INTO subscriptions (original_transaction_id, receipt_id, user_id, state, entitled,
                environment, next_check_at, updated_at)
            SELECT 'D', id, 'u', 'billing_retry', 1, 'Production', 0, 0 FROM receipts
            """
        ]
    }

    @Test(
        """
        spans rebuilt equal Core's timeline of each ledger; entitlements_by_product's entitled column is the \
        stored decision, also after a row's decision changes and the summaries are compacted
        """,
        arguments: Backend.available)
    func migrationAndViews(backend: Backend) async throws {
        try await backend.check(Self.self)
    }

    static func check<Database: SQLDatabase>(_ store: SQLSubscriptionStore<Database>) async throws {
        // Seeded at schema 20, so schema 21 builds the grace facts the spans are made from.
        #expect(try await store.migrate(through: 20) == Array(1...20))
        for statement in Self.seed { _ = try await store.database.withConnection { try $0.execute(statement, []) } }
        #expect(try await store.migrate() == Array(21...SQLSchema.currentVersion))
        var ledgers: [SubscriptionLedger] = []
        try await store.forEachSubscriptionLedger(bundleID: nil) { ledgers.append($0) }
        #expect(ledgers.map(\.originalTransactionID) == ["A", "B", "C"])
        for ledger in ledgers {
            let spans = try await store.entitlementSpans(of: ledger.originalTransactionID)
            #expect(spans == ledger.timeline().spans && spans.map(\.byGrace) == [false, true], "\(spans)")
        }
        let a = try await store.entitlementSpans(of: "A")
        let t0 = Date(timeIntervalSince1970: Double(SubscriptionFactsMigrationTests.t0) / 1000)
        #expect(a.last?.startsAt == t0 && a.last?.endsAt == t0.addingTimeInterval(17 * 86_400))

        // Before schema 22 the view said B (grace_period) entitled and D (billing_retry) not.
        #expect(
            try await Self.view(store) == ["billing_retry 0 1", "billing_retry 1 1", "expired 0 1", "grace_period 0 1"])
        _ = try await store.database.withConnection { connection in
            try connection.execute("UPDATE subscriptions SET entitled = 1 WHERE original_transaction_id = 'A'", [])
        }
        try await store.compactSummaries()
        #expect(try await Self.view(store) == ["billing_retry 1 2", "expired 0 1", "grace_period 0 1"])
    }

    /// `entitlements_by_product` as "state entitled subscribers", one line per row.
    static func view<Database: SQLDatabase>(_ store: SQLSubscriptionStore<Database>) async throws -> [String] {
        let rows = try await store.database.withConnection { connection in
            try connection.execute(
                "SELECT state, entitled, subscribers FROM entitlements_by_product ORDER BY state, entitled", [])
        }
        return try rows.map { "\(try $0.text("state")) \(try $0.int("entitled")) \(try $0.int("subscribers"))" }
    }
}
