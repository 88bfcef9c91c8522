import AppStoreSimulator
import Foundation
import RenewalJob
import RenewalPostgres
import RenewalSQL
import RenewalStorage
import RenewalTesting
import Testing

/// The PostgreSQL dashboard summaries (schema 11): each view reads its summary or index, and gives
/// what aggregating the tables gives, after runs and after writes made behind the job's back.
@Suite("Dashboard summaries on PostgreSQL", .enabled(if: PostgresWorkersHarness.baseURL != nil))
struct DashboardSummaryTests {
    /// The docs' example query of each view (docs/dashboards.md; the backlog's 20 longest in
    /// docs/postgresql.md), what its plan must read, what it must not scan, and a plan type switched off
    /// first where the test's few thousand rows make it cheaper than the index that serves ten million
    /// (then the plan shows whether the index can do without it).
    static let plans: [(query: String, reads: String, avoids: [String], disabled: String?)] = [
        (
            "SELECT product_id, SUM(subscribers) AS entitled FROM entitlements_by_product WHERE entitled = 1 AND environment = 'Production' GROUP BY product_id ORDER BY entitled DESC",
            "subscription_counts", ["on subscriptions", "on receipts"], nil
        ),
        (
            "SELECT day, kind, SUM(changes) AS changes FROM changes_per_day WHERE day >= '2026-11-01' GROUP BY day, kind ORDER BY day",
            "change_counts", ["on entitlement_changes"], nil
        ),
        (
            "SELECT state, COUNT(*) AS subscriptions, MAX(days_in_state) AS oldest_days FROM billing_backlog GROUP BY state",
            // Either partial index of the backlog serves the count; the covering one wins at scale.
            "_backlog_", ["Seq Scan on subscriptions", "on receipts"], nil
        ),
        (
            "SELECT l.user_id, r.bundle_id AS app, l.product_id, l.environment, l.state, l.days_in_state FROM (SELECT * FROM (SELECT original_transaction_id, user_id, product_id, environment, state, days_in_state FROM billing_backlog WHERE expires_at_ms IS NOT NULL ORDER BY expires_at_ms LIMIT 20) AS dated UNION ALL SELECT * FROM (SELECT original_transaction_id, user_id, product_id, environment, state, days_in_state FROM billing_backlog WHERE expires_at_ms IS NULL ORDER BY since_ms NULLS LAST LIMIT 20) AS undated) AS l JOIN subscriptions s ON s.original_transaction_id = l.original_transaction_id LEFT JOIN receipts r ON r.id = s.receipt_id ORDER BY l.days_in_state DESC NULLS LAST LIMIT 20",
            // The 20 longest: the 20 earliest expiries in index order, and the few rows without one.
            "Index Scan using subscriptions_backlog_expiry_idx", ["Seq Scan on subscriptions"], nil
        ),
        (
            "SELECT day, SUM(refunds) AS refunds FROM refunds_per_day GROUP BY day ORDER BY day DESC LIMIT 30",
            "change_counts", ["on entitlement_changes"], nil
        ),
        (
            "SELECT run_id, command, status, exit_code, duration_seconds, checked, failed FROM run_history ORDER BY started_at_ms DESC LIMIT 50",
            "runs_started_at_idx", ["Seq Scan on runs"], nil
        ),
        (
            "SELECT reason, SUM(failures) AS failures FROM failures_by_reason WHERE day >= '2026-11-01' GROUP BY reason ORDER BY failures DESC",
            "failure_counts", ["on run_failures"], nil
        ),
        (
            "SELECT day, notification_type, SUM(notifications) AS notifications, SUM(unmatched) AS unmatched FROM notifications_per_day WHERE environment = 'Production' GROUP BY day, notification_type ORDER BY day DESC",
            "notification_counts", ["on feed_notifications"], nil
        ),
        (
            "SELECT state, changes, oldest_age_seconds, max_attempts, avg_delivery_seconds FROM webhook_deliveries ORDER BY state",
            "webhook_outcome_counts", ["Seq Scan on webhook_outbox"], nil
        ),
        (
            "SELECT source, environment, status, receipts, with_transaction_id, migrated FROM receipts_by_source",
            "receipt_counts", ["on receipts"], nil
        ),
        (
            "SELECT source, status, last_migrated_at_ms FROM receipts_by_source",
            "receipts_migrated_at_idx", ["Seq Scan on receipts"], nil
        ),
    ]

    /// Writes the job does not make, straight in SQL: thousands of rows of another app, so the
    /// planner sees tables worth an index; then moves between groups (a refund, an app learnt, a
    /// migration, a product change, a deleted subscription) that the triggers must follow.
    static let outsideWrites = [
        """
        INSERT INTO receipts (user_id, latest_receipt, status, environment, next_check_at, created_at, updated_at,
                              source, original_transaction_id, migrated_at, bundle_id)
        SELECT 'bulk-' || i, '', CASE WHEN i % 40 = 0 THEN 'invalid' ELSE 'verified' END,
               CASE WHEN i % 25 = 0 THEN 'Sandbox' ELSE 'Production' END, 4102444800000, 0, 0,
               CASE WHEN i % 2 = 0 THEN 'server_api' ELSE 'verify_receipt' END, 'bulk-' || i,
               CASE WHEN i % 3 = 0 THEN 1700000000000 + i END, CASE WHEN i % 10 = 0 THEN NULL ELSE 'com.example.bulk' END
        FROM generate_series(1::bigint, 20000) i
        """,
        """
        INSERT INTO subscriptions (original_transaction_id, receipt_id, user_id, product_id, state, entitled, expires_at,
                                   ownership_type, environment, next_check_at, updated_at)
        SELECT r.original_transaction_id, r.id, r.user_id, 'com.example.bulk.' || (r.id % 3),
               CASE WHEN r.id % 50 = 0 THEN 'billing_retry' WHEN r.id % 60 = 0 THEN 'grace_period'
                    WHEN r.id % 4 = 0 THEN 'expired' ELSE 'active' END,
               CASE WHEN r.id % 4 = 0 THEN 0 ELSE 1 END, 1700000000000 + r.id,
               CASE WHEN r.id % 9 = 0 THEN 'FAMILY_SHARED' END, r.environment, 4102444800000, 0
        FROM receipts r WHERE r.user_id LIKE 'bulk-%' AND r.status = 'verified'
        """,
        """
        INSERT INTO entitlement_changes (run_id, user_id, original_transaction_id, product_id, kind, from_state,
                                         to_state, environment, occurred_at, bundle_id)
        SELECT 'bulk', 'bulk-' || i, 'bulk-' || i, 'com.example.bulk.' || (i % 3),
               CASE WHEN i % 7 = 0 THEN 'refunded' ELSE 'renewed' END, 'active',
               CASE WHEN i % 7 = 0 THEN 'revoked' ELSE 'active' END, 'Production',
               1700000000000 + i * 60000, 'com.example.bulk'
        FROM generate_series(1::bigint, 30000) i
        """,
        """
        INSERT INTO run_failures (run_id, receipt_id, user_id, reason, message, occurred_at, bundle_id)
        SELECT 'bulk', i % 700, 'bulk-' || (i % 700), CASE WHEN i % 3 = 0 THEN 'timeout' ELSE 'http_503' END, 'x',
               1700000000000 + i * 600000, 'com.example.bulk'
        FROM generate_series(1::bigint, 8000) i
        """,
        """
        INSERT INTO feed_notifications (notification_uuid, environment, notification_type, subtype,
                                        original_transaction_id, receipt_id, signed_at, received_at, bundle_id)
        SELECT 'bulk-' || i, 'Production', CASE WHEN i % 2 = 0 THEN 'DID_RENEW' ELSE 'REFUND' END, NULL,
               'bulk-' || i, CASE WHEN i % 5 = 0 THEN NULL ELSE i END, 1700000000000 + i * 60000, 0,
               'com.example.bulk'
        FROM generate_series(1::bigint, 10000) i
        """,
        """
        INSERT INTO webhook_outbox (change_id, user_id, created_at, attempts, next_attempt_at, last_attempt_at,
                                    delivered_at, failed_at)
        SELECT 1000000 + i, 'bulk-' || i, 1700000000000 + i * 1000, 1 + i % 4, 0, 1700000000000 + i * 1000 + 500,
               CASE WHEN i % 100 <> 0 THEN 1700000000000 + i * 1000 + (i % 5000) END,
               CASE WHEN i % 100 = 0 AND i % 200 <> 0 THEN 1700000000000 + i * 1000 + 9000 END
        FROM generate_series(1::bigint, 20000) i
        """,
        """
        INSERT INTO runs (id, command, started_at, status, host, process_id)
        SELECT 'bulk-' || i, 'run', 1700000000000 + i * 1800000, 'completed', 'bulk', 1 FROM generate_series(1::bigint, 5000) i
        """,
        "UPDATE subscriptions SET state = 'revoked', entitled = 0 WHERE user_id LIKE 'bulk-%' AND receipt_id % 11 = 0",
        "UPDATE receipts SET bundle_id = 'com.example.bulk' WHERE user_id LIKE 'bulk-%' AND bundle_id IS NULL AND id % 20 = 0",
        """
        UPDATE receipts SET source = 'server_api', migrated_at = 1800000000000 + id
        WHERE user_id LIKE 'bulk-%' AND source = 'verify_receipt' AND id % 13 = 0
        """,
        "UPDATE subscriptions SET product_id = 'com.example.bulk.9' WHERE user_id LIKE 'bulk-%' AND receipt_id % 17 = 0",
        "DELETE FROM subscriptions WHERE user_id LIKE 'bulk-%' AND receipt_id % 23 = 0",
        // Backlog rows without an expiry: since their last change into the state, or since unknown.
        """
        UPDATE subscriptions SET expires_at = NULL
        WHERE user_id LIKE 'bulk-%' AND state IN ('billing_retry', 'grace_period') AND receipt_id % 3 = 0
        """,
        """
        INSERT INTO entitlement_changes (run_id, user_id, original_transaction_id, product_id, kind, from_state,
                                         to_state, environment, occurred_at, bundle_id)
        SELECT 'bulk', s.user_id, s.original_transaction_id, s.product_id, 'billing_issue', 'active', s.state,
               'Production', 1750000000000 + s.receipt_id * 1000, 'com.example.bulk'
        FROM subscriptions s
        WHERE s.user_id LIKE 'bulk-%' AND s.expires_at IS NULL AND s.receipt_id % 2 = 0
        """,
        "ANALYZE",
    ]

    static func rows(_ store: PostgresSubscriptionStore, _ sql: String) async throws -> [String] {
        try await DashboardAggregates.rows(store.database, sql)
    }

    static func expectSummariesMatch(
        _ store: PostgresSubscriptionStore, _ moment: String, everyViewHasRows: Bool = false
    ) async throws {
        for comparison in try await DashboardAggregates.compare(store.database) {
            #expect(comparison.summarized == comparison.counted, "\(comparison.view), \(moment)")
            if everyViewHasRows {
                #expect(!comparison.counted.isEmpty, "\(comparison.view) has rows to compare, \(moment)")
            }
        }
        if everyViewHasRows {
            let webhooks = try await rows(store, "SELECT state FROM webhook_deliveries")
            #expect(webhooks.count == 4, "queued, retrying, delivered and failed: \(webhooks)")
        }
    }

    @Test(
        "Each view equals the aggregate it replaces, after runs with renewals, refunds and expiries and after writes in SQL; the docs' example queries read the summaries and indexes"
    )
    func summariesMatchAndPlansUseThem() async throws {
        try await JobHarness.with(.postgres) { h in
            let store = try #require(h.store as? PostgresSubscriptionStore)
            try await h.importReceipts([
                ("renew", h.receipt("renew", .renewal, daysAgo: 40)),
                ("quit", h.receipt("quit", .voluntaryExpiry, daysAgo: 40)),
                ("retry", h.receipt("retry", .billingRetry, daysAgo: 33)),
                ("grace", h.receipt("grace", .gracePeriod, daysAgo: 2)),
                ("recover", h.receipt("recover", .billingRecovery, daysAgo: 33)),
                ("refund", h.receipt("refund", .refund, daysAgo: 20)),
                ("upgrade", h.receipt("upgrade", .upgrade, daysAgo: 20)),
                ("family", h.receipt("family", .familyShared, daysAgo: 5)),
                ("tester", h.receipt("tester", .sandbox, daysAgo: 5)),
                ("down", h.receipt("down", .outage, daysAgo: 5)),
            ])
            _ = try await h.run { $0.queueWebhooks = true }
            try await Self.expectSummariesMatch(store, "after the first run")
            // Deliveries that went three ways: delivered, retried, given up.
            let outbox = try #require(h.store as? any WebhookOutboxStore)
            let now = Date()
            try await DashboardViewsTests.deliverThreeWays(outbox, now: now)
            try await Self.expectSummariesMatch(store, "after deliveries")
            let status = try await outbox.deliveryStatus(now: now)
            #expect(status.delivered == 1 && status.failed == 1 && status.pending >= 2, "\(status)")
            h.state.advance(by: 30 * 86_400)
            let second = try await h.run { $0.queueWebhooks = true }
            #expect(second.counts.changed >= 4, "renewals, the refund and expiries change rows: \(second.counts)")
            h.state.advance(by: 40 * 86_400)
            _ = try await h.run()
            try await Self.expectSummariesMatch(store, "after three runs")

            // Compaction after each run left one row per group.
            for summary in DashboardSummary.all {
                let groups = summary.groups.joined(separator: ", ")
                let duplicates = try await Self.rows(
                    store,
                    "SELECT \(groups) FROM \(summary.table) GROUP BY \(groups) HAVING COUNT(*) > 1")
                #expect(duplicates.isEmpty, "\(summary.table) compacted")
            }

            for statement in Self.outsideWrites {
                _ = try await store.database.withConnection { try $0.execute(statement, []) }
            }
            try await Self.expectSummariesMatch(store, "after writes in SQL", everyViewHasRows: true)
            try await store.compactSummaries()
            try await Self.expectSummariesMatch(store, "after compacting")

            for (query, reads, avoids, disabled) in Self.plans {
                let plan = try await store.database.withConnection { connection in
                    if let disabled { _ = try connection.execute("SET \(disabled) = off", []) }
                    defer { if let disabled { _ = try? connection.execute("RESET \(disabled)", []) } }
                    return try connection.execute("EXPLAIN " + query, [])
                }
                .compactMap { $0["QUERY PLAN"].flatMap { if case .text(let line) = $0 { line } else { nil } } }
                .joined(separator: "\n")
                #expect(plan.contains(reads), "\(query) reads \(reads):\n\(plan)")
                for scan in avoids { #expect(!plan.contains(scan), "\(query) avoids \(scan):\n\(plan)") }
            }
        }
    }

    @Test("The docs (README.md and docs/*.md) give these example queries")
    func docsHaveTheQueries() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        let pages = try FileManager.default.contentsOfDirectory(atPath: root.appendingPathComponent("docs").path)
            .filter { $0.hasSuffix(".md") }.map { "docs/" + $0 }
        let docs = try (["README.md"] + pages).map {
            try String(contentsOf: root.appendingPathComponent($0), encoding: .utf8)
        }
        for (query, _, _, _) in Self.plans.dropLast() {
            #expect(docs.contains { $0.contains(query) }, "\(query)")
        }
    }
}
