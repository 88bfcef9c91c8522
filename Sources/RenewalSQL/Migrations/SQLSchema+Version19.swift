extension SQLSchema {
    /// Version 19: answering Apple's refund requests. `consumption_consents` keeps, per user, whether the
    /// app recorded the customer's consent to share consumption data with Apple (an import line's
    /// `consumption_consent`; the last line wins), and the delivery status and consumption share the app
    /// supplies instead of the job's own figures (`consumption_delivery_status`, `consumption_percentage`). `refund_requests` holds each `CONSUMPTION_REQUEST`
    /// from the change feed, one row per notification: when Apple asked and the deadline (12 hours on),
    /// what the job sent and when, Apple's answer, and the outcome once a `REFUND` or `REFUND_DECLINED`
    /// arrives. A partial index finds the requests still to answer. `refund_request_outcomes` counts them
    /// per day of request, state and outcome for dashboards. `runs` keeps what each run did with them.
    static func version19(_ dialect: SQLDialect) -> [String] {
        [
            """
            CREATE TABLE consumption_consents (
                user_id TEXT PRIMARY KEY,
                consented INTEGER,
                delivery_status TEXT,
                consumption_percentage INTEGER,
                updated_at BIGINT NOT NULL
            )
            """,
            """
            CREATE TABLE refund_requests (
                notification_uuid TEXT PRIMARY KEY,
                transaction_id TEXT NOT NULL,
                original_transaction_id TEXT,
                user_id TEXT,
                bundle_id TEXT,
                environment TEXT NOT NULL,
                product_id TEXT,
                reason TEXT,
                requested_at BIGINT NOT NULL,
                answer_by BIGINT NOT NULL,
                period_start BIGINT,
                period_end BIGINT,
                state TEXT NOT NULL,
                attempts INTEGER NOT NULL DEFAULT 0,
                next_attempt_at BIGINT,
                claimed_until BIGINT,
                answered_at BIGINT,
                sent TEXT,
                apple_status INTEGER,
                apple_error_code INTEGER,
                last_error TEXT,
                outcome TEXT,
                outcome_at BIGINT,
                revocation_type TEXT,
                revocation_percentage INTEGER,
                recorded_at BIGINT NOT NULL,
                run_id TEXT
            )
            """,
            "CREATE INDEX refund_requests_open_idx ON refund_requests (next_attempt_at) WHERE state = 'pending'",
            "CREATE INDEX refund_requests_transaction_idx ON refund_requests (transaction_id)",
            """
            CREATE VIEW refund_request_outcomes AS
            SELECT \(dialect.utcDay("requested_at")) AS day, bundle_id, environment, reason, state,
                COALESCE(outcome, 'none') AS outcome, COUNT(*) AS requests,
                SUM(CASE WHEN answered_at IS NOT NULL AND answered_at <= answer_by THEN 1 ELSE 0 END)
                    AS answered_in_time
            FROM refund_requests
            GROUP BY \(dialect.utcDay("requested_at")), bundle_id, environment, reason, state,
                COALESCE(outcome, 'none')
            """,
            "ALTER TABLE runs ADD COLUMN refund_requests INTEGER NOT NULL DEFAULT 0",
            "ALTER TABLE runs ADD COLUMN refund_requests_answered INTEGER NOT NULL DEFAULT 0",
            "ALTER TABLE runs ADD COLUMN refund_requests_unanswered INTEGER NOT NULL DEFAULT 0",
            "ALTER TABLE runs ADD COLUMN refund_requests_missed INTEGER NOT NULL DEFAULT 0",
        ]
    }
}
