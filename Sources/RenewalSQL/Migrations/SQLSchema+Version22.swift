extension SQLSchema {
    /// Version 22: the SQL side reads the decision instead of its own list of entitled states.
    ///
    /// `entitlement_spans` keeps each subscription's entitled spans as Core computes them
    /// (`EntitlementTimeline.spans`: `[starts_at, ends_at)`, `ends_at` NULL when open, `kind` paid or trial,
    /// `by_grace`, the entitling `transaction_id`), replaced in the transaction that writes the
    /// subscription's ledger rows or facts. Existing databases get theirs rebuilt by this migration from
    /// the ledger and `subscription_facts`, 500 subscriptions at a time (`version22Rebuild`).
    ///
    /// `entitlements_by_product` keeps its name and columns; its `entitled` column is now the decision
    /// stored on each row (`subscriptions.entitled`, Core's `SubscriptionState.grantsAccess`), no longer
    /// `state IN ('active', 'grace_period')`, so a group whose rows disagree splits in two. On PostgreSQL
    /// `subscription_counts` gains `entitled` in its groups: its triggers count it (the prelude replaces
    /// them, lock by lock, and is safe to run again), and this transaction fills the summary by the new
    /// groups (what the table holds minus the deltas already counted), so the view stays a sum of a few
    /// rows at ten million subscriptions. The fill and the view's swap come last (`version22Views`, after
    /// the spans), so dashboards reading the view wait only for the end of the transaction.
    static func version22(_ dialect: SQLDialect) -> [String] {
        [
            """
            CREATE TABLE entitlement_spans (
                id \(dialect.identityPrimaryKey),
                original_transaction_id TEXT NOT NULL,
                starts_at BIGINT NOT NULL,
                ends_at BIGINT,
                kind TEXT NOT NULL,
                by_grace INTEGER NOT NULL,
                transaction_id TEXT NOT NULL,
                product_id TEXT,
                bundle_id TEXT,
                environment TEXT
            )
            """,
            """
            CREATE UNIQUE INDEX entitlement_spans_subscription_idx
                ON entitlement_spans (original_transaction_id, starts_at)
            """,
            "CREATE INDEX entitlement_spans_ends_at_idx ON entitlement_spans (ends_at, starts_at)",
        ]
    }

    /// The views' swap (and on PostgreSQL the summary's fill by the new groups), run after the spans are
    /// built so `entitlements_by_product` is locked only for the end of the migration's transaction.
    static func version22Views(_ dialect: SQLDialect) -> [String] {
        guard dialect == .postgres else {
            return [
                "DROP VIEW entitlements_by_product",
                """
                CREATE VIEW entitlements_by_product AS
                SELECT r.bundle_id, s.product_id, s.environment, COALESCE(s.ownership_type, 'PURCHASED') AS ownership_type,
                       s.state, s.entitled, COUNT(*) AS subscribers
                FROM subscriptions s JOIN receipts r ON r.id = s.receipt_id
                GROUP BY r.bundle_id, s.product_id, s.environment, COALESCE(s.ownership_type, 'PURCHASED'), s.state,
                         s.entitled
                """,
            ]
        }
        return [
            subscriptionsFill(schemaVersion: 22),
            "DROP VIEW entitlements_by_product",
            """
            CREATE VIEW entitlements_by_product AS
            SELECT bundle_id, product_id, environment, ownership_type, state, entitled,
                   CAST(SUM(subscribers) AS BIGINT) AS subscribers
            FROM subscription_counts
            GROUP BY bundle_id, product_id, environment, ownership_type, state, entitled
            HAVING SUM(subscribers) <> 0
            """,
        ]
    }

    /// PostgreSQL: `subscription_counts` gains `entitled` and its counting functions and trigger count it.
    static func version22Prelude(_ dialect: SQLDialect) -> [String] {
        guard dialect == .postgres else { return [] }
        let key = "receipt_id, product_id, environment, ownership_type, state, entitled"
        return [
            "ALTER TABLE subscription_counts ADD COLUMN IF NOT EXISTS entitled INTEGER NOT NULL DEFAULT 0",
            """
            CREATE OR REPLACE FUNCTION renewal_count_subscription() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
                IF TG_OP IN ('UPDATE', 'DELETE') THEN
                    INSERT INTO subscription_counts
                        (bundle_id, product_id, environment, ownership_type, state, entitled, subscribers)
                    SELECT (SELECT bundle_id FROM receipts WHERE id = OLD.receipt_id), OLD.product_id,
                           OLD.environment, COALESCE(OLD.ownership_type, 'PURCHASED'), OLD.state, OLD.entitled, -1;
                END IF;
                IF TG_OP IN ('INSERT', 'UPDATE') THEN
                    INSERT INTO subscription_counts
                        (bundle_id, product_id, environment, ownership_type, state, entitled, subscribers)
                    SELECT (SELECT bundle_id FROM receipts WHERE id = NEW.receipt_id), NEW.product_id,
                           NEW.environment, COALESCE(NEW.ownership_type, 'PURCHASED'), NEW.state, NEW.entitled, 1;
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
                        (bundle_id, product_id, environment, ownership_type, state, entitled, subscribers)
                    SELECT b.bundle_id, s.product_id, s.environment, COALESCE(s.ownership_type, 'PURCHASED'), s.state,
                           s.entitled, b.sign * COUNT(*)
                    FROM subscriptions s, (VALUES (OLD.bundle_id, -1), (NEW.bundle_id, 1)) AS b (bundle_id, sign)
                    WHERE s.receipt_id = NEW.id
                    GROUP BY b.bundle_id, b.sign, s.product_id, s.environment, COALESCE(s.ownership_type, 'PURCHASED'),
                             s.state, s.entitled;
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
            + trigger(
                "subscriptions_recounted", on: "subscriptions", "AFTER UPDATE OF \(key)", "renewal_count_subscription",
                when: """
                    (OLD.receipt_id, OLD.product_id, OLD.environment, OLD.ownership_type, OLD.state, OLD.entitled)
                    IS DISTINCT FROM (NEW.receipt_id, NEW.product_id, NEW.environment, NEW.ownership_type, NEW.state,
                                      NEW.entitled)
                    """)
    }

    /// Every subscription's spans, from its ledger and facts, a chunk at a time (memory stays flat); then
    /// the views.
    static func version22Rebuild(_ connection: any SQLConnection, _ dialect: SQLDialect) throws {
        // Migration 21 may have filled `subscription_facts` in this same transaction: without statistics
        // PostgreSQL would plan each chunk's read of it as a scan of the whole table.
        if dialect == .postgres { _ = try connection.execute("ANALYZE subscription_facts", []) }
        try LedgerSQL.rebuildSpans(on: connection)
        for statement in version22Views(dialect) { _ = try connection.execute(statement, []) }
    }
}
