import Foundation
import Logging

@testable import RenewalPostgres
@testable import RenewalSQLite
@testable import RenewalSQL
@testable import RenewalStorage
import Testing

/// `DatabaseCopy` between a real SQLite file and a real PostgreSQL schema: every table, awkward
/// values included, arrives intact in both directions; identity sequences and dashboard summaries
/// are right afterwards; a copy that fails half-way leaves the target without rows and can be run
/// again.
@Suite(
    "DatabaseCopy: every table between SQLite and PostgreSQL",
    .enabled(if: PostgresTestSchema.baseURL != nil, "RENEWAL_TEST_POSTGRES_URL is not set"))
struct DatabaseCopyTests {
    static let quiet = Logger(label: "copy", factory: { _ in SwiftLogNoOpLogHandler() })

    /// Text that COPY's text format, SQL quoting and C strings could each get wrong.
    static let awkward = "tab\there\nnew line \\N back\\slash 'quote' \"double\" é ü 日本 🎉\r"

    static func directory() throws -> String {
        let path = NSTemporaryDirectory() + "renewal-copy-tests-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    /// A row in every table `DatabaseCopy` copies, with NULLs, empty and awkward text, large numbers,
    /// and two failures of one receipt on one day (counted once by `failures_by_reason.receipts`).
    static func fill(_ database: any SQLDatabase) async throws {
        let day: Int64 = 1_763_856_000_000  // 2025-11-23T00:00:00Z
        try await database.withConnection { connection in
            func insert(_ sql: String, _ binds: [SQLValue]) throws { _ = try connection.execute(sql, binds) }
            for id in Int64(1)...5 {
                try insert(
                    """
                    INSERT INTO receipts (id, user_id, latest_receipt, imported_product_id, status, environment,
                        next_check_at, last_checked_at, consecutive_failures, lease_owner, lease_expires_at,
                        created_at, updated_at, source, original_transaction_id, bundle_id, app_account_token,
                        polling_check_at, rejected_since)
                    VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19)
                    """,
                    [
                        .int64(id * 10), .text("user-\(id)"), .text(id == 1 ? awkward : "receipt-\(id)"),
                        id == 2 ? .null : .text("product"), .text(id == 3 ? "invalid" : "verified"),
                        id == 4 ? .null : .text("Production"), .int64(day + id * 1000), .int64(day),
                        .int64(id), id == 5 ? .text("dead-worker") : .null, id == 5 ? .int64(day + 600_000) : .null,
                        .int64(day), .int64(day), .text(id % 2 == 0 ? "server_api" : "verify_receipt"),
                        .text("otid-\(id)"), id == 1 ? .null : .text("com.example.app"), .text(""),
                        id == 2 ? .int64(day + 5) : .null, .null,
                    ])
                try insert(
                    """
                    INSERT INTO subscriptions (original_transaction_id, receipt_id, user_id, product_id, state,
                        entitled, expires_at, auto_renew, billing_retry, environment, ownership_type, next_check_at,
                        updated_at)
                    VALUES ($1, $2, $3, 'product', $4, $5, $6, $7, 0, 'Production', $8, $9, $9)
                    """,
                    [
                        .text("otid-\(id)"), .int64(id * 10), .text("user-\(id)"),
                        .text(["active", "grace_period", "billing_retry", "expired", "refunded"][Int(id) - 1]),
                        .int64(id <= 2 ? 1 : 0), id == 3 ? .null : .int64(day + 86_400_000 * id),
                        id == 4 ? .null : .int64(1), id == 1 ? .text("FAMILY_SHARED") : .null, .int64(day),
                    ])
            }
            try insert(
                """
                INSERT INTO runs (id, command, started_at, finished_at, status, exit_code, checked, changed, host,
                    process_id, worker_id, feed_fallback, apps_stopped, webhooks_delivered)
                VALUES ('run-1', 'run', $1, $2, 'completed', 0, 5, 3, 'host', 4294967296, 'worker-1', $3, NULL, NULL),
                       ('run-2', 'run', $2, NULL, 'running', NULL, 0, 0, 'host', 7, 'dead-worker', NULL, NULL, NULL)
                """, [.int64(day), .int64(day + 60_000), .text(awkward)])
            for id in Int64(1)...4 {
                try insert(
                    """
                    INSERT INTO entitlement_changes (id, run_id, user_id, original_transaction_id, product_id, kind,
                        from_state, to_state, old_expires_at, new_expires_at, environment, occurred_at, source,
                        bundle_id)
                    VALUES ($1, 'run-1', $2, $3, 'product', $4, 'unverified', 'active', NULL, $5, 'Production', $6,
                        'verify_receipt', 'com.example.app')
                    """,
                    [
                        .int64(id * 100), .text("user-\(id)"), .text("otid-\(id)"),
                        .text(id == 4 ? "refunded" : "granted"), .int64(day + 1), .int64(day + id),
                    ])
                try insert(
                    """
                    INSERT INTO webhook_outbox (change_id, user_id, created_at, attempts, next_attempt_at, last_error,
                        delivered_at, failed_at)
                    VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
                    """,
                    [
                        .int64(id * 100), .text("user-\(id)"), .int64(day), .int64(id - 1), .int64(day + 10),
                        id == 2 ? .text(awkward) : .null, id == 3 ? .int64(day + 2_000) : .null,
                        id == 4 ? .int64(day + 9_000) : .null,
                    ])
            }
            for (id, receipt) in [(Int64(7), Int64(30)), (8, 30), (9, 40)] {
                try insert(
                    """
                    INSERT INTO run_failures (id, run_id, receipt_id, user_id, reason, message, occurred_at, bundle_id)
                    VALUES ($1, 'run-1', $2, 'user', 'apple_unavailable', $3, $4, 'com.example.app')
                    """, [.int64(id), .int64(receipt), .text(awkward), .int64(day + id)])
            }
            try insert(
                """
                INSERT INTO ownership_conflicts (id, run_id, original_transaction_id, owner_user_id, claimant_user_id,
                    product_id, detected_at)
                VALUES (3, 'run-1', 'otid-1', 'user-1', 'user-9', NULL, $1)
                """, [.int64(day)])
            try insert(
                """
                INSERT INTO feed_cursors (environment, pulled_until, updated_at, pulled_since)
                VALUES ('Production', $1, $1, $2), ('com.example.app/Sandbox', $1, $1, NULL)
                """, [.int64(day + 5), .int64(day - 5)])
            try insert(
                """
                INSERT INTO feed_notifications (notification_uuid, environment, notification_type, subtype,
                    original_transaction_id, receipt_id, signed_at, received_at, run_id, bundle_id)
                VALUES ('n-1', 'Production', 'DID_RENEW', NULL, 'otid-1', 10, $1, $1, 'run-1', NULL),
                       ('n-2', 'Production', 'REFUND', 'x', 'otid-unknown', NULL, $1, $1, NULL, 'com.example.app')
                """, [.int64(day)])
            try insert(
                "INSERT INTO webhook_endpoints (url_digest, url, gone_at) VALUES ('abc', $1, $2)",
                [.text("https://example.com/hook?x=1&y=\t"), .int64(day)])
            try insert(
                "INSERT INTO api_request_budget (bucket, next_slot_at_us) VALUES ('production', $1), ('sandbox', 1)",
                [.int64(day * 1000)])
            try insert(
                """
                INSERT INTO transactions (transaction_id, original_transaction_id, user_id, bundle_id, product_id,
                    environment, ownership_type, purchased_at, expires_at, price_milliunits, currency, storefront,
                    offer_type, offer_discount_type, is_trial, quantity, revoked_at, revocation_reason, revocation_type,
                    revocation_percentage, transaction_reason, upgraded, origin, signed_at, recorded_at, updated_at)
                VALUES ('t-1', 'otid-1', 'user-1', NULL, 'product', 'Production', 'PURCHASED', $1, $2, 9990, 'EUR',
                        'FRA', 1, 'FREE_TRIAL', 1, 1, NULL, NULL, NULL, NULL, 'PURCHASE', 0, 'status_answer', $1, $1, $1),
                       ('t-2', 'otid-1', 'user-1', 'com.example.app', 'product', 'Production', 'PURCHASED', $2, $3,
                        NULL, NULL, NULL, NULL, NULL, 0, 2, $3, 1, 'REFUND_PRORATED', 50000, 'RENEWAL', 1,
                        'verify_receipt', NULL, $3, $3)
                """, [.int64(day - 30), .int64(day), .int64(day + 30)])
            try insert(
                """
                INSERT INTO consumption_consents (user_id, consented, updated_at)
                VALUES ('user-1', 1, $1), ($2, 0, $1)
                """, [.int64(day), .text(awkward)])
            try insert(
                """
                INSERT INTO refund_requests (notification_uuid, transaction_id, original_transaction_id, user_id,
                    bundle_id, environment, product_id, reason, requested_at, answer_by, period_start, period_end, state,
                    attempts, next_attempt_at, claimed_until, answered_at, sent, apple_status, apple_error_code,
                    last_error, outcome, outcome_at, revocation_type, revocation_percentage, recorded_at, run_id)
                VALUES ('rr-1', 't-2', 'otid-1', 'user-1', 'com.example.app', 'Production', 'product',
                        'UNINTENDED_PURCHASE', $1, $2, $1, $3, 'answered', 1, NULL, NULL, $1, $4, 202, NULL, NULL,
                        'refunded', $2, 'REFUND_PRORATED', 50000, $1, 'run-1'),
                       ('rr-2', 't-9', NULL, NULL, NULL, 'Sandbox', NULL, NULL, $1, $2, NULL, NULL, 'pending', 0,
                        $1, NULL, NULL, NULL, NULL, NULL, $5, NULL, NULL, NULL, NULL, $1, NULL)
                """,
                [
                    .int64(day), .int64(day + 43_200_000), .int64(day + 30), .text(#"{"customerConsented":true}"#),
                    .text(awkward),
                ])
            try insert(
                """
                INSERT INTO renewal_extensions (request_identifier, intent_key, intent, original_transaction_id, user_id,
                    product_id, bundle_id, environment, days, reason, state, created_at, sent_at, answered_at,
                    effective_at, confirmed_at, apple_status, apple_error_code, last_error)
                VALUES ('6f1c0a52-1f1e-4d5e-9d2b-1a2b3c4d5e6f', $2, $2, 'otid-1', 'user-1', 'product', NULL,
                        'Production', 7, 3, 'succeeded', $1, $1, $1, $1, NULL, 200, NULL, NULL),
                       ('0b8e2c1d-7a6f-4e3d-8c2b-9a8b7c6d5e4f', 'outage\notid-2', 'outage', 'otid-2', 'user-2', NULL,
                        'com.example.app', 'Sandbox', 90, 0, 'rejected', $1, $1, $1, NULL, NULL, 403, 4030005, $2)
                """, [.int64(day), .text(awkward)])
            try insert(
                """
                INSERT INTO renewal_mass_extensions (request_identifier, intent_key, intent, product_id, storefronts,
                    bundle_id, environment, days, reason, state, created_at, sent_at, accepted_at, next_status_at,
                    status_checks, completed_at, succeeded_count, failed_count, apple_status, apple_error_code,
                    last_error)
                VALUES ('5d4c3b2a-1908-4f7e-8d6c-5b4a39281706', $2, $2, 'product', 'FRA,USA', NULL, 'Production', 3,
                        3, 'complete', $1, $1, $1, NULL, 2, $1, 40000, 0, 200, NULL, NULL),
                       ('4c3b2a19-0817-4e6d-9c5b-4a3928170605', 'mass', 'mass', 'product', NULL, 'com.example.app',
                        'Production', 1, 0, 'accepted', $1, $1, $1, $1, 0, NULL, NULL, NULL, 200, NULL, $2)
                """, [.int64(day), .text(awkward)])
            try insert(
                """
                INSERT INTO subscription_facts (original_transaction_id, kind, transaction_id, starts_at, ends_at, value,
                    stated_at, recorded_at, source, run_id)
                VALUES ('otid-1', 'grace_period', 't-1', $1, $2, NULL, $1, $1, 'answer', 'run-1'),
                       ('otid-2', 'auto_renew', NULL, $1, NULL, $3, $1, $1, 'migration', NULL)
                """, [.int64(day), .int64(day + 1_382_400_000), .text(awkward)])
            try insert(
                """
                INSERT INTO entitlement_spans (original_transaction_id, starts_at, ends_at, kind, by_grace,
                    transaction_id, product_id, bundle_id, environment)
                VALUES ('otid-1', $1, $2, 'paid', 1, 't-1', 'product', 'com.example.app', 'Production'),
                       ('otid-2', $1, NULL, 'trial', 0, $3, NULL, NULL, NULL)
                """, [.int64(day), .int64(day + 1_382_400_000), .text(awkward)])
            try insert(
                """
                INSERT INTO adopted_purchases (original_transaction_id, receipt_id, bundle_id, environment, product_id,
                    app_account_token, notification_uuid, adopted_at, run_id, claimed_user_id, claimed_at, claimed_by)
                VALUES ('otid-9', 1, 'com.example.app', 'Production', 'product', 'token-1', $2, $1, 'run-1', 'user-1',
                        $1, 'token'),
                       ('otid-8', 2, NULL, 'Sandbox', NULL, NULL, 'n-8', $1, NULL, NULL, NULL, NULL)
                """, [.int64(day), .text(awkward)])
            try insert(
                "INSERT INTO app_account_tokens (app_account_token, user_id, recorded_at) VALUES ($2, 'user-1', $1)",
                [.int64(day), .text(awkward)])
            try insert(
                """
                INSERT INTO discover_cursors (stream, window_start, window_end, page_token, pages, notifications,
                    started_at, updated_at, completed_at)
                VALUES ('Production', $1, $1, $2, 3, 60, $1, $1, NULL),
                       ('com.example.app/Sandbox', $1, $1, NULL, 1, 0, $1, $1, $1)
                """, [.int64(day), .text(awkward)])
        }
    }

    /// Every copied table's rows, in key order, as text (`NULL` for NULL).
    static func contents(_ database: any SQLDatabase) async throws -> [String: [[String]]] {
        try await database.withConnection { connection in
            var tables: [String: [[String]]] = [:]
            for table in DatabaseCopy.tables {
                let columns = try DatabaseCopy.columns(of: table.name, on: connection, dialect: database.dialect)
                    .sorted()
                let rows = try connection.execute(
                    "SELECT \(columns.joined(separator: ", ")) FROM \(table.name) ORDER BY \(table.key)", [])
                tables[table.name] = rows.map { row in row.values.map { DatabaseCopy.copyText($0) ?? "NULL" } }
            }
            return tables
        }
    }

    /// The rows of the dashboard views that do not read the clock, sorted.
    static func views(_ database: any SQLDatabase) async throws -> [String] {
        try await database.withConnection { connection in
            var lines: [String] = []
            for view in [
                "entitlements_by_product", "receipts_by_source", "changes_per_day", "refunds_per_day",
                "failures_by_reason", "notifications_per_day",
            ] {
                let rows = try connection.execute("SELECT * FROM \(view)", [])
                lines += rows.map { row in
                    view + ": "
                        + zip(row.columns, row.values).map { "\($0)=\(DatabaseCopy.copyText($1) ?? "NULL")" }.sorted()
                        .joined(separator: " ")
                }
            }
            let webhooks = try connection.execute(
                "SELECT state, changes, max_attempts, avg_delivery_seconds FROM webhook_deliveries", [])
            lines += webhooks.map {
                "webhook_deliveries: " + $0.values.map { DatabaseCopy.copyText($0) ?? "NULL" }.joined(separator: " ")
            }
            return lines.sorted()
        }
    }

    @Test("DatabaseCopy knows every table a migrated database holds, on both kinds")
    func everyTableIsKnown() async throws {
        let directory = try Self.directory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let sqlite = try SQLiteDatabase(path: directory + "/db.sqlite", create: true)
        _ = try await SQLSubscriptionStore(database: sqlite).migrate()
        let copied = Set(DatabaseCopy.tables.map(\.name))
        let sqliteTables = try await sqlite.withConnection { try DatabaseCopy.tableNames(on: $0, dialect: .sqlite) }
        #expect(
            sqliteTables
                == copied.union([
                    "schema_migrations", "analytics_daily", "analytics_cohorts", "analytics_summary_rows",
                    "analytics_summary_state", "analytics_summary_deltas",
                ]))
        try await PostgresTestSchema.with { schema in
            let postgres = try PostgresDatabase(url: schema.url)
            _ = try await SQLSubscriptionStore(database: postgres).migrate()
            let tables = try await postgres.withConnection { try DatabaseCopy.tableNames(on: $0, dialect: .postgres) }
            #expect(tables == copied.union(DatabaseCopy.tablesNotCopied))
        }
    }

    @Test(
        """
        every table goes SQLite to PostgreSQL and back intact, in batches smaller than the tables; the views \
        agree; PostgreSQL's next ids follow the copied ones
        """)
    func roundTrip() async throws {
        let directory = try Self.directory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let source = try SQLiteDatabase(path: directory + "/source.sqlite", create: true)
        _ = try await SQLSubscriptionStore(database: source).migrate()
        try await Self.fill(source)
        let original = try await Self.contents(source)
        #expect(
            original.values.allSatisfy { !$0.isEmpty },
            "a table was left empty: \(original.filter(\.value.isEmpty).keys)")
        try await PostgresTestSchema.with { schema in
            let postgres = try PostgresDatabase(url: schema.url)
            let there = try await DatabaseCopy(source: source, target: postgres, batchSize: 2, logger: Self.quiet).run()
            #expect(there.migrated == Array(1...SQLSchema.currentVersion))
            #expect(there.rows.first { $0.table == "receipts" }?.count == 5)
            #expect(try await Self.contents(postgres) == original)
            #expect(try await Self.views(postgres) == Self.views(source))
            let failures = try await postgres.withConnection {
                try $0.execute("SELECT receipts FROM failures_by_reason", []).map { try $0.int("receipts") }
            }
            #expect(failures == [2])

            let back = try SQLiteDatabase(path: directory + "/back.sqlite", create: true)
            _ = try await DatabaseCopy(source: postgres, target: back, batchSize: 3, logger: Self.quiet).run()
            #expect(try await Self.contents(back) == original)

            // New rows on PostgreSQL take ids after the copied ones.
            let ids = try await postgres.withConnection { connection in
                try [
                    connection.execute(
                        """
                        INSERT INTO receipts (user_id, latest_receipt, next_check_at, created_at, updated_at)
                        VALUES ('new', 'r', 0, 0, 0) RETURNING id
                        """, []),
                    connection.execute(
                        """
                        INSERT INTO entitlement_changes (user_id, kind, from_state, to_state, occurred_at)
                        VALUES ('new', 'granted', 'unverified', 'active', 0) RETURNING id
                        """, []),
                    connection.execute(
                        """
                        INSERT INTO run_failures (receipt_id, user_id, reason, message, occurred_at)
                        VALUES (1, 'new', 'r', 'm', 0) RETURNING id
                        """, []),
                    connection.execute(
                        """
                        INSERT INTO ownership_conflicts (original_transaction_id, owner_user_id, claimant_user_id,
                            detected_at)
                        VALUES ('o', 'a', 'b', 0) RETURNING id
                        """, []),
                ].map { try $0.first?.int("id") ?? -1 }
            }
            #expect(ids == [51, 401, 10, 4])
        }
    }

    @Test(
        """
        a copy that fails half-way (a value the target refuses, after receipts were written) leaves the target \
        without rows, and runs again once the value is fixed; a target holding rows is refused
        """)
    func failedCopyIsRetried() async throws {
        let directory = try Self.directory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let source = try SQLiteDatabase(path: directory + "/source.sqlite", create: true)
        _ = try await SQLSubscriptionStore(database: source).migrate()
        try await Self.fill(source)
        // SQLite keeps text it cannot read as a number in a BIGINT column; PostgreSQL refuses it.
        try await source.withConnection {
            _ = try $0.execute("UPDATE api_request_budget SET next_slot_at_us = 'soon' WHERE bucket = 'sandbox'", [])
        }
        try await PostgresTestSchema.with { schema in
            let postgres = try PostgresDatabase(url: schema.url)
            let copy = DatabaseCopy(source: source, target: postgres, batchSize: 2, logger: Self.quiet)
            do {
                _ = try await copy.run()
                Issue.record("a value PostgreSQL refuses was copied")
            } catch DatabaseCopyError.tableFailed(let table, let reason) {
                #expect(table == "api_request_budget")
                #expect(reason.contains("22P02") && !reason.contains("soon"), "\(reason)")
            }
            let left = try await Self.contents(postgres)
            #expect(left.values.allSatisfy { $0.isEmpty }, "\(left.filter { !$0.value.isEmpty }.keys)")
            #expect(try await Self.views(postgres).isEmpty)

            try await source.withConnection {
                _ = try $0.execute("UPDATE api_request_budget SET next_slot_at_us = 1 WHERE bucket = 'sandbox'", [])
            }
            let retried = try await copy.run()
            #expect(retried.migrated.isEmpty)
            #expect(try await Self.contents(postgres) == Self.contents(source))

            do {
                _ = try await copy.run()
                Issue.record("a target holding receipts was not refused")
            } catch DatabaseCopyError.targetNotEmpty(let table) {
                #expect(table == "receipts")
            }
        }
    }
}
