import RenewalStorage

/// The statements of the bulk import (`SQLSubscriptionStore.bulkImport`), PostgreSQL only.
enum BulkImportSQL {
    /// The lines of one batch, without their receipts (each receipt staged as its digest).
    static let lineTable = """
        CREATE TEMPORARY TABLE IF NOT EXISTS receipt_import_lines (
            ord INTEGER NOT NULL, user_id TEXT NOT NULL, receipt_digest TEXT, product_id TEXT,
            original_transaction_id TEXT, app_account_token TEXT, environment TEXT, bundle_id TEXT,
            receipt_id BIGINT, outcome TEXT
        ) ON COMMIT DELETE ROWS
        """

    /// The receipts of replaced lines, staged for one update.
    static let receiptTable = """
        CREATE TEMPORARY TABLE IF NOT EXISTS receipt_import_receipts (
            ord INTEGER PRIMARY KEY, latest_receipt TEXT NOT NULL
        ) ON COMMIT DELETE ROWS
        """

    /// Classifies each line against the stored row as it was before this batch.
    static let classify = """
        UPDATE receipt_import_lines s SET receipt_id = r.id, outcome = CASE
                WHEN s.bundle_id IS NOT NULL AND r.bundle_id IS NOT NULL AND r.bundle_id <> s.bundle_id
                    THEN 'other_app'
                WHEN (s.receipt_digest IS NULL
                        OR encode(sha256(convert_to(r.latest_receipt, 'UTF8')), 'hex') = s.receipt_digest)
                    AND (s.original_transaction_id IS NULL OR s.original_transaction_id = r.original_transaction_id)
                    THEN 'unchanged'
                ELSE 'replaced' END
        FROM receipts r WHERE r.user_id = s.user_id
        """

    /// Unchanged lines: due now, with what the line adds.
    static let updateUnchanged = """
        UPDATE receipts r SET next_check_at = $1, updated_at = $1,
            imported_product_id = COALESCE(s.product_id, r.imported_product_id),
            app_account_token = COALESCE(s.app_account_token, r.app_account_token),
            bundle_id = COALESCE(s.bundle_id, r.bundle_id)
        FROM receipt_import_lines s WHERE s.receipt_id = r.id AND s.outcome = 'unchanged'
        """

    /// Replaced lines: as line by line, a new receipt or id clears the counters, the verdict and the lease.
    static let updateReplaced = """
        UPDATE receipts r SET latest_receipt = COALESCE(n.latest_receipt, r.latest_receipt),
            next_check_at = $1, updated_at = $1, lease_owner = NULL, lease_expires_at = NULL,
            imported_product_id = COALESCE(s.product_id, r.imported_product_id),
            original_transaction_id = COALESCE(s.original_transaction_id, r.original_transaction_id),
            app_account_token = COALESCE(s.app_account_token, r.app_account_token),
            environment = COALESCE(s.environment, r.environment),
            bundle_id = COALESCE(s.bundle_id, r.bundle_id),
            source = CASE WHEN COALESCE(n.latest_receipt, r.latest_receipt) = '' THEN 'server_api'
                ELSE r.source END,
            status = \(SaveSQL.statusAfterReplacement(of: "r.status")),
            consecutive_failures = 0, consecutive_malformed = 0, last_failure_reason = NULL,
            rejected_since = NULL, no_subscription_since = NULL
        FROM receipt_import_lines s LEFT JOIN receipt_import_receipts n ON n.ord = s.ord
        WHERE s.receipt_id = r.id AND s.outcome = 'replaced'
        """
}
