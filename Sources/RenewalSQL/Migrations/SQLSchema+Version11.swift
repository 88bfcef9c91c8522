extension SQLSchema {
    /// Version 11: dashboards that stay fast at ten million rows (PostgreSQL; SQLite keeps the
    /// views as they were, aggregating the tables on each query).
    ///
    /// The views that counted whole tables (`entitlements_by_product`, `receipts_by_source`,
    /// `changes_per_day`, `refunds_per_day`, `failures_by_reason`, `notifications_per_day`,
    /// `webhook_deliveries`) read small summary tables instead. Triggers keep each summary current
    /// in the transaction that writes the counted rows, whichever command or person writes them. A
    /// trigger only ever inserts a delta row (+1 / -1 for a group), so concurrent workers never wait
    /// on one another's counters; `compactSummaries` folds the deltas into one row per group after
    /// each run. `billing_backlog` lists rows, so it keeps reading `subscriptions`, through a partial
    /// index on the two backlog states, and an index answers its "since" lookup.
    ///
    /// Workers may keep running while a large database migrates:
    /// - The prelude (`version11Prelude`) runs statement by statement, before the migration's
    ///   transaction. Its indexes are built `CONCURRENTLY` (writes go on), and each trigger is made
    ///   with a lock held only for that statement. Every statement may run again after a crash.
    /// - The transaction then fills each summary with one statement: what the tables hold, minus
    ///   the deltas triggers already wrote, as of that statement's snapshot. Changes committed before
    ///   it are counted once by the tables, later ones once by their deltas. It swaps the views and
    ///   records the version, and locks no table against writes.
    /// No table is rewritten.
    static func version11Prelude(_ dialect: SQLDialect) -> [String] {
        guard dialect == .postgres else { return [] }
        return summaryIndexes + summaryTables + countingFunctions + eventCountingFunctions(dialect) + countingTriggers
    }

    /// The summary tables: triggers insert one delta row per group and write; `compactSummaries`
    /// folds them.
    private static var summaryTables: [String] {
        [
            """
            CREATE TABLE IF NOT EXISTS subscription_counts (
                bundle_id TEXT, product_id TEXT, environment TEXT, ownership_type TEXT NOT NULL,
                state TEXT NOT NULL, subscribers BIGINT NOT NULL
            )
            """,
            """
            CREATE TABLE IF NOT EXISTS receipt_counts (
                bundle_id TEXT, source TEXT NOT NULL, environment TEXT, status TEXT NOT NULL,
                receipts BIGINT NOT NULL, with_transaction_id BIGINT NOT NULL, migrated BIGINT NOT NULL
            )
            """,
            """
            CREATE TABLE IF NOT EXISTS change_counts (
                bundle_id TEXT, day TEXT NOT NULL, kind TEXT NOT NULL, product_id TEXT, environment TEXT,
                changes BIGINT NOT NULL
            )
            """,
            """
            CREATE TABLE IF NOT EXISTS failure_counts (
                bundle_id TEXT, day TEXT NOT NULL, reason TEXT NOT NULL, failures BIGINT NOT NULL,
                receipts BIGINT NOT NULL
            )
            """,
            """
            CREATE TABLE IF NOT EXISTS notification_counts (
                day TEXT NOT NULL, environment TEXT NOT NULL, notification_type TEXT NOT NULL, subtype TEXT,
                notifications BIGINT NOT NULL, unmatched BIGINT NOT NULL
            )
            """,
            """
            CREATE TABLE IF NOT EXISTS webhook_outcome_counts (
                state TEXT NOT NULL, changes BIGINT NOT NULL, oldest_queued_at BIGINT, max_attempts BIGINT,
                last_attempt_at BIGINT, delivery_ms_total BIGINT, max_delivery_ms BIGINT
            )
            """,
        ]
    }

    /// The indexes the summaries' fills and the views read through, built without blocking writes.
    private static var summaryIndexes: [String] {
        concurrentIndex("run_failures_receipt_id_idx", on: "run_failures (receipt_id, occurred_at)")
            // The newest migration of each group is read from the receipts through this index.
            + concurrentIndex(
                "receipts_migrated_at_idx",
                on: """
                    receipts (COALESCE(bundle_id, ''), COALESCE(source, 'unchecked'), COALESCE(environment, ''), status,
                              migrated_at)
                    WHERE migrated_at IS NOT NULL
                    """)
            + concurrentIndex(
                "subscriptions_billing_backlog_idx",
                on: """
                    subscriptions (state, expires_at) INCLUDE (original_transaction_id, receipt_id)
                    WHERE state IN ('billing_retry', 'grace_period')
                    """)
            + concurrentIndex(
                "entitlement_changes_original_transaction_id_idx",
                on: "entitlement_changes (original_transaction_id, to_state, occurred_at)")
            + concurrentIndex(
                "webhook_outbox_failed_at_idx", on: "webhook_outbox (failed_at, change_id) WHERE failed_at IS NOT NULL")
    }

    /// The counting functions of subscriptions and receipts. A subscription counts under its
    /// receipt's app; a receipt learning its app moves its subscriptions' counts with it. (Changes,
    /// failures and notifications are only ever inserted. A failure counts its receipt once per app,
    /// day and reason: when no other failure of that receipt is on record for them. A webhook
    /// delivery is counted when it finishes, delivered or given up, which it does once.)
    private static var countingFunctions: [String] {
        [
            """
            CREATE OR REPLACE FUNCTION renewal_count_subscription() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
                IF TG_OP IN ('UPDATE', 'DELETE') THEN
                    INSERT INTO subscription_counts
                    SELECT (SELECT bundle_id FROM receipts WHERE id = OLD.receipt_id), OLD.product_id,
                           OLD.environment, COALESCE(OLD.ownership_type, 'PURCHASED'), OLD.state, -1;
                END IF;
                IF TG_OP IN ('INSERT', 'UPDATE') THEN
                    INSERT INTO subscription_counts
                    SELECT (SELECT bundle_id FROM receipts WHERE id = NEW.receipt_id), NEW.product_id,
                           NEW.environment, COALESCE(NEW.ownership_type, 'PURCHASED'), NEW.state, 1;
                END IF;
                RETURN NULL;
            END
            $$
            """,
            """
            CREATE OR REPLACE FUNCTION renewal_count_receipt() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
                IF TG_OP = 'UPDATE' AND OLD.bundle_id IS DISTINCT FROM NEW.bundle_id THEN
                    INSERT INTO subscription_counts
                    SELECT b.bundle_id, s.product_id, s.environment, COALESCE(s.ownership_type, 'PURCHASED'), s.state,
                           b.sign * COUNT(*)
                    FROM subscriptions s, (VALUES (OLD.bundle_id, -1), (NEW.bundle_id, 1)) AS b (bundle_id, sign)
                    WHERE s.receipt_id = NEW.id
                    GROUP BY b.bundle_id, b.sign, s.product_id, s.environment, COALESCE(s.ownership_type, 'PURCHASED'),
                             s.state;
                END IF;
                IF TG_OP IN ('UPDATE', 'DELETE') THEN
                    INSERT INTO receipt_counts
                    SELECT OLD.bundle_id, COALESCE(OLD.source, 'unchecked'), OLD.environment, OLD.status, -1,
                           CASE WHEN OLD.original_transaction_id IS NOT NULL THEN -1 ELSE 0 END,
                           CASE WHEN OLD.migrated_at IS NOT NULL THEN -1 ELSE 0 END;
                END IF;
                IF TG_OP IN ('INSERT', 'UPDATE') THEN
                    INSERT INTO receipt_counts
                    SELECT NEW.bundle_id, COALESCE(NEW.source, 'unchecked'), NEW.environment, NEW.status, 1,
                           CASE WHEN NEW.original_transaction_id IS NOT NULL THEN 1 ELSE 0 END,
                           CASE WHEN NEW.migrated_at IS NOT NULL THEN 1 ELSE 0 END;
                END IF;
                RETURN NULL;
            END
            $$
            """,
        ]
    }

    /// The counting functions of rows that are only ever inserted: changes, failures, notifications
    /// and finished webhook deliveries.
    private static func eventCountingFunctions(_ dialect: SQLDialect) -> [String] {
        let day = { (column: String) in dialect.utcDay(column) }
        return [
            """
            CREATE OR REPLACE FUNCTION renewal_count_change() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
                INSERT INTO change_counts
                SELECT NEW.bundle_id, \(day("NEW.occurred_at")), NEW.kind, NEW.product_id, NEW.environment, 1;
                RETURN NULL;
            END
            $$
            """,
            """
            CREATE OR REPLACE FUNCTION renewal_count_failure() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
                INSERT INTO failure_counts
                SELECT NEW.bundle_id, \(day("NEW.occurred_at")), NEW.reason, 1,
                       CASE WHEN EXISTS (
                           SELECT 1 FROM run_failures f
                           WHERE f.receipt_id = NEW.receipt_id AND f.id <> NEW.id
                             AND f.occurred_at >= NEW.occurred_at - NEW.occurred_at % 86400000
                             AND f.occurred_at < NEW.occurred_at - NEW.occurred_at % 86400000 + 86400000
                             AND f.reason = NEW.reason AND f.bundle_id IS NOT DISTINCT FROM NEW.bundle_id
                       ) THEN 0 ELSE 1 END;
                RETURN NULL;
            END
            $$
            """,
            """
            CREATE OR REPLACE FUNCTION renewal_count_notification() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
                INSERT INTO notification_counts
                SELECT \(day("NEW.signed_at")), NEW.environment, NEW.notification_type, NEW.subtype, 1,
                       CASE WHEN NEW.original_transaction_id IS NOT NULL AND NEW.receipt_id IS NULL THEN 1 ELSE 0 END;
                RETURN NULL;
            END
            $$
            """,
            """
            CREATE OR REPLACE FUNCTION renewal_count_webhook_outcome() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
                INSERT INTO webhook_outcome_counts
                SELECT CASE WHEN NEW.delivered_at IS NOT NULL THEN 'delivered' ELSE 'failed' END, 1, NEW.created_at,
                       NEW.attempts, NEW.last_attempt_at, NEW.delivered_at - NEW.created_at,
                       NEW.delivered_at - NEW.created_at;
                RETURN NULL;
            END
            $$
            """,
        ]
    }

    /// The triggers that call the counting functions, each only when a counted column changes.
    private static var countingTriggers: [String] {
        trigger(
            "subscriptions_counted", on: "subscriptions", "AFTER INSERT OR DELETE", "renewal_count_subscription")
            + trigger(
                "subscriptions_recounted", on: "subscriptions",
                """
                AFTER UPDATE OF receipt_id, product_id, environment, ownership_type, state
                """, "renewal_count_subscription",
                when: """
                    (OLD.receipt_id, OLD.product_id, OLD.environment, OLD.ownership_type, OLD.state)
                    IS DISTINCT FROM (NEW.receipt_id, NEW.product_id, NEW.environment, NEW.ownership_type, NEW.state)
                    """)
            + trigger("receipts_counted", on: "receipts", "AFTER INSERT OR DELETE", "renewal_count_receipt")
            + trigger(
                "receipts_recounted", on: "receipts",
                "AFTER UPDATE OF bundle_id, source, environment, status, original_transaction_id, migrated_at",
                "renewal_count_receipt",
                when: """
                    (OLD.bundle_id, OLD.source, OLD.environment, OLD.status, OLD.original_transaction_id IS NULL,
                     OLD.migrated_at IS NULL)
                    IS DISTINCT FROM (NEW.bundle_id, NEW.source, NEW.environment, NEW.status,
                                      NEW.original_transaction_id IS NULL, NEW.migrated_at IS NULL)
                    """)
            + trigger("entitlement_changes_counted", on: "entitlement_changes", "AFTER INSERT", "renewal_count_change")
            + trigger("run_failures_counted", on: "run_failures", "AFTER INSERT", "renewal_count_failure")
            + trigger(
                "feed_notifications_counted", on: "feed_notifications", "AFTER INSERT", "renewal_count_notification")
            + trigger(
                "webhook_outbox_finished", on: "webhook_outbox", "AFTER UPDATE OF delivered_at, failed_at",
                "renewal_count_webhook_outcome",
                when: """
                    OLD.delivered_at IS NULL AND OLD.failed_at IS NULL
                    AND (NEW.delivered_at IS NOT NULL OR NEW.failed_at IS NOT NULL)
                    """)
            + trigger(
                "webhook_outbox_inserted_finished", on: "webhook_outbox", "AFTER INSERT",
                "renewal_count_webhook_outcome",
                when: "NEW.delivered_at IS NOT NULL OR NEW.failed_at IS NOT NULL")
    }

    static func version11(_ dialect: SQLDialect) -> [String] {
        guard dialect == .postgres else { return [] }
        return summaryFills(dialect, schemaVersion: 11) + countViews + activityViews(dialect)
    }

    /// The views of entitlements, receipts and changes, reading the summaries.
    private static var countViews: [String] {
        let entitledStates = "('active', 'grace_period')"
        return [
            "DROP VIEW entitlements_by_product",
            """
            CREATE VIEW entitlements_by_product AS
            SELECT bundle_id, product_id, environment, ownership_type, state,
                   CASE WHEN state IN \(entitledStates) THEN 1 ELSE 0 END AS entitled,
                   CAST(SUM(subscribers) AS BIGINT) AS subscribers
            FROM subscription_counts
            GROUP BY bundle_id, product_id, environment, ownership_type, state
            HAVING SUM(subscribers) <> 0
            """,
            "DROP VIEW receipts_by_source",
            """
            CREATE VIEW receipts_by_source AS
            SELECT g.bundle_id, g.source, g.environment, g.status, g.receipts, g.with_transaction_id, g.migrated,
                   CASE WHEN g.migrated > 0 THEN (
                       SELECT MAX(r.migrated_at) FROM receipts r
                       WHERE r.migrated_at IS NOT NULL AND COALESCE(r.bundle_id, '') = COALESCE(g.bundle_id, '')
                         AND COALESCE(r.source, 'unchecked') = g.source
                         AND COALESCE(r.environment, '') = COALESCE(g.environment, '') AND r.status = g.status
                   ) END AS last_migrated_at_ms
            FROM (
                SELECT bundle_id, source, environment, status, CAST(SUM(receipts) AS BIGINT) AS receipts,
                       CAST(SUM(with_transaction_id) AS BIGINT) AS with_transaction_id,
                       CAST(SUM(migrated) AS BIGINT) AS migrated
                FROM receipt_counts
                GROUP BY bundle_id, source, environment, status
                HAVING SUM(receipts) <> 0
            ) g
            """,
            "DROP VIEW refunds_per_day",
            "DROP VIEW changes_per_day",
            """
            CREATE VIEW changes_per_day AS
            SELECT bundle_id, day, kind, product_id, environment, CAST(SUM(changes) AS BIGINT) AS changes
            FROM change_counts
            GROUP BY bundle_id, day, kind, product_id, environment
            """,
            """
            CREATE VIEW refunds_per_day AS
            SELECT bundle_id, day, product_id, environment, CAST(SUM(changes) AS BIGINT) AS refunds
            FROM change_counts
            WHERE kind = 'refunded'
            GROUP BY bundle_id, day, product_id, environment
            """,
        ]
    }

    /// The views of failures, notifications and webhook deliveries, reading the summaries, and the
    /// billing backlog through its partial index.
    private static func activityViews(_ dialect: SQLDialect) -> [String] {
        [
            "DROP VIEW failures_by_reason",
            """
            CREATE VIEW failures_by_reason AS
            SELECT bundle_id, day, reason, CAST(SUM(failures) AS BIGINT) AS failures,
                   CAST(SUM(receipts) AS BIGINT) AS receipts
            FROM failure_counts
            GROUP BY bundle_id, day, reason
            """,
            "DROP VIEW notifications_per_day",
            """
            CREATE VIEW notifications_per_day AS
            SELECT day, environment, notification_type, subtype, CAST(SUM(notifications) AS BIGINT) AS notifications,
                   CAST(SUM(unmatched) AS BIGINT) AS unmatched
            FROM notification_counts
            GROUP BY day, environment, notification_type, subtype
            """,
            "DROP VIEW webhook_deliveries",
            """
            CREATE VIEW webhook_deliveries AS
            SELECT state, COUNT(*) AS changes, MIN(created_at) AS oldest_queued_at_ms,
                   (\(dialect.nowMilliseconds) - MIN(created_at)) / 1000.0 AS oldest_age_seconds,
                   MAX(attempts) AS max_attempts, MAX(last_attempt_at) AS last_attempt_at_ms,
                   CAST(NULL AS NUMERIC) AS avg_delivery_seconds, CAST(NULL AS NUMERIC) AS max_delivery_seconds
            FROM (
                SELECT CASE WHEN attempts = 0 THEN 'queued' ELSE 'retrying' END AS state, created_at, attempts,
                       last_attempt_at
                FROM webhook_outbox
                WHERE delivered_at IS NULL AND failed_at IS NULL
            ) pending
            GROUP BY state
            UNION ALL
            SELECT state, CAST(SUM(changes) AS BIGINT), MIN(oldest_queued_at), NULL, MAX(max_attempts),
                   MAX(last_attempt_at),
                   CASE WHEN state = 'delivered' THEN SUM(delivery_ms_total) / SUM(changes) / 1000.0 END,
                   CASE WHEN state = 'delivered' THEN MAX(max_delivery_ms) / 1000.0 END
            FROM webhook_outcome_counts
            GROUP BY state
            """,
            "DROP VIEW billing_backlog",
            // A LEFT JOIN (every subscription has its receipt) lets PostgreSQL skip the receipts
            // when a query does not ask for the app; the clock is read once per query, and the
            // days are a double as on SQLite, so counting a large backlog reads only its index.
            """
            CREATE VIEW billing_backlog AS
            SELECT b.bundle_id, b.user_id, b.original_transaction_id, b.product_id, b.environment, b.state, b.since_ms,
                   ((SELECT \(dialect.nowMilliseconds)) - b.since_ms) / CAST(86400000 AS DOUBLE PRECISION)
                       AS days_in_state,
                   b.expires_at_ms, b.grace_period_expires_at_ms
            FROM (
                SELECT r.bundle_id, s.user_id, s.original_transaction_id, s.product_id, s.environment, s.state,
                       COALESCE(s.expires_at, (
                           SELECT MAX(c.occurred_at) FROM entitlement_changes c
                           WHERE c.original_transaction_id = s.original_transaction_id AND c.to_state = s.state
                       )) AS since_ms,
                       s.expires_at AS expires_at_ms, s.grace_period_expires_at AS grace_period_expires_at_ms
                FROM subscriptions s LEFT JOIN receipts r ON r.id = s.receipt_id
                WHERE s.state IN ('billing_retry', 'grace_period')
            ) b
            """,
        ]
    }
}
