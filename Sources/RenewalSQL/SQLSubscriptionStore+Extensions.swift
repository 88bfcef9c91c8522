import Foundation
import RenewalCore
import RenewalStorage

extension SQLSubscriptionStore {
    public func extensionCandidates(userIDs: [String], now: Date) async throws -> [ExtensionCandidate] {
        guard !userIDs.isEmpty else { return [] }
        return try await onConnection { connection in
            var candidates: [ExtensionCandidate] = []
            for chunk in userIDs.chunked(by: Self.chunkSize) {
                var binds = SQLBinds()
                let since = binds.add(SQLValue(now.addingTimeInterval(-RenewalExtension.window)))
                let list = chunk.map { binds.add(.text($0)) }.joined(separator: ", ")
                let rows = try connection.execute(
                    """
                    SELECT s.user_id, s.original_transaction_id, s.product_id, s.state, s.is_trial, s.ownership_type,
                        s.environment, s.expires_at, r.bundle_id,
                        (SELECT COUNT(*) FROM renewal_extensions e
                            WHERE e.original_transaction_id = s.original_transaction_id AND e.state = 'succeeded'
                            AND e.answered_at > \(since)) AS recent
                    FROM subscriptions s JOIN receipts r ON r.id = s.receipt_id
                    WHERE s.user_id IN (\(list))
                    ORDER BY s.user_id, s.original_transaction_id
                    """, binds.values)
                candidates += try rows.map(Self.extensionCandidate)
            }
            return candidates
        }
    }

    /// A subscription as `extensionCandidates` and `massExtensionCandidates` select it.
    private static func extensionCandidate(_ row: SQLRow) throws -> ExtensionCandidate {
        ExtensionCandidate(
            userID: try row.text("user_id"), originalTransactionID: try row.text("original_transaction_id"),
            productID: try row.optionalText("product_id"), bundleID: try row.optionalText("bundle_id"),
            environment: try row.environment("environment"), expiresAt: try row.optionalDate("expires_at"),
            subject: RenewalExtension.Subject(
                state: try row.state("state"), isTrialPeriod: try row.optionalInt("is_trial") == 1,
                ownershipType: try row.optionalText("ownership_type"), recentExtensions: try row.int("recent")))
    }

    /// The key a request is stored under: one per intent and subscription.
    private static func intentKey(_ intent: String, _ originalTransactionID: String) -> String {
        intent + "\n" + originalTransactionID
    }

    private static func storedExtension(_ row: SQLRow) throws -> StoredExtension {
        StoredExtension(
            requestIdentifier: try row.text("request_identifier"),
            state: ExtensionState(rawValue: try row.text("state")) ?? .sending,
            effectiveAt: try row.optionalDate("effective_at"),
            appleErrorCode: try row.optionalInt("apple_error_code"),
            lastError: try row.optionalText("last_error"))
    }

    public func storedExtensions(intent: String, originalTransactionIDs: [String]) async throws
        -> [String: StoredExtension]
    {
        guard !originalTransactionIDs.isEmpty else { return [:] }
        return try await onConnection { connection in
            var stored: [String: StoredExtension] = [:]
            for chunk in originalTransactionIDs.chunked(by: Self.chunkSize) {
                var binds = SQLBinds()
                let list = chunk.map { binds.add(.text(Self.intentKey(intent, $0))) }.joined(separator: ", ")
                for row in try connection.execute(
                    "SELECT * FROM renewal_extensions WHERE intent_key IN (\(list))", binds.values)
                {
                    stored[try row.text("original_transaction_id")] = try Self.storedExtension(row)
                }
            }
            return stored
        }
    }

    public func storeExtensionIntent(_ intent: ExtensionIntent, requestIdentifier: String, now: Date) async throws
        -> StoredExtension
    {
        let candidate = intent.candidate
        let key = Self.intentKey(intent.intent, candidate.originalTransactionID)
        return try await inTransaction { connection in
            _ = try connection.execute(
                """
                INSERT INTO renewal_extensions (request_identifier, intent_key, intent, original_transaction_id,
                    user_id, product_id, bundle_id, environment, days, reason, state, created_at)
                VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, 'pending', $11)
                ON CONFLICT (intent_key) DO NOTHING
                """,
                [
                    .text(requestIdentifier), .text(key), .text(intent.intent), .text(candidate.originalTransactionID),
                    .text(candidate.userID), SQLValue(candidate.productID), SQLValue(candidate.bundleID),
                    .text((candidate.environment ?? .production).rawValue), SQLValue(intent.days),
                    SQLValue(intent.reason), SQLValue(now),
                ])
            guard
                let row = try connection.execute(
                    "SELECT * FROM renewal_extensions WHERE intent_key = $1", [.text(key)]
                ).first
            else { throw SubscriptionStoreError.query("renewal_extensions lost the row just written") }
            return try Self.storedExtension(row)
        }
    }

    public func markExtensionSending(_ requestIdentifier: String, now: Date) async throws -> Bool {
        try await inTransaction { connection in
            !(try connection.execute(
                """
                UPDATE renewal_extensions SET state = 'sending', sent_at = $2
                WHERE request_identifier = $1 AND state = 'pending'
                RETURNING request_identifier
                """, [.text(requestIdentifier), SQLValue(now)]
            ).isEmpty)
        }
    }

    public func recordExtension(_ requestIdentifier: String, result: ExtensionResult) async throws {
        let (sql, values): (String, [SQLValue])
        let key = SQLValue.text(requestIdentifier)
        switch result {
        case .succeeded(let effectiveAt, let at):
            sql = """
                UPDATE renewal_extensions SET state = 'succeeded', answered_at = $2, effective_at = $3,
                    apple_status = 200, last_error = NULL
                WHERE request_identifier = $1
                """
            values = [key, SQLValue(at), SQLValue(effectiveAt)]
        case .rejected(let status, let code, let reason, let at):
            sql = """
                UPDATE renewal_extensions SET state = 'rejected', answered_at = $2, apple_status = $3,
                    apple_error_code = $4, last_error = $5
                WHERE request_identifier = $1
                """
            values = [key, SQLValue(at), SQLValue(status), SQLValue(code), .text(reason)]
        case .notSent(let reason):
            sql =
                "UPDATE renewal_extensions SET state = 'pending', sent_at = NULL, last_error = $2 WHERE request_identifier = $1"
            values = [key, .text(reason)]
        case .unconfirmed(let reason):
            sql = "UPDATE renewal_extensions SET last_error = $2 WHERE request_identifier = $1"
            values = [key, .text(reason)]
        }
        try await inTransaction { connection in _ = try connection.execute(sql, values) }
    }

    /// Apple's `RENEWAL_EXTENDED` about a subscription, signed `at`, confirms the requests sent for it
    /// before: one whose answer was never recorded (`sending`) succeeded.
    static func confirmExtensions(of id: String, at: Date, on connection: any SQLConnection) throws {
        _ = try connection.execute(
            """
            UPDATE renewal_extensions SET confirmed_at = $2,
                state = CASE WHEN state = 'sending' THEN 'succeeded' ELSE state END,
                answered_at = COALESCE(answered_at, $2)
            WHERE original_transaction_id = $1 AND state IN ('sending', 'succeeded') AND confirmed_at IS NULL
                AND sent_at <= $2
            """, [.text(id), SQLValue(at)])
    }

    public func massExtensionCandidates(
        productID: String, environment: AppStoreEnvironment, after afterID: String?, limit: Int, now: Date
    ) async throws -> [(candidate: ExtensionCandidate, storefront: String?)] {
        let sandbox = environment == .sandbox
        return try await onConnection { connection in
            let rows = try connection.execute(
                """
                SELECT s.user_id, s.original_transaction_id, s.product_id, s.state, s.is_trial, s.ownership_type,
                    s.environment, s.expires_at, r.bundle_id,
                    (SELECT COUNT(*) FROM renewal_extensions e
                        WHERE e.original_transaction_id = s.original_transaction_id AND e.state = 'succeeded'
                        AND e.answered_at > $4) AS recent,
                    (SELECT t.storefront FROM transactions t
                        WHERE t.original_transaction_id = s.original_transaction_id AND t.storefront IS NOT NULL
                        ORDER BY t.purchased_at DESC LIMIT 1) AS storefront
                FROM subscriptions s JOIN receipts r ON r.id = s.receipt_id
                WHERE s.product_id = $1 AND s.original_transaction_id > $2
                    AND COALESCE(s.environment, 'Production') \(sandbox ? "=" : "<>") 'Sandbox'
                ORDER BY s.original_transaction_id LIMIT $3
                """,
                [
                    .text(productID), .text(afterID ?? ""), .int64(Int64(limit)),
                    SQLValue(now.addingTimeInterval(-RenewalExtension.window)),
                ])
            return try rows.map { row in (try Self.extensionCandidate(row), try row.optionalText("storefront")) }
        }
    }

    public func holdsProductionSubscription(productID: String) async throws -> Bool {
        try await onConnection { connection in
            !(try connection.execute(
                """
                SELECT 1 AS found FROM subscriptions
                WHERE product_id = $1 AND COALESCE(environment, 'Production') <> 'Sandbox' LIMIT 1
                """, [.text(productID)]
            ).isEmpty)
        }
    }

    /// The key a mass extension is stored under: one per intent, product and storefronts.
    private static func massIntentKey(_ intent: MassExtensionIntent) -> String {
        intent.intent + "\nproduct:" + intent.productID + "/" + intent.storefronts.sorted().joined(separator: ",")
    }

    public func storedMassExtension(_ intent: MassExtensionIntent) async throws -> StoredMassExtension? {
        try await onConnection { connection in
            try connection.execute(
                "SELECT * FROM renewal_mass_extensions WHERE intent_key = $1", [.text(Self.massIntentKey(intent))]
            ).first.map(Self.massExtension)
        }
    }

    public func storeMassExtension(_ intent: MassExtensionIntent, requestIdentifier: String, now: Date) async throws
        -> StoredMassExtension
    {
        let storefronts = intent.storefronts.sorted().joined(separator: ",")
        let key = Self.massIntentKey(intent)
        return try await inTransaction { connection in
            _ = try connection.execute(
                """
                INSERT INTO renewal_mass_extensions (request_identifier, intent_key, intent, product_id, storefronts,
                    bundle_id, environment, days, reason, state, created_at)
                VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, 'pending', $10)
                ON CONFLICT (intent_key) DO NOTHING
                """,
                [
                    .text(requestIdentifier), .text(key), .text(intent.intent), .text(intent.productID),
                    storefronts.isEmpty ? .null : .text(storefronts), SQLValue(intent.bundleID),
                    .text(intent.environment.rawValue), SQLValue(intent.days), SQLValue(intent.reason), SQLValue(now),
                ])
            guard
                let row = try connection.execute(
                    "SELECT * FROM renewal_mass_extensions WHERE intent_key = $1", [.text(key)]
                ).first
            else { throw SubscriptionStoreError.query("renewal_mass_extensions lost the row just written") }
            return try Self.massExtension(row)
        }
    }

    static func massExtension(_ row: SQLRow) throws -> StoredMassExtension {
        StoredMassExtension(
            requestIdentifier: try row.text("request_identifier"), productID: try row.text("product_id"),
            storefronts: (try row.optionalText("storefronts") ?? "").split(separator: ",").map(String.init),
            bundleID: try row.optionalText("bundle_id"), environment: try row.environment("environment") ?? .production,
            days: try row.int("days"), reason: try row.int("reason"),
            state: MassExtensionState(rawValue: try row.text("state")) ?? .sending,
            statusChecks: try row.int("status_checks"), succeededCount: try row.optionalInt("succeeded_count"),
            failedCount: try row.optionalInt("failed_count"), lastError: try row.optionalText("last_error"))
    }

    public func markMassExtensionSending(_ requestIdentifier: String, now: Date) async throws {
        try await inTransaction { connection in
            _ = try connection.execute(
                """
                UPDATE renewal_mass_extensions SET state = 'sending', sent_at = $2
                WHERE request_identifier = $1 AND state IN ('pending', 'sending')
                """, [.text(requestIdentifier), SQLValue(now)])
        }
    }

    public func recordMassExtension(_ requestIdentifier: String, result: MassExtensionResult, now: Date) async throws {
        let (sql, values): (String, [SQLValue])
        let key = SQLValue.text(requestIdentifier)
        switch result {
        case .accepted(let at, let next):
            sql = """
                UPDATE renewal_mass_extensions SET state = 'accepted', accepted_at = COALESCE(accepted_at, $2),
                    next_status_at = $3, apple_status = 200, last_error = NULL
                WHERE request_identifier = $1 AND state IN ('pending', 'sending')
                """
            values = [key, SQLValue(at), SQLValue(next)]
        case .rejected(let status, let code, let reason):
            sql = """
                UPDATE renewal_mass_extensions SET state = 'rejected', apple_status = $2, apple_error_code = $3,
                    last_error = $4, next_status_at = NULL
                WHERE request_identifier = $1
                """
            values = [key, SQLValue(status), SQLValue(code), .text(reason)]
        case .notAccepted(let reason):
            sql = "UPDATE renewal_mass_extensions SET last_error = $2 WHERE request_identifier = $1"
            values = [key, .text(reason)]
        case .inProgress(let succeeded, let failed, let next):
            sql = """
                UPDATE renewal_mass_extensions SET next_status_at = $2, status_checks = status_checks + 1,
                    succeeded_count = COALESCE($3, succeeded_count), failed_count = COALESCE($4, failed_count)
                WHERE request_identifier = $1 AND state = 'accepted'
                """
            values = [key, SQLValue(next), SQLValue(succeeded), SQLValue(failed)]
        case .complete(let succeeded, let failed, let at):
            sql = """
                UPDATE renewal_mass_extensions SET state = 'complete', completed_at = $2, next_status_at = NULL,
                    status_checks = status_checks + 1, succeeded_count = COALESCE($3, succeeded_count),
                    failed_count = COALESCE($4, failed_count)
                WHERE request_identifier = $1 AND state IN ('accepted', 'sending')
                """
            values = [key, SQLValue(at), SQLValue(succeeded), SQLValue(failed)]
        }
        try await inTransaction { connection in _ = try connection.execute(sql, values) }
    }

    public func dueMassExtensions(now: Date, resendAfter: TimeInterval) async throws -> [StoredMassExtension] {
        try await onConnection { connection in
            try connection.execute(
                """
                SELECT * FROM renewal_mass_extensions
                WHERE (state = 'accepted' AND next_status_at <= $1) OR (state = 'sending' AND sent_at <= $2)
                ORDER BY created_at, request_identifier
                """, [SQLValue(now), SQLValue(now.addingTimeInterval(-resendAfter))]
            ).map(Self.massExtension)
        }
    }

    /// Apple's `RENEWAL_EXTENSION` summary, signed `at`: the mass extension it names is complete, with
    /// Apple's counts.
    static func completeMassExtension(_ summary: ExtensionSummary, at: Date, on connection: any SQLConnection)
        throws
    {
        _ = try connection.execute(
            """
            UPDATE renewal_mass_extensions SET state = 'complete', completed_at = $2, next_status_at = NULL,
                succeeded_count = $3, failed_count = $4
            WHERE request_identifier = $1 AND state IN ('accepted', 'sending')
            """,
            [
                .text(summary.requestIdentifier), SQLValue(at), SQLValue(summary.succeeded),
                SQLValue(summary.failed),
            ])
    }
}
