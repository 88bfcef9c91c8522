import Crypto
import Foundation
import Synchronization
import RenewalCore
import RenewalStorage

/// The one `SubscriptionStore` implementation: its SQL is written once, here and in the
/// `SQLSubscriptionStore+…` files, and runs on SQLite and PostgreSQL alike; only `SQLDialect` differs.
public struct SQLSubscriptionStore<Database: SQLDatabase>: SubscriptionStore {
    /// The database the statements run on.
    public let database: Database

    /// Lists of ids are bound in chunks of this size (SQLite and PostgreSQL both cap bind counts).
    static var chunkSize: Int { 500 }

    public init(database: Database) {
        self.database = database
    }

    public var backendName: String { database.backendName }

    // MARK: - Schema

    /// Applies the missing migrations, then folds the dashboard summaries' delta rows (so
    /// `renewal migrate` also tidies up after rows loaded in bulk straight into the tables).
    public func migrate() async throws -> [Int] {
        let applied = try await migrate(through: SQLSchema.currentVersion)
        try await compactSummaries()
        return applied
    }

    /// Applies the missing migrations up to `version` only: tests build the database an earlier
    /// release left, then upgrade it.
    func migrate(through version: Int) async throws -> [Int] {
        let dialect = database.dialect
        let now = Date()
        // The version found by the first attempt: when a deadlock makes PostgreSQL's connection run the
        // migration again, the versions the first attempt committed still count as applied by this call.
        let found = Mutex<Int?>(nil)
        return try await Self.mappingErrors {
            try await database.withMigrationLock { connection in
                let before = try found.withLock { found in
                    if let found { return found }
                    let version = try SQLSchema.appliedVersion(on: connection, dialect: dialect)
                    found = version
                    return version
                }
                let applied = try SQLSchema.migrate(on: connection, dialect: dialect, now: now, through: version)
                let after = try SQLSchema.appliedVersion(on: connection, dialect: dialect)
                return after > before ? Array((before + 1)...after) : applied
            }
        }
    }

    public func checkSchema() async throws {
        let dialect = database.dialect
        let found = try await onConnection { connection in
            try SQLSchema.appliedVersion(on: connection, dialect: dialect)
        }
        let expected = SQLSchema.currentVersion
        if found < expected { throw SubscriptionStoreError.notMigrated(found: found, expected: expected) }
        if found > expected { throw SubscriptionStoreError.schemaTooNew(found: found, expected: expected) }
    }

    // MARK: - Import

    public func importReceipts(_ items: [ReceiptImport], now: Date) async throws -> [ReceiptImportOutcome] {
        try await importReceipts(items, now: now, queueClaimWebhooks: false)
    }

    static func storeLines(_ items: [ReceiptImport], now: Date, on connection: any SQLConnection) throws
        -> [ReceiptImportOutcome]
    {
        // A batch naming each user once loads in bulk where the backend can (PostgreSQL's COPY and
        // a few set-based statements); a user named twice is stored line after line, as written.
        if items.count > 1, Set(items.map(\.userID)).count == items.count,
            let outcomes = try bulkImport(items, now: now, on: connection)
        {
            return outcomes
        }
        return try items.map { try importReceipt($0, now: now, on: connection) }
    }

    /// The columns a bulk import stages per line, in the order of `stagedRow`: all but the receipt,
    /// which is staged as its SHA-256 only. A receipt is kilobytes; staged whole, every one would be
    /// written twice, and a re-imported one that has not changed would be sent for nothing.
    private static var stagedColumns: [String] {
        [
            "ord", "user_id", "receipt_digest", "product_id", "original_transaction_id", "app_account_token",
            "environment", "bundle_id",
        ]
    }

    private static func stagedRow(_ item: ReceiptImport, ord: Int) -> [String?] {
        [
            String(ord), item.userID, item.latestReceipt.map(receiptDigest), item.productID,
            item.originalTransactionID, item.appAccountToken, item.environment?.rawValue, item.bundleID,
        ]
    }

    /// Lowercase hex SHA-256 of the receipt's UTF-8, as PostgreSQL's
    /// `encode(sha256(convert_to(latest_receipt, 'UTF8')), 'hex')` gives it for the stored one.
    static func receiptDigest(_ receipt: String) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var hex: [UInt8] = []
        hex.reserveCapacity(2 * SHA256.byteCount)
        for byte in SHA256.hash(data: Array(receipt.utf8)) {
            hex.append(digits[Int(byte >> 4)])
            hex.append(digits[Int(byte & 0x0F)])
        }
        return String(decoding: hex, as: UTF8.self)
    }

    /// The columns a new line is copied into `receipts` with, in the order of `newRow`: what
    /// `importReceipt` inserts.
    private static var newColumns: [String] {
        [
            "user_id", "latest_receipt", "imported_product_id", "status", "next_check_at", "consecutive_failures",
            "consecutive_malformed", "created_at", "updated_at", "original_transaction_id", "app_account_token",
            "environment", "source", "bundle_id",
        ]
    }

    private static func newRow(_ item: ReceiptImport, now milliseconds: String) -> [String?] {
        [
            item.userID, item.latestReceipt ?? "", item.productID, ReceiptStatus.unverified.rawValue, milliseconds,
            "0", "0", milliseconds, milliseconds, item.originalTransactionID, item.appAccountToken,
            item.environment?.rawValue, item.latestReceipt == nil ? CheckSource.serverAPI.rawValue : nil,
            item.bundleID,
        ]
    }

    /// The same semantics as `importReceipt` line by line, set-based, each receipt sent at most once:
    /// the lines go into a staging table without their receipts, and each is classified against the
    /// stored row as it is (receipts compared by digest). Unchanged lines are then updated in one
    /// statement; the receipts of replaced lines go to a second staging table and update their rows
    /// in one statement; new lines are copied straight into `receipts`. Nil where the backend has no
    /// bulk load (nothing was written).
    private static func bulkImport(_ items: [ReceiptImport], now: Date, on connection: any SQLConnection) throws
        -> [ReceiptImportOutcome]?
    {
        guard connection.bulkLoads else { return nil }
        // Each statement below joins a batch of lines to `receipts`, which holds far more rows: each
        // line is found through an index (a replaced line's receipt too). Left to itself, the planner
        // hashed the whole table once it held some 100,000 rows (29 ms a batch of 500, for 2 ms).
        _ = try connection.execute("SET LOCAL enable_hashjoin = off", [])
        _ = try connection.execute("SET LOCAL enable_mergejoin = off", [])
        _ = try connection.execute(BulkImportSQL.lineTable, [])
        _ = try connection.execute(BulkImportSQL.receiptTable, [])
        let staged = items.enumerated().map { stagedRow($1, ord: $0) }
        try connection.copy(into: "receipt_import_lines", columns: stagedColumns, rows: staged)
        // Classified first, against the rows as they were before this batch.
        _ = try connection.execute(BulkImportSQL.classify, [])
        let classified = try connection.execute("SELECT ord, outcome FROM receipt_import_lines ORDER BY ord", [])
        guard classified.count == items.count else {
            throw SubscriptionStoreError.query("the bulk import staged \(classified.count) of \(items.count) lines")
        }
        let outcomes = try classified.map { row in
            try row.optionalText("outcome").flatMap(ReceiptImportOutcome.init(rawValue:)) ?? .inserted
        }
        _ = try connection.execute(BulkImportSQL.updateUnchanged, [SQLValue(now)])
        // As line by line: a new receipt or id clears the counters, the verdict and the lease.
        let replacements = zip(items, outcomes).enumerated().compactMap { ord, line -> [String?]? in
            guard line.1 == .replaced, let receipt = line.0.latestReceipt else { return nil }
            return [String(ord), receipt]
        }
        if !replacements.isEmpty {
            try connection.copy(
                into: "receipt_import_receipts", columns: ["ord", "latest_receipt"], rows: replacements)
        }
        if outcomes.contains(.replaced) {
            _ = try connection.execute(BulkImportSQL.updateReplaced, [SQLValue(now)])
        }
        // New users, in line order (their ids follow it, as line by line).
        let milliseconds = String(AppleDateFormat.milliseconds(now))
        let inserts = zip(items, outcomes).compactMap { item, outcome in
            outcome == .inserted ? newRow(item, now: milliseconds) : nil
        }
        if !inserts.isEmpty {
            try connection.copy(into: "receipts", columns: newColumns, rows: inserts)
        }
        return outcomes
    }

    /// Stores one line. A line's receipt and id replace the stored ones; what it leaves out is kept
    /// (a row keeps its receipt when an id arrives for it). A row without a receipt stores the empty
    /// string in `latest_receipt` and is read by the App Store Server API only (`source` set).
    private static func importReceipt(
        _ item: ReceiptImport, now: Date, on connection: any SQLConnection
    ) throws -> ReceiptImportOutcome {
        let receipt = item.latestReceipt ?? ""
        // Compared where it is stored: a receipt is kilobytes, and reading it back would copy them.
        let existing = try connection.execute(
            """
            SELECT id, CASE WHEN latest_receipt = $2 THEN 1 ELSE 0 END AS same, original_transaction_id, bundle_id
            FROM receipts WHERE user_id = $1
            """,
            [.text(item.userID), .text(receipt)]
        )
        let source = item.latestReceipt == nil ? SQLValue.text(CheckSource.serverAPI.rawValue) : .null
        guard let row = existing.first else {
            _ = try connection.execute(
                """
                INSERT INTO receipts (user_id, latest_receipt, imported_product_id, status, next_check_at,
                    consecutive_failures, consecutive_malformed, created_at, updated_at, original_transaction_id,
                    app_account_token, environment, source, bundle_id)
                VALUES ($1, $2, $3, 'unverified', $4, 0, 0, $4, $4, $5, $6, $7, $8, $9)
                """,
                [
                    .text(item.userID), .text(receipt), SQLValue(item.productID), SQLValue(now),
                    SQLValue(item.originalTransactionID), SQLValue(item.appAccountToken),
                    SQLValue(item.environment?.rawValue), source, SQLValue(item.bundleID),
                ]
            )
            return .inserted
        }
        if let app = item.bundleID, let stored = try row.optionalText("bundle_id"), stored != app {
            return .otherApp
        }
        let id = try row.int64("id")
        let storedID = try row.optionalText("original_transaction_id")
        let sameReceipt = try item.latestReceipt == nil || row.int64("same") == 1
        let sameID = item.originalTransactionID == nil || item.originalTransactionID == storedID
        if sameReceipt, sameID {
            _ = try connection.execute(
                """
                UPDATE receipts SET next_check_at = $2, updated_at = $2,
                    imported_product_id = COALESCE($3, imported_product_id),
                    app_account_token = COALESCE($4, app_account_token),
                    bundle_id = COALESCE($5, bundle_id)
                WHERE id = $1
                """,
                [
                    .int64(id), SQLValue(now), SQLValue(item.productID), SQLValue(item.appAccountToken),
                    SQLValue(item.bundleID),
                ]
            )
            return .unchanged
        }
        // A new receipt or id: the failure counters and an `invalid` verdict belonged to the old one.
        // The lease goes too: a check in flight is about the old one, so its fenced write fails
        // (`lease_lost`) instead of overwriting this one, and the row is due now.
        _ = try connection.execute(
            """
            UPDATE receipts SET latest_receipt = COALESCE($2, latest_receipt), next_check_at = $3, updated_at = $3,
                lease_owner = NULL, lease_expires_at = NULL,
                imported_product_id = COALESCE($4, imported_product_id),
                original_transaction_id = COALESCE($5, original_transaction_id),
                app_account_token = COALESCE($6, app_account_token),
                environment = COALESCE($7, environment),
                bundle_id = COALESCE($8, bundle_id),
                source = CASE WHEN COALESCE($2, latest_receipt) = '' THEN 'server_api' ELSE source END,
                status = \(SaveSQL.statusAfterReplacement(of: "status")),
                consecutive_failures = 0, consecutive_malformed = 0, last_failure_reason = NULL,
                rejected_since = NULL, no_subscription_since = NULL
            WHERE id = $1
            """,
            [
                .int64(id), SQLValue(item.latestReceipt), SQLValue(now), SQLValue(item.productID),
                SQLValue(item.originalTransactionID), SQLValue(item.appAccountToken),
                SQLValue(item.environment?.rawValue), SQLValue(item.bundleID),
            ]
        )
        return .replaced
    }

    // MARK: - Leases and owners

    public func releaseLeases(receiptIDs: [Int64], owner: String) async throws {
        guard !receiptIDs.isEmpty else { return }
        try await inTransaction { connection in
            for chunk in receiptIDs.chunked(by: Self.chunkSize) {
                var binds = SQLBinds()
                let ownerParameter = binds.add(.text(owner))
                let ids = binds.list(chunk.map { .int64($0) })
                _ = try connection.execute(
                    """
                    UPDATE receipts SET lease_owner = NULL, lease_expires_at = NULL
                    WHERE lease_owner = \(ownerParameter) AND id IN (\(ids))
                    """,
                    binds.values
                )
            }
        }
    }

    public func knownProductIDs() async throws -> Set<String> {
        try await onConnection { connection in
            let rows = try connection.execute(
                """
                SELECT DISTINCT product_id FROM subscriptions WHERE product_id IS NOT NULL
                UNION SELECT DISTINCT imported_product_id FROM receipts WHERE imported_product_id IS NOT NULL
                """, [])
            return Set(try rows.compactMap { try $0.optionalText("product_id") })
        }
    }

    public func owners(ofOriginalTransactionIDs ids: [String]) async throws -> [String: SubscriptionOwner] {
        guard !ids.isEmpty else { return [:] }
        return try await onConnection { connection in
            var owners: [String: SubscriptionOwner] = [:]
            for chunk in Array(Set(ids)).chunked(by: Self.chunkSize) {
                var binds = SQLBinds()
                let list = binds.list(chunk.map { .text($0) })
                let rows = try connection.execute(
                    """
                    SELECT original_transaction_id, receipt_id, user_id FROM subscriptions
                    WHERE original_transaction_id IN (\(list))
                    """,
                    binds.values
                )
                for row in rows {
                    owners[try row.text("original_transaction_id")] = SubscriptionOwner(
                        receiptID: try row.int64("receipt_id"), userID: try row.text("user_id")
                    )
                }
            }
            return owners
        }
    }

    // MARK: - Run lock

    /// The run lock, inside the writers' lock: a run started while `renewal copy-database` copies the
    /// database is refused before it writes anything.
    public func withRunLock<T: Sendable>(owner: String, _ body: @Sendable () async throws -> T) async throws -> T {
        try await database.withWriterLock {
            try await database.withRunLock(owner: owner, body)
        }
    }

    public func withWriterLock<T: Sendable>(_ body: @Sendable () async throws -> T) async throws -> T {
        try await database.withWriterLock(body)
    }

    // MARK: - Helpers

    /// Runs `body` on a connection, mapping any stray error to `SubscriptionStoreError`.
    func onConnection<T: Sendable>(_ body: (any SQLConnection) throws -> T) async throws -> T {
        try await Self.mappingErrors { try await database.withConnection(body) }
    }

    /// Runs `body` in one transaction, mapping any stray error to `SubscriptionStoreError`.
    func inTransaction<T: Sendable>(_ body: (any SQLConnection) throws -> T) async throws -> T {
        try await Self.mappingErrors { try await database.withTransaction(body) }
    }

    private static func mappingErrors<T>(_ body: () async throws -> T) async throws -> T {
        do {
            return try await body()
        } catch let error as SubscriptionStoreError {
            throw error
        } catch let error as CancellationError {
            throw error
        } catch {
            // Only the type: a foreign error's text might carry bound values.
            throw SubscriptionStoreError.query("unexpected \(type(of: error))")
        }
    }
}

extension Array {
    /// Consecutive slices of at most `size` elements.
    func chunked(by size: Int) -> [[Element]] {
        stride(from: 0, to: count, by: Swift.max(size, 1)).map { Array(self[$0..<Swift.min($0 + size, count)]) }
    }
}
