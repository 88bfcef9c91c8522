import Foundation
import RenewalCore
import RenewalStorage

extension SQLSubscriptionStore: UnclaimedPurchaseStore {
    /// Keyset pages over `adopted_purchases` (its primary key), each row with its subscription's state and
    /// the ledger's revenue: a page reads at most `limit` purchases however many wait.
    public func unclaimedPage(after: String?, limit: Int) async throws -> [UnclaimedPurchase] {
        try await onConnection { connection in
            let rows = try connection.execute(
                """
                SELECT a.original_transaction_id, a.bundle_id, a.product_id, a.environment, a.adopted_at,
                    a.app_account_token, s.state, s.expires_at
                FROM adopted_purchases a
                LEFT JOIN subscriptions s ON s.original_transaction_id = a.original_transaction_id
                WHERE a.claimed_at IS NULL AND a.original_transaction_id > $1
                ORDER BY a.original_transaction_id LIMIT $2
                """, [.text(after ?? ""), .int64(Int64(max(limit, 1)))])
            let ids = try rows.map { try $0.text("original_transaction_id") }
            let revenue = try Self.revenue(of: ids, on: connection)
            var purchases: [UnclaimedPurchase] = []
            for (row, id) in zip(rows, ids) {
                purchases.append(
                    UnclaimedPurchase(
                        originalTransactionID: id, bundleID: try row.optionalText("bundle_id"),
                        productID: try row.optionalText("product_id"), environment: try row.text("environment"),
                        adoptedAt: try row.date("adopted_at"),
                        appAccountToken: try row.optionalText("app_account_token"),
                        state: try row.optionalText("state") == nil ? nil : try row.state("state"),
                        expiresAt: try row.optionalDate("expires_at"), revenue: revenue[id] ?? [:]))
            }
            return purchases
        }
    }

    /// Per app and environment: how many wait and the oldest adoption, for the metrics.
    public func unclaimedSummary() async throws -> [UnclaimedSummary] {
        try await onConnection { connection in
            try connection.execute(
                """
                SELECT bundle_id, environment, COUNT(*) AS n, MIN(adopted_at) AS oldest
                FROM adopted_purchases WHERE claimed_at IS NULL
                GROUP BY bundle_id, environment ORDER BY bundle_id, environment
                """, []
            ).map { row in
                UnclaimedSummary(
                    bundleID: try row.optionalText("bundle_id"), environment: try row.text("environment"),
                    count: try row.int("n"), oldestAdoptedAt: try row.date("oldest"))
            }
        }
    }

    /// The ledger's transactions of each subscription of a page not revoked, summed per currency
    /// (milliunits), in one query on the ledger's (original_transaction_id, purchased_at) index.
    private static func revenue(of ids: [String], on connection: any SQLConnection) throws
        -> [String: [String: Int64]]
    {
        guard !ids.isEmpty else { return [:] }
        var binds = SQLBinds()
        let rows = try connection.execute(
            """
            SELECT original_transaction_id, currency, SUM(price_milliunits) AS amount FROM transactions
            WHERE original_transaction_id IN (\(binds.list(ids.map { .text($0) })))
                AND revoked_at IS NULL AND currency IS NOT NULL AND price_milliunits IS NOT NULL
            GROUP BY original_transaction_id, currency
            """, binds.values)
        var revenue: [String: [String: Int64]] = [:]
        for row in rows {
            revenue[try row.text("original_transaction_id"), default: [:]][try row.text("currency")] =
                try row.optionalInt64("amount") ?? 0
        }
        return revenue
    }
}
