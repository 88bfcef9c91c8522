import Foundation
import RenewalCore
import RenewalStorage

extension SQLSubscriptionStore: ClaimWebhookImporting {
    /// `importReceipts(_:now:)`, with the claims its token and transaction-id lines make queued as
    /// `purchase.claimed` webhooks when `queueClaimWebhooks` (`renewal import` with a webhook URL set): the
    /// app registered the token, but only this tells it that a paid purchase is now its user's.
    public func importReceipts(_ items: [ReceiptImport], now: Date, queueClaimWebhooks: Bool) async throws
        -> [ReceiptImportOutcome]
    {
        guard !items.isEmpty else { return [] }
        let dialect = database.dialect
        return try await inTransaction { connection in
            try Self.recordConsents(items, now: now, on: connection)
            // Tokens and adopted purchases first (docs/design.md §7): the lines they settle store nothing else.
            var outcomes = try Self.settleTokensAndAdoptions(
                items, now: now, queueWebhooks: queueClaimWebhooks, on: connection, dialect: dialect)
            let rest = outcomes.indices.filter { outcomes[$0] == nil }
            for (index, outcome) in zip(rest, try Self.storeLines(rest.map { items[$0] }, now: now, on: connection)) {
                outcomes[index] = outcome
            }
            return outcomes.map { $0 ?? .unchanged }
        }
    }

    /// What an import batch's tokens and adopted purchases settle, line by line, before the lines are stored
    /// (docs/design.md §7); nil for a line stored as usual.
    ///
    /// - A line's `app_account_token` is recorded for its user (a line with only a user and a token stores
    ///   nothing else: `token_recorded`), and claims the adopted purchases waiting with that token. A token
    ///   mapped to another user already refuses the line (`token_conflict`).
    /// - A line naming by original transaction id a purchase the feed adopted claims it for the line's user
    ///   (`claimed`) instead of storing a second row for the same subscription.
    static func settleTokensAndAdoptions(
        _ items: [ReceiptImport], now: Date, queueWebhooks: Bool, on connection: any SQLConnection,
        dialect: SQLDialect
    ) throws -> [ReceiptImportOutcome?] {
        let claim = ImportClaims(now: now, queueWebhooks: queueWebhooks)
        var outcomes = [ReceiptImportOutcome?](repeating: nil, count: items.count)
        for (index, item) in items.enumerated() {
            if let token = item.appAccountToken {
                guard try record(token: token, for: item.userID, claim, on: connection, dialect: dialect) else {
                    outcomes[index] = .tokenConflict
                    continue
                }
                if item.registersTokenOnly {
                    outcomes[index] = .tokenRecorded
                    continue
                }
            }
            if let id = item.originalTransactionID,
                try claimAdopted(id, for: item.userID, claim, on: connection, dialect: dialect)
            {
                outcomes[index] = .claimed
            }
        }
        return outcomes
    }

    /// When an import's claims happen and whether their webhooks are queued.
    struct ImportClaims {
        var now: Date
        var queueWebhooks: Bool
    }

    /// Records `token` for `user` and claims the adopted purchases waiting with it; false when the token
    /// maps to another user (nothing written).
    private static func record(
        token: String, for user: String, _ claims: ImportClaims, on connection: any SQLConnection,
        dialect: SQLDialect
    ) throws -> Bool {
        let now = claims.now
        if let mapped = try userOf(token: token, on: connection) { return mapped == user }
        _ = try connection.execute(
            "INSERT INTO app_account_tokens (app_account_token, user_id, recorded_at) VALUES ($1, $2, $3)",
            [.text(token), .text(user), SQLValue(now)])
        let waiting = try connection.execute(
            """
            SELECT original_transaction_id FROM adopted_purchases
            WHERE app_account_token = $1 AND claimed_at IS NULL ORDER BY original_transaction_id
            """,
            [.text(token)])
        for row in waiting {
            let claim = Claim(
                originalTransactionID: try row.text("original_transaction_id"), user: user, method: .token,
                runID: nil, queueWebhooks: claims.queueWebhooks, now: now)
            _ = try perform(claim, reassign: false, on: connection, dialect: dialect)
        }
        return true
    }

    /// Claims the adopted purchase `id` for `user` when it waits unclaimed; true when the purchase is an
    /// adopted one that is now the user's (the line is settled).
    private static func claimAdopted(
        _ id: String, for user: String, _ claims: ImportClaims, on connection: any SQLConnection,
        dialect: SQLDialect
    ) throws -> Bool {
        guard
            let adopted = try connection.execute(
                "SELECT claimed_user_id FROM adopted_purchases WHERE original_transaction_id = $1", [.text(id)]
            ).first
        else { return false }
        if let owner = try adopted.optionalText("claimed_user_id") { return owner == user }
        let claim = Claim(
            originalTransactionID: id, user: user, method: .import, runID: nil, queueWebhooks: claims.queueWebhooks,
            now: claims.now)
        if case .success = try perform(claim, reassign: false, on: connection, dialect: dialect) { return true }
        return false
    }
}
