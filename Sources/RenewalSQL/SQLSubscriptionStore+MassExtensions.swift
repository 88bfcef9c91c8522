import Foundation
import RenewalCore
import RenewalStorage

/// Mass extensions as stored: storage reads and writes them; which state follows which answer, and when a
/// run follows one up, are Core's (`MassExtensionState`, `MassExtensionFollowUp`).
extension SQLSubscriptionStore {
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
                        WHERE e.original_transaction_id = s.original_transaction_id
                        AND e.state = '\(ExtensionState.granted.rawValue)' AND e.answered_at > $4) AS recent,
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
                VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, '\(MassExtensionState.pending.rawValue)', $10)
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
                UPDATE renewal_mass_extensions SET \(Self.moving(MassExtensionState.send))sent_at = $2
                WHERE request_identifier = $1\(Self.guarding(MassExtensionState.send))
                """, [.text(requestIdentifier), SQLValue(now)])
        }
    }

    public func recordMassExtension(_ requestIdentifier: String, result: MassExtensionResult, now: Date) async throws {
        let (details, values): (String, [SQLValue])
        let key = SQLValue.text(requestIdentifier)
        switch result {
        case .accepted(let at, let next):
            details =
                "accepted_at = COALESCE(accepted_at, $2), next_status_at = $3, apple_status = 200, last_error = NULL"
            values = [key, SQLValue(at), SQLValue(next)]
        case .rejected(let status, let code, let reason):
            details = "apple_status = $2, apple_error_code = $3, last_error = $4, next_status_at = NULL"
            values = [key, SQLValue(status), SQLValue(code), .text(reason)]
        case .notAccepted(let reason):
            details = "last_error = $2"
            values = [key, .text(reason)]
        case .inProgress(let succeeded, let failed, let next):
            details = """
                next_status_at = $2, status_checks = status_checks + 1,
                    succeeded_count = COALESCE($3, succeeded_count), failed_count = COALESCE($4, failed_count)
                """
            values = [key, SQLValue(next), SQLValue(succeeded), SQLValue(failed)]
        case .complete(let succeeded, let failed, let at):
            details = """
                completed_at = $2, next_status_at = NULL, status_checks = status_checks + 1,
                    succeeded_count = COALESCE($3, succeeded_count), failed_count = COALESCE($4, failed_count)
                """
            values = [key, SQLValue(at), SQLValue(succeeded), SQLValue(failed)]
        }
        // The state it moves to, and from which, are Core's (`MassExtensionState.transition(for:)`).
        let transition = MassExtensionState.transition(for: result)
        let sql = """
            UPDATE renewal_mass_extensions SET \(Self.moving(transition))\(details)
            WHERE request_identifier = $1\(Self.guarding(transition))
            """
        try await inTransaction { connection in _ = try connection.execute(sql, values) }
    }

    /// The mass extensions a run follows up (Core's `MassExtensionFollowUp`: which state, and from when),
    /// oldest first; each follow-up reads its own time column.
    public func dueMassExtensions(now: Date, resendAfter: TimeInterval) async throws -> [StoredMassExtension] {
        var binds = SQLBinds()
        let due = MassExtensionFollowUp.allCases.map { followUp in
            let column = followUp == .askStatus ? "next_status_at" : "sent_at"
            let bound = binds.add(SQLValue(followUp.dueBy(now: now, resendAfter: resendAfter)))
            return "(state = '\(followUp.state.rawValue)' AND \(column) <= \(bound))"
        }.joined(separator: " OR ")
        return try await onConnection { connection in
            try connection.execute(
                """
                SELECT * FROM renewal_mass_extensions
                WHERE \(due)
                ORDER BY created_at, request_identifier
                """, binds.values
            ).map(Self.massExtension)
        }
    }

    /// Apple's `RENEWAL_EXTENSION` summary, signed `at`: the mass extension it names is complete, with
    /// Apple's counts (`MassExtensionState.completedBySummary` says from which states).
    static func completeMassExtension(_ summary: ExtensionSummary, at: Date, on connection: any SQLConnection)
        throws
    {
        let transition = MassExtensionState.completedBySummary
        _ = try connection.execute(
            """
            UPDATE renewal_mass_extensions SET \(moving(transition))completed_at = $2, next_status_at = NULL,
                succeeded_count = $3, failed_count = $4
            WHERE request_identifier = $1\(guarding(transition))
            """,
            [
                .text(summary.requestIdentifier), SQLValue(at), SQLValue(summary.succeeded),
                SQLValue(summary.failed),
            ])
    }
}
