import Foundation
import RenewalCore
import RenewalPostgres
import RenewalSQLite
import Testing

@testable import RenewalSQL
@testable import RenewalStorage

/// Schema 26: `billing_backlog` says whether each subscriber in billing trouble is entitled from the
/// decision stored on its row, and until when from the decision's timeline (`entitlement_spans`), never
/// from its state's name or the row's grace end (cleared once a grace period is over).
@Suite("Billing backlog: entitled and entitled_until_ms read the decision's tables, on SQLite and PostgreSQL")
struct BillingBacklogDecisionTests: FreshStoreCheck {
    typealias Backend = SubscriptionFactsMigrationTests.Backend

    @Test(
        """
        billing_backlog's entitled is subscriptions.entitled and entitled_until_ms the end of the latest span, \
        also after the row's grace end is cleared
        """,
        arguments: Backend.available)
    func backlogReadsTheDecision(backend: Backend) async throws {
        try await backend.check(Self.self)
    }

    static func check<Database: SQLDatabase>(_ store: SQLSubscriptionStore<Database>) async throws {
        // EntitlementSpansMigrationTests' seed: A in billing retry after a grace period that ended at
        // t0 + 17 days (its row keeps no grace end), B in grace until t0 + 56 days, C expired, D in
        // billing retry stored as entitled (no ledger, so no span).
        #expect(try await store.migrate(through: 20) == Array(1...20))
        for statement in EntitlementSpansMigrationTests.seed {
            _ = try await store.database.withConnection { try $0.execute(statement, []) }
        }
        _ = try await store.migrate()
        let (t0, day) = (SubscriptionFactsMigrationTests.t0, SubscriptionFactsMigrationTests.day)
        #expect(
            try await Self.backlog(store) == [
                "A billing_retry grace=- entitled=0 until=\(t0 + 17 * day)",
                "B grace_period grace=\(t0 + 56 * day) entitled=0 until=\(t0 + 56 * day)",
                "D billing_retry grace=- entitled=1 until=-",
            ])
        // The column follows the stored decision, whatever the state's name says.
        _ = try await store.database.withConnection { connection in
            try connection.execute(
                "UPDATE subscriptions SET entitled = 1 WHERE original_transaction_id = 'B'", [])
        }
        #expect(
            try await Self.backlog(store).filter { $0.hasPrefix("B ") } == [
                "B grace_period grace=\(t0 + 56 * day) entitled=1 until=\(t0 + 56 * day)"
            ])
    }

    /// `billing_backlog` as "subscription state grace entitled until", one line per row.
    static func backlog<Database: SQLDatabase>(_ store: SQLSubscriptionStore<Database>) async throws -> [String] {
        let rows = try await store.database.withConnection { connection in
            try connection.execute(
                """
                SELECT original_transaction_id, state, grace_period_expires_at_ms, entitled, entitled_until_ms
                FROM billing_backlog ORDER BY original_transaction_id
                """, [])
        }
        return try rows.map { row in
            let grace = try row.optionalInt64("grace_period_expires_at_ms").map(String.init) ?? "-"
            let until = try row.optionalInt64("entitled_until_ms").map(String.init) ?? "-"
            return "\(try row.text("original_transaction_id")) \(try row.text("state")) grace=\(grace) "
                + "entitled=\(try row.int("entitled")) until=\(until)"
        }
    }
}
