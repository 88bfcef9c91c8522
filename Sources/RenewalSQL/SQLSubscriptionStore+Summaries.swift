import Foundation
import RenewalStorage

/// A dashboard summary (schema 11, PostgreSQL): its table, the columns a group is known by, and
/// how each other column folds (`SUM`, `MIN` or `MAX`). The first column is a count, zero exactly
/// when the group is empty.
public struct DashboardSummary: Sendable {
    public var table: String
    public var groups: [String]
    public var folds: [(column: String, function: String)]

    init(table: String, groups: [String], sums: [String], others: [(column: String, function: String)] = []) {
        self.table = table
        self.groups = groups
        self.folds = sums.map { ($0, "SUM") } + others
    }

    /// Grouped by the stored decision too (schema 22), so `entitlements_by_product` reads `entitled` from
    /// the rows instead of deciding it from the state.
    public static let subscriptions = DashboardSummary(
        table: "subscription_counts",
        groups: ["bundle_id", "product_id", "environment", "ownership_type", "state", "entitled"],
        sums: ["subscribers"])
    /// `subscription_counts` as schema 11 made it, before `entitled` (what version 11's fill writes).
    static let subscriptionsByState = DashboardSummary(
        table: "subscription_counts", groups: ["bundle_id", "product_id", "environment", "ownership_type", "state"],
        sums: ["subscribers"])
    public static let receipts = DashboardSummary(
        table: "receipt_counts", groups: ["bundle_id", "source", "environment", "status"],
        sums: ["receipts", "with_transaction_id", "migrated"])
    public static let changes = DashboardSummary(
        table: "change_counts", groups: ["bundle_id", "day", "kind", "product_id", "environment"], sums: ["changes"])
    public static let failures = DashboardSummary(
        table: "failure_counts", groups: ["bundle_id", "day", "reason"], sums: ["failures", "receipts"])
    public static let notifications = DashboardSummary(
        table: "notification_counts", groups: ["day", "environment", "notification_type", "subtype"],
        sums: ["notifications", "unmatched"])
    public static let webhookOutcomes = DashboardSummary(
        table: "webhook_outcome_counts", groups: ["state"], sums: ["changes", "delivery_ms_total"],
        others: [
            ("oldest_queued_at", "MIN"), ("max_attempts", "MAX"), ("last_attempt_at", "MAX"),
            ("max_delivery_ms", "MAX"),
        ])
    public static let all = [subscriptions, receipts, changes, failures, notifications, webhookOutcomes]

    /// Replaces every group held by more than one row with one row of their sums (none when the
    /// group is now empty). Rows written by transactions that commit meanwhile are not in this
    /// statement's snapshot and stay for the next compaction.
    var compaction: String {
        let groupList = groups.joined(separator: ", ")
        return """
            WITH folded AS (
                DELETE FROM \(table) WHERE ctid IN (
                    SELECT ctid FROM (
                        SELECT ctid, COUNT(*) OVER (PARTITION BY \(groupList)) AS group_rows FROM \(table)
                    ) grouped
                    WHERE group_rows > 1
                )
                RETURNING *
            )
            INSERT INTO \(table) (\(groupList), \(folds.map(\.column).joined(separator: ", ")))
            SELECT \(groupList), \(folds.map { "\($0.function)(\($0.column))" }.joined(separator: ", "))
            FROM folded
            GROUP BY \(groupList)
            HAVING SUM(\(folds[0].column)) <> 0
            """
    }
}

extension SQLSubscriptionStore {
    /// Folds the dashboard summaries' delta rows into one row per group, so the views keep reading a
    /// few rows per group however many changes were counted, and the analytics summaries' changes into
    /// their rows (`foldAnalyticsSummaryDeltas`). One worker at a time (another worker already compacting
    /// does this one's share); SQLite's views read the tables, so only its analytics changes are folded.
    public func compactSummaries() async throws {
        try await foldAnalyticsSummaryDeltas()
        guard database.dialect == .postgres else { return }
        _ = try await exclusively("dashboard-summaries") {
            try await self.inTransaction { connection in
                for summary in DashboardSummary.all {
                    _ = try connection.execute(summary.compaction, [])
                }
            }
        }
    }
}
