import Foundation
import RenewalCore
import RenewalStorage

extension SQLSubscriptionStore {
    /// What an import batch's tokens and adopted purchases settle, line by line, before the lines are stored
    /// (docs/design.md §7); nil for a line stored as usual.
    ///
    /// - A line's `app_account_token` is recorded for its user (a line with only a user and a token stores
    ///   nothing else: `token_recorded`), and claims the adopted purchases waiting with that token. A token
    ///   mapped to another user already refuses the line (`token_conflict`).
    /// - A line naming by original transaction id a purchase the feed adopted claims it for the line's user
    ///   (`claimed`) instead of storing a second row for the same subscription.
    static func settleTokensAndAdoptions(
        _ items: [ReceiptImport], now: Date, on connection: any SQLConnection, dialect: SQLDialect
    ) throws -> [ReceiptImportOutcome?] {
        var outcomes = [ReceiptImportOutcome?](repeating: nil, count: items.count)
        for (index, item) in items.enumerated() {
            if let token = item.appAccountToken {
                guard try record(token: token, for: item.userID, now: now, on: connection, dialect: dialect) else {
                    outcomes[index] = .tokenConflict
                    continue
                }
                if item.registersTokenOnly {
                    outcomes[index] = .tokenRecorded
                    continue
                }
            }
            if let id = item.originalTransactionID,
                try claimAdopted(
                    id, for: item.userID, now: now, on: connection, dialect: dialect)
            {
                outcomes[index] = .claimed
            }
        }
        return outcomes
    }

    /// Records `token` for `user` and claims the adopted purchases waiting with it; false when the token
    /// maps to another user (nothing written).
    private static func record(
        token: String, for user: String, now: Date, on connection: any SQLConnection, dialect: SQLDialect
    ) throws -> Bool {
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
                runID: nil, queueWebhooks: false, now: now)
            _ = try perform(claim, reassign: false, on: connection, dialect: dialect)
        }
        return true
    }

    /// Claims the adopted purchase `id` for `user` when it waits unclaimed; true when the purchase is an
    /// adopted one that is now the user's (the line is settled).
    private static func claimAdopted(
        _ id: String, for user: String, now: Date, on connection: any SQLConnection, dialect: SQLDialect
    ) throws -> Bool {
        guard
            let adopted = try connection.execute(
                "SELECT claimed_user_id FROM adopted_purchases WHERE original_transaction_id = $1", [.text(id)]
            ).first
        else { return false }
        if let owner = try adopted.optionalText("claimed_user_id") { return owner == user }
        let claim = Claim(
            originalTransactionID: id, user: user, method: .import, runID: nil, queueWebhooks: false, now: now)
        if case .success = try perform(claim, reassign: false, on: connection, dialect: dialect) { return true }
        return false
    }
}
