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
                            WHERE e.original_transaction_id = s.original_transaction_id
                            AND e.state = '\(ExtensionState.granted.rawValue)' AND e.answered_at > \(since)) AS recent
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
    static func extensionCandidate(_ row: SQLRow) throws -> ExtensionCandidate {
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
                VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, '\(ExtensionState.pending.rawValue)', $11)
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
                UPDATE renewal_extensions SET \(Self.moving(ExtensionState.send))sent_at = $2
                WHERE request_identifier = $1\(Self.guarding(ExtensionState.send))
                RETURNING request_identifier
                """, [.text(requestIdentifier), SQLValue(now)]
            ).isEmpty)
        }
    }

    public func recordExtension(_ requestIdentifier: String, result: ExtensionResult) async throws {
        let (details, values): (String, [SQLValue])
        let key = SQLValue.text(requestIdentifier)
        switch result {
        case .succeeded(let effectiveAt, let at):
            details = "answered_at = $2, effective_at = $3, apple_status = 200, last_error = NULL"
            values = [key, SQLValue(at), SQLValue(effectiveAt)]
        case .rejected(let status, let code, let reason, let at):
            details = "answered_at = $2, apple_status = $3, apple_error_code = $4, last_error = $5"
            values = [key, SQLValue(at), SQLValue(status), SQLValue(code), .text(reason)]
        case .notSent(let reason):
            details = "sent_at = NULL, last_error = $2"
            values = [key, .text(reason)]
        case .unconfirmed(let reason):
            details = "last_error = $2"
            values = [key, .text(reason)]
        }
        // The state it moves to, and from which, are Core's (`ExtensionState.transition(for:)`).
        let transition = ExtensionState.transition(for: result)
        let sql = """
            UPDATE renewal_extensions SET \(Self.moving(transition))\(details)
            WHERE request_identifier = $1\(Self.guarding(transition))
            """
        try await inTransaction { connection in _ = try connection.execute(sql, values) }
    }

    /// Apple's `RENEWAL_EXTENDED` about a subscription, signed `at`, confirms the requests sent for it
    /// before. Which requests it confirms and what state each is in afterwards are Core's
    /// (`ExtensionState.confirmable`, `confirmed`: one whose answer was never recorded succeeded).
    static func confirmExtensions(of id: String, at: Date, on connection: any SQLConnection) throws {
        let confirmable = ExtensionState.allCases.filter(ExtensionState.confirmable.contains)
        let moves = confirmable.filter { $0.confirmed != $0 }
            .map { "WHEN '\($0.rawValue)' THEN '\($0.confirmed.rawValue)'" }.joined(separator: " ")
        let state = moves.isEmpty ? "state" : "CASE state \(moves) ELSE state END"
        _ = try connection.execute(
            """
            UPDATE renewal_extensions SET confirmed_at = $2, state = \(state),
                answered_at = COALESCE(answered_at, $2)
            WHERE original_transaction_id = $1 AND state IN (\(list(confirmable))) AND confirmed_at IS NULL
                AND sent_at <= $2
            """, [.text(id), SQLValue(at)])
    }

    /// `state = '…', ` for a transition that moves the state, else nothing: the SET clause's start.
    static func moving<State>(_ transition: StateTransition<State>) -> String {
        transition.to.map { "state = '\($0.rawValue)', " } ?? ""
    }

    /// ` AND state IN (…)` for a transition that moves only some states, else nothing: the WHERE
    /// clause's end. The row is guarded in the statement that moves it, so concurrent invocations agree.
    static func guarding<State>(_ transition: StateTransition<State>) -> String {
        transition.orderedFrom.map { " AND state IN (\(list($0)))" } ?? ""
    }

    /// `column` in `states` (Core's set, in `allCases` order) as SQL: an equality for one state, so a
    /// partial index on that state still serves the query on both databases.
    static func column<State: RawRepresentable & CaseIterable>(_ column: String, in states: Set<State>) -> String
    where State.RawValue == String {
        let ordered = State.allCases.filter(states.contains)
        switch ordered.count {
        case 0: return "1 = 0"
        case 1: return "\(column) = '\(ordered[0].rawValue)'"
        default: return "\(column) IN (\(list(ordered)))"
        }
    }

    /// States as an SQL list of literals (Core's names, never input).
    static func list<State: RawRepresentable>(_ states: [State]) -> String where State.RawValue == String {
        states.map { "'\($0.rawValue)'" }.joined(separator: ", ")
    }
}
