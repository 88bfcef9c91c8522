import Foundation
import RenewalCore
import RenewalPostgres
import RenewalSQLite
import Testing

@testable import RenewalSQL
@testable import RenewalStorage

/// Schema 21 on a database at version 20: the grace periods it can still show become facts, and the
/// analytics count a moment inside a past grace period as entitled.
@Suite("Subscription facts: the migration to schema 21 rebuilds grace periods, on SQLite and PostgreSQL")
struct SubscriptionFactsMigrationTests: FreshStoreCheck {
    static let day: Int64 = 86_400_000
    /// 2026-11-01T00:00:00Z in epoch milliseconds.
    static let t0: Int64 = 1_793_491_200_000

    enum Backend: String, CaseIterable, CustomStringConvertible {
        case sqlite, postgres
        var description: String { rawValue }
        static var available: [Backend] { PostgresTestSchema.baseURL == nil ? [.sqlite] : [.sqlite, .postgres] }

        /// Runs `Check.check` on a fresh, empty store of this backend (a new SQLite file in its own
        /// directory, or a new PostgreSQL schema), removed afterwards.
        func check<Check: FreshStoreCheck>(_: Check.Type) async throws {
            switch self {
            case .sqlite:
                let directory = NSTemporaryDirectory() + "renewal-\(Check.self)-" + UUID().uuidString
                try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
                defer { try? FileManager.default.removeItem(atPath: directory) }
                try await Check.check(
                    try SQLiteSubscriptionStore.open(path: directory + "/renewal.sqlite", create: true))
            case .postgres:
                try await PostgresTestSchema.with { schema in
                    try await Check.check(try PostgresSubscriptionStore.open(url: schema.url))
                }
            }
        }
    }

    /// A: a grace period in the past (a change to `grace_period`, then billing retry 17 days later); B: in
    /// a grace period now (its row says so, and so does a change); C: a change to `grace_period` with no
    /// later change and a row that has moved on (bounded at 28 days).
    static let seed: [String] = {
        let (t0, day) = (Self.t0, Self.day)
        var statements = [
            """
            INSERT INTO receipts (user_id, latest_receipt, status, next_check_at, created_at, updated_at)
            VALUES ('u', 'stored', 'verified', 0, 0, 0)
            """
        ]
        for (otid, state, expires, grace) in [
            ("A", "billing_retry", t0, "NULL"), ("B", "grace_period", t0 + 40 * day, "\(t0 + 56 * day)"),
            ("C", "expired", t0, "NULL"),
        ] {
            statements.append(
                """
                INSERT INTO subscriptions (original_transaction_id, receipt_id, user_id, state, entitled, expires_at,
                    grace_period_expires_at, latest_transaction_id, environment, next_check_at, updated_at)
                SELECT '\(otid)', id, 'u', '\(state)', 0, \(expires), \(grace), '\(otid)-1', 'Production', 0, 0
                FROM receipts
                """)
            statements.append(
                """
                INSERT INTO transactions (transaction_id, original_transaction_id, user_id, product_id, environment,
                    ownership_type, purchased_at, expires_at, is_trial, quantity, upgraded, origin, recorded_at,
                    updated_at)
                VALUES ('\(otid)-1', '\(otid)', 'u', 'p.monthly', 'Production', 'PURCHASED', \(expires - 30 * day),
                    \(expires), 0, 1, 0, 'status_answer', 0, 0)
                """)
        }
        for (otid, to, expires, at) in [
            ("A", "grace_period", t0, t0 + 3_600_000), ("A", "billing_retry", t0, t0 + 17 * day),
            ("B", "grace_period", t0 + 40 * day, t0 + 40 * day + 60_000), ("C", "grace_period", t0, t0 + 60_000),
        ] {
            statements.append(
                """
                INSERT INTO entitlement_changes (user_id, original_transaction_id, kind, from_state, to_state,
                    new_expires_at, occurred_at)
                VALUES ('u', '\(otid)', 'x', 'active', '\(to)', \(expires), \(at))
                """)
        }
        return statements
    }()

    @Test(
        "grace periods recorded in entitlement_changes and the rows become facts; a moment inside one is entitled",
        arguments: Backend.available)
    func migrationBuildsGraceFacts(backend: Backend) async throws {
        try await backend.check(Self.self)
    }

    static func check<Database: SQLDatabase>(_ store: SQLSubscriptionStore<Database>) async throws {
        do {
            #expect(try await store.migrate(through: 20) == Array(1...20))
            for statement in Self.seed { _ = try await store.database.withConnection { try $0.execute(statement, []) } }
            #expect(try await store.migrate() == Array(21...SQLSchema.currentVersion))
            let rows = try await store.database.withConnection { connection in
                try connection.execute(
                    """
                    SELECT original_transaction_id, transaction_id, starts_at, ends_at FROM subscription_facts
                    WHERE kind = 'grace_period' ORDER BY original_transaction_id, ends_at
                    """, [])
            }
            let facts = try rows.map {
                "\(try $0.text("original_transaction_id")) \(try $0.optionalText("transaction_id") ?? "-") "
                    + "\(try $0.int64("starts_at")) \(try $0.int64("ends_at"))"
            }
            let (t0, day) = (Self.t0, Self.day)
            #expect(
                facts == [
                    "A A-1 \(t0) \(t0 + 17 * day)", "B B-1 \(t0 + 40 * day) \(t0 + 56 * day)",
                    "C C-1 \(t0) \(t0 + 28 * day)",
                ])
            var ledgers: [String: SubscriptionLedger] = [:]
            try await store.forEachSubscriptionLedger(bundleID: nil) { ledgers[$0.originalTransactionID] = $0 }
            let a = try #require(ledgers["A"])
            let inGrace = Date(timeIntervalSince1970: Double(t0 + 5 * day) / 1000)
            let after = Date(timeIntervalSince1970: Double(t0 + 18 * day) / 1000)
            #expect(a.timeline().standing(at: inGrace) == .paid(a.transactions[0], byGrace: true))
            #expect(a.timeline().standing(at: after) == .notEntitled)
        }
    }
}

/// A test that checks one fresh store, on whichever database (`Backend.check`).
protocol FreshStoreCheck {
    static func check<Database: SQLDatabase>(_ store: SQLSubscriptionStore<Database>) async throws
}
