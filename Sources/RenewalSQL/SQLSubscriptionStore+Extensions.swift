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
                candidates += try rows.map { row in
                    ExtensionCandidate(
                        userID: try row.text("user_id"),
                        originalTransactionID: try row.text("original_transaction_id"),
                        productID: try row.optionalText("product_id"), bundleID: try row.optionalText("bundle_id"),
                        environment: try row.environment("environment"), expiresAt: try row.optionalDate("expires_at"),
                        subject: RenewalExtension.Subject(
                            state: try row.state("state"), isTrialPeriod: try row.optionalInt("is_trial") == 1,
                            ownershipType: try row.optionalText("ownership_type"),
                            recentExtensions: try row.int("recent")))
                }
            }
            return candidates
        }
    }

    public func storeExtensionIntent(_ intent: ExtensionIntent, requestIdentifier: String, now: Date) async throws
        -> StoredExtension
    {
        let candidate = intent.candidate
        let key = intent.intent + "\n" + candidate.originalTransactionID
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
            return StoredExtension(
                requestIdentifier: try row.text("request_identifier"),
                state: ExtensionState(rawValue: try row.text("state")) ?? .sending,
                effectiveAt: try row.optionalDate("effective_at"),
                appleErrorCode: try row.optionalInt("apple_error_code"),
                lastError: try row.optionalText("last_error"))
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

    /// Apple's `RENEWAL_EXTENDED` about a subscription confirms the requests sent for it before: one whose
    /// answer was never recorded (`sending`) succeeded.
    static func confirmExtensions(_ notification: FeedNotificationRecord, on connection: any SQLConnection) throws {
        guard let id = notification.originalTransactionID else { return }
        _ = try connection.execute(
            """
            UPDATE renewal_extensions SET confirmed_at = $2,
                state = CASE WHEN state = 'sending' THEN 'succeeded' ELSE state END,
                answered_at = COALESCE(answered_at, $2)
            WHERE original_transaction_id = $1 AND state IN ('sending', 'succeeded') AND confirmed_at IS NULL
                AND sent_at <= $2
            """, [.text(id), SQLValue(notification.signedAt)])
    }
}
