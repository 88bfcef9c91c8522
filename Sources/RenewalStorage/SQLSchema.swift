import Foundation

/// The versioned schema, written once for SQLite and PostgreSQL. Times are Unix epoch milliseconds
/// (`BIGINT`), booleans `INTEGER` 0/1 (or NULL when unknown), strings `TEXT`.
///
/// Migrations are append-only: a released version is never edited; a change is a new version.
public enum SQLSchema {
    /// One schema version: statements run in order, in one transaction, then recorded in
    /// `schema_migrations`.
    public struct Migration: Sendable {
        public var version: Int
        public var statements: @Sendable (SQLDialect) -> [String]
        /// Statements run one by one before the transaction, each on its own, for work that must
        /// not hold locks for long on a large table (`CREATE INDEX CONCURRENTLY`). Each must be
        /// harmless to run again: a migration interrupted after them runs them again.
        public var prelude: @Sendable (SQLDialect) -> [String] = { _ in [] }
    }

    /// The version this build expects.
    public static var currentVersion: Int { migrations.last?.version ?? 0 }

    /// Every migration, oldest first.
    public static let migrations: [Migration] = [
        Migration(version: 1, statements: version1),
        Migration(version: 2, statements: version2),
        Migration(version: 3, statements: version3),
        Migration(version: 4, statements: version4),
        Migration(version: 5, statements: version5),
        Migration(version: 6, statements: version6),
        Migration(version: 7, statements: version7),
        Migration(version: 8, statements: version8),
        Migration(version: 9, statements: version9),
        Migration(version: 10, statements: version10),
        Migration(version: 11, statements: version11, prelude: version11Prelude),
        Migration(version: 12, statements: version12, prelude: version12Prelude),
        Migration(version: 13, statements: version13),
    ]

    static let createMigrationsTable = """
        CREATE TABLE IF NOT EXISTS schema_migrations (
            version INTEGER PRIMARY KEY,
            applied_at BIGINT NOT NULL
        )
        """

    fileprivate static func version1(_ dialect: SQLDialect) -> [String] {
        [
            """
            CREATE TABLE receipts (
                id \(dialect.identityPrimaryKey),
                user_id TEXT NOT NULL UNIQUE,
                latest_receipt TEXT NOT NULL,
                imported_product_id TEXT,
                status TEXT NOT NULL DEFAULT 'unverified' CHECK (status IN ('unverified', 'verified', 'invalid')),
                environment TEXT,
                next_check_at BIGINT NOT NULL,
                last_checked_at BIGINT,
                last_verified_at BIGINT,
                consecutive_failures INTEGER NOT NULL DEFAULT 0,
                consecutive_malformed INTEGER NOT NULL DEFAULT 0,
                last_failure_reason TEXT,
                lease_owner TEXT,
                lease_expires_at BIGINT,
                created_at BIGINT NOT NULL,
                updated_at BIGINT NOT NULL
            )
            """,
            "CREATE INDEX receipts_next_check_at_idx ON receipts (next_check_at, id)",
            """
            CREATE TABLE subscriptions (
                original_transaction_id TEXT PRIMARY KEY,
                receipt_id BIGINT NOT NULL REFERENCES receipts (id),
                user_id TEXT NOT NULL,
                product_id TEXT,
                state TEXT NOT NULL,
                entitled INTEGER NOT NULL,
                expires_at BIGINT,
                auto_renew INTEGER,
                auto_renew_product_id TEXT,
                grace_period_expires_at BIGINT,
                billing_retry INTEGER NOT NULL DEFAULT 0,
                cancelled_at BIGINT,
                expiration_intent TEXT,
                is_trial INTEGER NOT NULL DEFAULT 0,
                is_intro_offer INTEGER NOT NULL DEFAULT 0,
                ownership_type TEXT,
                environment TEXT,
                latest_transaction_id TEXT,
                subscription_group_id TEXT,
                last_verified_at BIGINT,
                next_check_at BIGINT NOT NULL,
                updated_at BIGINT NOT NULL
            )
            """,
            "CREATE INDEX subscriptions_receipt_id_idx ON subscriptions (receipt_id)",
            "CREATE INDEX subscriptions_user_id_idx ON subscriptions (user_id)",
            """
            CREATE TABLE runs (
                id TEXT PRIMARY KEY,
                command TEXT NOT NULL,
                started_at BIGINT NOT NULL,
                finished_at BIGINT,
                status TEXT NOT NULL,
                exit_code INTEGER,
                checked INTEGER NOT NULL DEFAULT 0,
                changed INTEGER NOT NULL DEFAULT 0,
                unchanged INTEGER NOT NULL DEFAULT 0,
                failed INTEGER NOT NULL DEFAULT 0,
                conflicts INTEGER NOT NULL DEFAULT 0,
                host TEXT NOT NULL,
                process_id BIGINT NOT NULL
            )
            """,
            """
            CREATE TABLE entitlement_changes (
                id \(dialect.identityPrimaryKey),
                run_id TEXT,
                user_id TEXT NOT NULL,
                original_transaction_id TEXT,
                product_id TEXT,
                kind TEXT NOT NULL,
                from_state TEXT NOT NULL,
                to_state TEXT NOT NULL,
                old_expires_at BIGINT,
                new_expires_at BIGINT,
                environment TEXT,
                ownership_type TEXT,
                occurred_at BIGINT NOT NULL
            )
            """,
            "CREATE INDEX entitlement_changes_run_id_idx ON entitlement_changes (run_id)",
            "CREATE INDEX entitlement_changes_occurred_at_idx ON entitlement_changes (occurred_at)",
            """
            CREATE TABLE run_failures (
                id \(dialect.identityPrimaryKey),
                run_id TEXT,
                receipt_id BIGINT NOT NULL,
                user_id TEXT NOT NULL,
                reason TEXT NOT NULL,
                message TEXT NOT NULL,
                occurred_at BIGINT NOT NULL
            )
            """,
            "CREATE INDEX run_failures_run_id_idx ON run_failures (run_id)",
            """
            CREATE TABLE ownership_conflicts (
                id \(dialect.identityPrimaryKey),
                run_id TEXT,
                original_transaction_id TEXT NOT NULL,
                owner_user_id TEXT NOT NULL,
                claimant_user_id TEXT NOT NULL,
                product_id TEXT,
                detected_at BIGINT NOT NULL
            )
            """,
            "CREATE INDEX ownership_conflicts_run_id_idx ON ownership_conflicts (run_id)",
        ]
    }
}

extension SQLSchema {
    /// Version 2: when a receipt's run of 21002/21003 rejections began (a never-verified receipt is
    /// invalid only after rejections spread over days), and since when a valid answer showed it
    /// holds no auto-renewable subscription.
    fileprivate static func version2(_ dialect: SQLDialect) -> [String] {
        [
            "ALTER TABLE receipts ADD COLUMN rejected_since BIGINT",
            "ALTER TABLE receipts ADD COLUMN no_subscription_since BIGINT",
        ]
    }

    /// Version 3: crash recovery. Each run row names the worker that leases rows for it (a dead
    /// worker's leases are taken back and its run marked `abandoned`), counts the results it could
    /// not write because its lease was gone, and two small partial indexes find leased rows and
    /// running runs without scanning the tables.
    fileprivate static func version3(_ dialect: SQLDialect) -> [String] {
        [
            "ALTER TABLE runs ADD COLUMN worker_id TEXT",
            "ALTER TABLE runs ADD COLUMN lease_lost INTEGER NOT NULL DEFAULT 0",
            "CREATE INDEX receipts_lease_owner_idx ON receipts (lease_owner) WHERE lease_owner IS NOT NULL",
            "CREATE INDEX runs_running_idx ON runs (worker_id) WHERE status = 'running'",
        ]
    }

    /// Version 4: dashboards. The run counts the report has and the table lacked, and seven views
    /// written once for both databases (stable names and columns, documented in the README).
    fileprivate static func version4(_ dialect: SQLDialect) -> [String] {
        let entitledStates = "('active', 'grace_period')"
        return [
            "ALTER TABLE runs ADD COLUMN receipts_changed INTEGER NOT NULL DEFAULT 0",
            "ALTER TABLE runs ADD COLUMN invalid INTEGER NOT NULL DEFAULT 0",
            "ALTER TABLE runs ADD COLUMN skipped INTEGER NOT NULL DEFAULT 0",
            "ALTER TABLE runs ADD COLUMN recovered_leases INTEGER NOT NULL DEFAULT 0",
            "ALTER TABLE runs ADD COLUMN due_at_start INTEGER",
            "ALTER TABLE runs ADD COLUMN due_left INTEGER NOT NULL DEFAULT 0",
            "CREATE INDEX runs_started_at_idx ON runs (started_at)",
            "CREATE INDEX run_failures_occurred_at_idx ON run_failures (occurred_at)",
            """
            CREATE VIEW entitlements_by_product AS
            SELECT product_id, environment, COALESCE(ownership_type, 'PURCHASED') AS ownership_type, state,
                   CASE WHEN state IN \(entitledStates) THEN 1 ELSE 0 END AS entitled, COUNT(*) AS subscribers
            FROM subscriptions
            GROUP BY product_id, environment, COALESCE(ownership_type, 'PURCHASED'), state
            """,
            """
            CREATE VIEW changes_per_day AS
            SELECT \(dialect.utcDay("occurred_at")) AS day, kind, product_id, environment, COUNT(*) AS changes
            FROM entitlement_changes
            GROUP BY \(dialect.utcDay("occurred_at")), kind, product_id, environment
            """,
            // A subscription enters billing retry or its grace period when its paid period ends, so
            // its expiry is when the backlog entry began; the change that moved it there stands in
            // when Apple gave no expiry.
            """
            CREATE VIEW billing_backlog AS
            SELECT b.user_id, b.original_transaction_id, b.product_id, b.environment, b.state, b.since_ms,
                   (\(dialect.nowMilliseconds) - b.since_ms) / 86400000.0 AS days_in_state,
                   b.expires_at_ms, b.grace_period_expires_at_ms
            FROM (
                SELECT s.user_id, s.original_transaction_id, s.product_id, s.environment, s.state,
                       COALESCE(s.expires_at, (
                           SELECT MAX(c.occurred_at) FROM entitlement_changes c
                           WHERE c.original_transaction_id = s.original_transaction_id AND c.to_state = s.state
                       )) AS since_ms,
                       s.expires_at AS expires_at_ms, s.grace_period_expires_at AS grace_period_expires_at_ms
                FROM subscriptions s
                WHERE s.state IN ('billing_retry', 'grace_period')
            ) b
            """,
            """
            CREATE VIEW refunds_per_day AS
            SELECT \(dialect.utcDay("occurred_at")) AS day, product_id, environment, COUNT(*) AS refunds
            FROM entitlement_changes
            WHERE kind = 'refunded'
            GROUP BY \(dialect.utcDay("occurred_at")), product_id, environment
            """,
            """
            CREATE VIEW run_history AS
            SELECT id AS run_id, command, status, exit_code, started_at AS started_at_ms, finished_at AS finished_at_ms,
                   (finished_at - started_at) / 1000.0 AS duration_seconds, checked, changed, failed, conflicts,
                   lease_lost, host, worker_id
            FROM runs
            """,
            """
            CREATE VIEW failures_by_reason AS
            SELECT \(dialect.utcDay("occurred_at")) AS day, reason, COUNT(*) AS failures, COUNT(DISTINCT receipt_id) AS receipts
            FROM run_failures
            GROUP BY \(dialect.utcDay("occurred_at")), reason
            """,
            """
            CREATE VIEW shared_apple_id_conflicts AS
            SELECT detected_at AS detected_at_ms, \(dialect.utcDay("detected_at")) AS day, original_transaction_id,
                   product_id, owner_user_id, claimant_user_id, run_id
            FROM ownership_conflicts
            """,
        ]
    }

    /// Version 5: the App Store Server API. Each receipt keeps the source that read it last, the
    /// original transaction id the Server API is asked by, and when it moved to that API; each change
    /// names its source; each run counts its migrations; one row per rate-limited request stream
    /// holds the fleet's next free slot; one view shows where the migration stands.
    fileprivate static func version5(_ dialect: SQLDialect) -> [String] {
        [
            "ALTER TABLE receipts ADD COLUMN source TEXT CHECK (source IN ('verify_receipt', 'server_api'))",
            "ALTER TABLE receipts ADD COLUMN original_transaction_id TEXT",
            "ALTER TABLE receipts ADD COLUMN migrated_at BIGINT",
            "ALTER TABLE entitlement_changes ADD COLUMN source TEXT",
            "ALTER TABLE runs ADD COLUMN migrated INTEGER NOT NULL DEFAULT 0",
            """
            CREATE TABLE api_request_budget (
                bucket TEXT PRIMARY KEY,
                next_slot_at_us BIGINT NOT NULL
            )
            """,
            """
            CREATE VIEW receipts_by_source AS
            SELECT COALESCE(source, 'unchecked') AS source, environment, status, COUNT(*) AS receipts,
                   SUM(CASE WHEN original_transaction_id IS NOT NULL THEN 1 ELSE 0 END) AS with_transaction_id,
                   SUM(CASE WHEN migrated_at IS NOT NULL THEN 1 ELSE 0 END) AS migrated,
                   MAX(migrated_at) AS last_migrated_at_ms
            FROM receipts
            GROUP BY COALESCE(source, 'unchecked'), environment, status
            """,
        ]
    }

    /// The highest applied version, or 0 when the schema was never migrated.
    static func appliedVersion(on connection: any SQLConnection, dialect: SQLDialect) throws -> Int {
        let present = try connection.execute(dialect.tableExistsQuery, [.text("schema_migrations")])
        guard !present.isEmpty else { return 0 }
        let rows = try connection.execute("SELECT MAX(version) AS version FROM schema_migrations", [])
        return try rows.first?.optionalInt("version") ?? 0
    }

    /// Applies every missing migration, each in its own transaction. Returns the versions applied.
    static func migrate(
        on connection: any SQLConnection, dialect: SQLDialect, now: Date, through version: Int = currentVersion
    ) throws -> [Int] {
        _ = try connection.execute(createMigrationsTable, [])
        var applied: [Int] = []
        func isApplied(_ migration: Migration) throws -> Bool {
            try !connection.execute(
                "SELECT version FROM schema_migrations WHERE version = $1", [.int64(Int64(migration.version))]
            ).isEmpty
        }
        for migration in migrations where migration.version <= version {
            let prelude = migration.prelude(dialect)
            if !prelude.isEmpty, try !isApplied(migration) {
                for statement in prelude { _ = try connection.execute(statement, []) }
            }
            let didApply = try connection.transaction { () throws -> Bool in
                let found = try appliedVersion(on: connection, dialect: dialect)
                if found > currentVersion {
                    throw SubscriptionStoreError.schemaTooNew(found: found, expected: currentVersion)
                }
                guard try !isApplied(migration) else { return false }
                for statement in migration.statements(dialect) {
                    _ = try connection.execute(statement, [])
                }
                _ = try connection.execute(
                    "INSERT INTO schema_migrations (version, applied_at) VALUES ($1, $2)",
                    [.int64(Int64(migration.version)), SQLValue(now)]
                )
                return true
            }
            if didApply { applied.append(migration.version) }
        }
        return applied
    }
}

extension SQLSchema {
    /// Version 6: StoreKit 2 rows. A row may hold a transaction id and no receipt (`latest_receipt`
    /// is then the empty string: the column stays `NOT NULL`, so no table is rewritten), and the
    /// `appAccountToken` the app set at purchase. Adding a nullable column rewrites nothing on
    /// either database.
    fileprivate static func version6(_ dialect: SQLDialect) -> [String] {
        [
            "ALTER TABLE receipts ADD COLUMN app_account_token TEXT"
        ]
    }
}

extension SQLSchema {
    /// Version 7: Apple's change feed (Notification History). Per environment, where the last
    /// completed pull ended; each notification acted on, once (its `notificationUUID` is the key, so
    /// overlapping windows and repeated pages never act twice), with the receipt it made due (NULL
    /// when the database does not know the subscription); the run's feed counts; the
    /// `notifications_per_day` view.
    fileprivate static func version7(_ dialect: SQLDialect) -> [String] {
        [
            """
            CREATE TABLE feed_cursors (
                environment TEXT PRIMARY KEY,
                pulled_until BIGINT NOT NULL,
                updated_at BIGINT NOT NULL
            )
            """,
            """
            CREATE TABLE feed_notifications (
                notification_uuid TEXT PRIMARY KEY,
                environment TEXT NOT NULL,
                notification_type TEXT NOT NULL,
                subtype TEXT,
                original_transaction_id TEXT,
                receipt_id BIGINT,
                signed_at BIGINT NOT NULL,
                received_at BIGINT NOT NULL,
                run_id TEXT
            )
            """,
            "CREATE INDEX feed_notifications_signed_at_idx ON feed_notifications (signed_at)",
            """
            CREATE INDEX feed_notifications_original_transaction_id_idx
            ON feed_notifications (original_transaction_id, signed_at)
            """,
            "CREATE INDEX feed_notifications_receipt_id_idx ON feed_notifications (receipt_id, signed_at)",
            "CREATE INDEX receipts_original_transaction_id_idx ON receipts (original_transaction_id)",
            """
            CREATE VIEW notifications_per_day AS
            SELECT \(dialect.utcDay("signed_at")) AS day, environment, notification_type, subtype,
                   COUNT(*) AS notifications,
                   SUM(CASE WHEN original_transaction_id IS NOT NULL AND receipt_id IS NULL THEN 1 ELSE 0 END)
                       AS unmatched
            FROM feed_notifications
            GROUP BY \(dialect.utcDay("signed_at")), environment, notification_type, subtype
            """,
            "ALTER TABLE runs ADD COLUMN notifications INTEGER NOT NULL DEFAULT 0",
            "ALTER TABLE runs ADD COLUMN notifications_unmatched INTEGER NOT NULL DEFAULT 0",
            "ALTER TABLE runs ADD COLUMN feed_lag_ms BIGINT",
        ]
    }
}

extension SQLSchema {
    /// Version 8: polling less while the change feed is healthy. `receipts.polling_check_at` is when
    /// the polling schedule would have checked a receipt that the feed's schedule put later, so a
    /// feed turning unhealthy can move such receipts back (`fallBackToPolling`); the partial index
    /// keeps that move to the rows concerned. `feed_cursors.pulled_since` is where the first read of
    /// an unbroken run of reads began (a feed read for less than a day cannot be called silent);
    /// `runs.feed_fallback` names the environments a run polled on today's schedule, and why.
    fileprivate static func version8(_ dialect: SQLDialect) -> [String] {
        [
            "ALTER TABLE receipts ADD COLUMN polling_check_at BIGINT",
            """
            CREATE INDEX receipts_polling_check_at_idx ON receipts (environment, polling_check_at)
            WHERE polling_check_at IS NOT NULL
            """,
            "ALTER TABLE feed_cursors ADD COLUMN pulled_since BIGINT",
            "ALTER TABLE runs ADD COLUMN feed_fallback TEXT",
        ]
    }
}

extension SQLSchema {
    /// Version 9: the webhook outbox. One row per entitlement change to deliver, written in the
    /// transaction that records the change (when a webhook URL is configured): its attempts, when
    /// the next is due, the last error, and when it was delivered or given up; claimed with a lease
    /// like receipts. `webhook_endpoints` remembers a URL that answered 410 Gone; `runs` keeps each run's
    /// delivery counts; the view `webhook_deliveries` is the outbox by state for dashboards.
    fileprivate static func version9(_ dialect: SQLDialect) -> [String] {
        [
            """
            CREATE TABLE webhook_outbox (
                change_id BIGINT PRIMARY KEY,
                user_id TEXT NOT NULL,
                created_at BIGINT NOT NULL,
                attempts INTEGER NOT NULL DEFAULT 0,
                next_attempt_at BIGINT NOT NULL,
                last_error TEXT,
                last_attempt_at BIGINT,
                delivered_at BIGINT,
                failed_at BIGINT,
                lease_owner TEXT,
                lease_expires_at BIGINT
            )
            """,
            """
            CREATE INDEX webhook_outbox_pending_idx ON webhook_outbox (user_id, change_id)
            WHERE delivered_at IS NULL AND failed_at IS NULL
            """,
            """
            CREATE INDEX webhook_outbox_due_idx ON webhook_outbox (next_attempt_at)
            WHERE delivered_at IS NULL AND failed_at IS NULL
            """,
            "ALTER TABLE runs ADD COLUMN webhooks_delivered INTEGER",
            "ALTER TABLE runs ADD COLUMN webhooks_failed INTEGER",
            "ALTER TABLE runs ADD COLUMN webhook_oldest_undelivered_ms BIGINT",
            """
            CREATE TABLE webhook_endpoints (
                url_digest TEXT PRIMARY KEY,
                url TEXT NOT NULL,
                gone_at BIGINT NOT NULL
            )
            """,
            // `queued`: never tried; `retrying`: tried, waiting for its next attempt; `delivered`;
            // `failed`: given up. Ages and delays only where they mean something.
            """
            CREATE VIEW webhook_deliveries AS
            SELECT state, COUNT(*) AS changes, MIN(created_at) AS oldest_queued_at_ms,
                   CASE WHEN state IN ('queued', 'retrying')
                        THEN (\(dialect.nowMilliseconds) - MIN(created_at)) / 1000.0 END AS oldest_age_seconds,
                   MAX(attempts) AS max_attempts, MAX(last_attempt_at) AS last_attempt_at_ms,
                   CASE WHEN state = 'delivered' THEN AVG(delivered_at - created_at) / 1000.0 END
                       AS avg_delivery_seconds,
                   CASE WHEN state = 'delivered' THEN MAX(delivered_at - created_at) / 1000.0 END
                       AS max_delivery_seconds
            FROM (
                SELECT CASE WHEN delivered_at IS NOT NULL THEN 'delivered'
                            WHEN failed_at IS NOT NULL THEN 'failed'
                            WHEN attempts = 0 THEN 'queued'
                            ELSE 'retrying' END AS state,
                       created_at, attempts, last_attempt_at, delivered_at
                FROM webhook_outbox
            ) o
            GROUP BY state
            """,
        ]
    }
}

extension SQLSchema {
    /// Version 10: several apps in one database. `receipts.bundle_id` is the app a receipt belongs
    /// to: given at import, or learnt from Apple's first valid answer and kept from then on (NULL
    /// until then). Each change and failure records the app of its receipt at the time, so reports
    /// and dashboards split by app without a join; `runs.apps_stopped` names the apps whose
    /// credentials Apple rejected in that run (comma-separated), whose rows it left untouched.
    /// Apple's change feed is per app: with several apps `feed_cursors.environment` holds
    /// `bundle_id/Environment` (one cursor per app and environment) and `feed_notifications.bundle_id`
    /// the app whose feed listed a notification.
    /// The dashboard views that count receipts, subscriptions, changes or failures gain a first
    /// column `bundle_id` (NULL for rows whose app is not known yet) and are split by it; each is
    /// dropped and made again, as a view cannot gain a column in the middle.
    /// Columns only: no table is rewritten, so the migration is quick on a large table.
    fileprivate static func version10(_ dialect: SQLDialect) -> [String] {
        let entitledStates = "('active', 'grace_period')"
        let views = [
            "entitlements_by_product", "changes_per_day", "billing_backlog", "refunds_per_day", "failures_by_reason",
            "receipts_by_source",
        ]
        return [
            "ALTER TABLE receipts ADD COLUMN bundle_id TEXT",
            "ALTER TABLE entitlement_changes ADD COLUMN bundle_id TEXT",
            "ALTER TABLE run_failures ADD COLUMN bundle_id TEXT",
            "ALTER TABLE runs ADD COLUMN apps_stopped TEXT",
            "ALTER TABLE feed_notifications ADD COLUMN bundle_id TEXT",
        ] + views.map { "DROP VIEW \($0)" } + [
            """
            CREATE VIEW entitlements_by_product AS
            SELECT r.bundle_id, s.product_id, s.environment, COALESCE(s.ownership_type, 'PURCHASED') AS ownership_type,
                   s.state, CASE WHEN s.state IN \(entitledStates) THEN 1 ELSE 0 END AS entitled,
                   COUNT(*) AS subscribers
            FROM subscriptions s JOIN receipts r ON r.id = s.receipt_id
            GROUP BY r.bundle_id, s.product_id, s.environment, COALESCE(s.ownership_type, 'PURCHASED'), s.state
            """,
            """
            CREATE VIEW changes_per_day AS
            SELECT bundle_id, \(dialect.utcDay("occurred_at")) AS day, kind, product_id, environment, COUNT(*) AS changes
            FROM entitlement_changes
            GROUP BY bundle_id, \(dialect.utcDay("occurred_at")), kind, product_id, environment
            """,
            """
            CREATE VIEW billing_backlog AS
            SELECT b.bundle_id, b.user_id, b.original_transaction_id, b.product_id, b.environment, b.state, b.since_ms,
                   (\(dialect.nowMilliseconds) - b.since_ms) / 86400000.0 AS days_in_state,
                   b.expires_at_ms, b.grace_period_expires_at_ms
            FROM (
                SELECT r.bundle_id, s.user_id, s.original_transaction_id, s.product_id, s.environment, s.state,
                       COALESCE(s.expires_at, (
                           SELECT MAX(c.occurred_at) FROM entitlement_changes c
                           WHERE c.original_transaction_id = s.original_transaction_id AND c.to_state = s.state
                       )) AS since_ms,
                       s.expires_at AS expires_at_ms, s.grace_period_expires_at AS grace_period_expires_at_ms
                FROM subscriptions s JOIN receipts r ON r.id = s.receipt_id
                WHERE s.state IN ('billing_retry', 'grace_period')
            ) b
            """,
            """
            CREATE VIEW refunds_per_day AS
            SELECT bundle_id, \(dialect.utcDay("occurred_at")) AS day, product_id, environment, COUNT(*) AS refunds
            FROM entitlement_changes
            WHERE kind = 'refunded'
            GROUP BY bundle_id, \(dialect.utcDay("occurred_at")), product_id, environment
            """,
            """
            CREATE VIEW failures_by_reason AS
            SELECT bundle_id, \(dialect.utcDay("occurred_at")) AS day, reason, COUNT(*) AS failures,
                   COUNT(DISTINCT receipt_id) AS receipts
            FROM run_failures
            GROUP BY bundle_id, \(dialect.utcDay("occurred_at")), reason
            """,
            """
            CREATE VIEW receipts_by_source AS
            SELECT bundle_id, COALESCE(source, 'unchecked') AS source, environment, status, COUNT(*) AS receipts,
                   SUM(CASE WHEN original_transaction_id IS NOT NULL THEN 1 ELSE 0 END) AS with_transaction_id,
                   SUM(CASE WHEN migrated_at IS NOT NULL THEN 1 ELSE 0 END) AS migrated,
                   MAX(migrated_at) AS last_migrated_at_ms
            FROM receipts
            GROUP BY bundle_id, COALESCE(source, 'unchecked'), environment, status
            """,
        ]
    }
}
