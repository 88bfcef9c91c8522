import Foundation
import RenewalPostgres

@testable import RenewalSQL
@testable import RenewalStorage
import RenewalTesting
import Synchronization
import Testing

/// Schema 11 on a database that workers keep writing to: the summaries it builds count every row
/// once, whether a write committed before the triggers existed, between them and the fill, or after.
/// Where the migration stands (0 before, 1 while it runs, 2 after, 3 stop writing), and how many
/// writes committed in each.
final class Progress: Sendable {
    let phase = Atomic<Int>(0)
    let writes = Mutex([0, 0, 0, 0])
}

@Suite(
    "Dashboard summaries built while a worker writes (PostgreSQL)",
    .enabled(if: PostgresTestSchema.baseURL != nil, "RENEWAL_TEST_POSTGRES_URL is not set"))
struct SummaryMigrationTests {
    /// A schema 10 database with some of everything the summaries count.
    static let seed = [
        """
        INSERT INTO receipts (user_id, latest_receipt, status, environment, next_check_at, created_at, updated_at,
                              source, original_transaction_id, migrated_at, bundle_id)
        SELECT 'seed-' || i, '', CASE WHEN i % 30 = 0 THEN 'invalid' ELSE 'verified' END,
               CASE WHEN i % 20 = 0 THEN 'Sandbox' ELSE 'Production' END, 0, 0, 0,
               CASE WHEN i % 2 = 0 THEN 'server_api' WHEN i % 7 = 0 THEN NULL ELSE 'verify_receipt' END, 'seed-' || i,
               CASE WHEN i % 3 = 0 THEN 1700000000000 + i END, CASE WHEN i % 4 = 0 THEN NULL ELSE 'com.example.app' END
        FROM generate_series(1::bigint, 3000) i
        """,
        """
        INSERT INTO subscriptions (original_transaction_id, receipt_id, user_id, product_id, state, entitled,
                                   expires_at, ownership_type, environment, next_check_at, updated_at)
        SELECT original_transaction_id, id, user_id, 'p' || (id % 3),
               CASE WHEN id % 5 = 0 THEN 'expired' WHEN id % 9 = 0 THEN 'billing_retry' ELSE 'active' END,
               1, 1700000000000, CASE WHEN id % 6 = 0 THEN 'FAMILY_SHARED' END, environment, 0, 0
        FROM receipts WHERE status = 'verified'
        """,
        """
        INSERT INTO entitlement_changes (run_id, user_id, original_transaction_id, product_id, kind, from_state,
                                         to_state, environment, occurred_at, bundle_id)
        SELECT 'seed', 'seed-' || i, 'seed-' || i, 'p' || (i % 3), CASE WHEN i % 5 = 0 THEN 'refunded' ELSE 'renewed' END,
               'active', 'active', 'Production', 1700000000000 + i * 600000, 'com.example.app'
        FROM generate_series(1::bigint, 3000) i
        """,
        """
        INSERT INTO run_failures (run_id, receipt_id, user_id, reason, message, occurred_at, bundle_id)
        SELECT 'seed', i % 300, 'seed-' || (i % 300), 'timeout', 'x', 1700000000000 + i * 600000, 'com.example.app'
        FROM generate_series(1::bigint, 2000) i
        """,
        """
        INSERT INTO feed_notifications (notification_uuid, environment, notification_type, original_transaction_id,
                                        receipt_id, signed_at, received_at)
        SELECT 'seed-' || i, 'Production', 'DID_RENEW', 'seed-' || i, CASE WHEN i % 4 = 0 THEN NULL ELSE i END,
               1700000000000 + i * 600000, 0
        FROM generate_series(1::bigint, 2000) i
        """,
        """
        INSERT INTO webhook_outbox (change_id, user_id, created_at, attempts, next_attempt_at, delivered_at)
        SELECT id, user_id, occurred_at, CASE WHEN id % 2 = 0 THEN 1 ELSE 0 END, 0,
               CASE WHEN id % 2 = 0 THEN occurred_at + 3000 END
        FROM entitlement_changes
        """,
    ]

    /// One worker-like transaction: a new customer, a state change, an app learnt, a change with its
    /// webhook, one delivered, a failure and a notification.
    static func write(_ n: Int) -> [String] {
        let old = n % 2500 + 1
        return [
            """
            INSERT INTO receipts (user_id, latest_receipt, status, environment, next_check_at, created_at, updated_at,
                                  source, original_transaction_id)
            VALUES ('w-\(n)', '', 'verified', 'Production', 0, 0, 0, 'server_api', 'w-\(n)')
            """,
            """
            INSERT INTO subscriptions (original_transaction_id, receipt_id, user_id, product_id, state, entitled,
                                       environment, next_check_at, updated_at)
            SELECT 'w-\(n)', id, user_id, 'p\(n % 3)', 'active', 1, 'Production', 0, 0 FROM receipts WHERE user_id = 'w-\(n)'
            """,
            """
            UPDATE subscriptions SET state = CASE WHEN state = 'active' THEN 'billing_retry' ELSE 'active' END
            WHERE receipt_id = \(old)
            """,
            "UPDATE receipts SET bundle_id = 'com.example.late' WHERE id = \(old) AND bundle_id IS NULL",
            "UPDATE receipts SET source = 'server_api', migrated_at = \(1_800_000_000_000 + n) WHERE id = \(old + 1)",
            """
            INSERT INTO entitlement_changes (run_id, user_id, original_transaction_id, product_id, kind, from_state,
                                             to_state, environment, occurred_at, bundle_id)
            VALUES ('w', 'w-\(n)', 'w-\(n)', 'p1', 'verified', 'unverified', 'active', 'Production',
                    \(1_800_000_000_000 + n * 60_000), 'com.example.app')
            """,
            """
            INSERT INTO webhook_outbox (change_id, user_id, created_at, next_attempt_at)
            SELECT MAX(id), 'w-\(n)', \(1_800_000_000_000 + n * 60_000), 0 FROM entitlement_changes
            """,
            """
            UPDATE webhook_outbox SET delivered_at = created_at + \(n % 7 * 1000), attempts = 1,
                                      last_attempt_at = created_at + 500
            WHERE change_id = \(2 * (n % 1500) + 1) AND delivered_at IS NULL
            """,
            """
            INSERT INTO run_failures (run_id, receipt_id, user_id, reason, message, occurred_at, bundle_id)
            VALUES ('w', \(old), 'seed-\(old)', 'http_503', 'x', \(1_800_000_000_000 + n * 600_000), 'com.example.app')
            """,
            """
            INSERT INTO feed_notifications (notification_uuid, environment, notification_type, original_transaction_id,
                                            receipt_id, signed_at, received_at)
            VALUES ('w-\(n)', 'Production', 'REFUND', 'w-\(n)', NULL, \(1_800_000_000_000 + n * 60_000), 0)
            """,
        ]
    }

    @Test(
        """
        a worker writes before, during and after the migration to schema 11 and on to 12 (new receipts counted \
        per statement): every summarized view then equals the aggregate over the tables
        """)
    func migrationUnderWrites() async throws {
        try await PostgresTestSchema.with { schema in
            let store = try PostgresSubscriptionStore.open(url: schema.url)
            #expect(try await store.migrate(through: 10) == Array(1...10))
            for statement in Self.seed {
                _ = try await store.database.withConnection { try $0.execute(statement, []) }
            }
            let progress = Progress()
            let writer = try PostgresDatabase(url: schema.url)
            let writing = Task {
                var n = 0
                while progress.phase.load(ordering: .sequentiallyConsistent) < 3 {
                    n += 1
                    let statements = Self.write(n)
                    let started = progress.phase.load(ordering: .sequentiallyConsistent)
                    try await writer.withConnection { connection in
                        try connection.transaction {
                            for statement in statements { _ = try connection.execute(statement, []) }
                        }
                    }
                    // Counted as during the migration only if it began and ended while it ran.
                    let ended = progress.phase.load(ordering: .sequentiallyConsistent)
                    progress.writes.withLock { $0[started == ended ? ended : 3] += 1 }
                }
            }
            // Bounded: a writer that failed must fail the test, not leave it waiting (this wait once hung CI
            // for an hour after a deadlock between the migration and the writer).
            func waitForWrites(in moment: Int, atLeast count: Int) async throws {
                let deadline = ContinuousClock.now + .seconds(120)
                while progress.writes.withLock({ $0[moment] }) < count {
                    if ContinuousClock.now > deadline {
                        progress.phase.store(3, ordering: .sequentiallyConsistent)
                        try await writing.value
                        Issue.record("fewer than \(count) writes in phase \(moment) after 120 s")
                        return
                    }
                    try await Task.sleep(for: .milliseconds(5))
                }
            }
            try await waitForWrites(in: 0, atLeast: 5)
            progress.phase.store(1, ordering: .sequentiallyConsistent)
            // One version at a time, and a whole write committed at each: a version that runs before the
            // writer is scheduled (a CI machine short of CPU once migrated 11 to 31 with no write in between)
            // would otherwise leave nothing written during the migration.
            var applied: [Int] = []
            for version in 11...SQLSchema.currentVersion {
                applied += try await store.migrate(through: version)
                try await waitForWrites(in: 1, atLeast: progress.writes.withLock { $0[1] } + 1)
            }
            #expect(applied == Array(11...SQLSchema.currentVersion))
            progress.phase.store(2, ordering: .sequentiallyConsistent)
            try await waitForWrites(in: 2, atLeast: 5)
            progress.phase.store(3, ordering: .sequentiallyConsistent)
            try await writing.value

            let counts = progress.writes.withLock { $0 }
            #expect(counts[1] >= SQLSchema.currentVersion - 10, "writes committed while the migration ran: \(counts)")
            try await store.compactSummaries()
            for comparison in try await DashboardAggregates.compare(store.database) {
                #expect(comparison.summarized == comparison.counted, "\(comparison.view) after \(counts) writes")
                #expect(!comparison.counted.isEmpty, "\(comparison.view) has rows")
            }
        }
    }
}
