import Foundation
import RenewalCore

/// Read access to the transaction ledger for the analytics: each subscription's transactions at once,
/// in pages, so a caller holds one page however large the ledger grows.
public protocol AnalyticsStore: SubscriptionStore {
    /// Up to `limit` subscriptions whose original transaction id sorts after `after`, in that order, each
    /// with all its transactions; only `bundleID`'s when given.
    func ledgerPage(bundleID: String?, after: String?, limit: Int) async throws -> [SubscriptionLedger]

    /// Replaces the daily series' rows of the days `first` through `last` (`YYYY-MM-DD`, of `bundleID`
    /// only when given) with `rows`, in one transaction: a reader sees the old days or the new ones.
    func replaceAnalyticsDays(
        first: String, last: String, bundleID: String?, rows: [AnalyticsDayRow], computedAt: Date
    ) async throws

    /// The daily series' rows of the days `first` through `last` (`YYYY-MM-DD`; of `bundleID` only when
    /// given), every currency, in key order.
    func analyticsDays(first: String, last: String, bundleID: String?) async throws -> [AnalyticsDayRow]

    /// The first and last day the daily series holds (of `bundleID` only when given); nil when it is empty.
    func analyticsDaysKept(bundleID: String?) async throws -> (first: String, last: String)?

    /// Replaces the cohort table (of `bundleID` only when given) with `cohorts`, by app, in one
    /// transaction.
    func replaceAnalyticsCohorts(
        bundleID: String?, cohorts: [String: [CohortRetention.Cohort]], computedAt: Date
    ) async throws
}

extension AnalyticsStore {
    /// Feeds every subscription of the ledger (of `bundleID` when given) to `body`, a page at a time.
    public func forEachSubscriptionLedger(
        bundleID: String?, pageSize: Int = 500, _ body: (SubscriptionLedger) throws -> Void
    ) async throws {
        var after: String?
        while true {
            let page = try await ledgerPage(bundleID: bundleID, after: after, limit: pageSize)
            for ledger in page { try body(ledger) }
            guard page.count == pageSize, let last = page.last else { return }
            after = last.originalTransactionID
        }
    }
}
