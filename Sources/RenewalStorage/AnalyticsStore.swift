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

/// What `analytics_summary_state` says the analytics summaries were built from (issue 45): a window is
/// answered from them only while they are `current(mark:)`, else recomputed from the ledger.
public struct AnalyticsSummaryState: Sendable, Hashable {
    /// The version of the definitions the rows follow (`AnalyticsContributions`, `SubscriptionAnalytics`,
    /// `EntitlementTimeline`). Raised with any change to them, so rows built before need a `--rebuild`.
    public static let definitionVersion = 1

    /// `building` while `--rebuild` runs (or when it was interrupted), `built` once it finished.
    public var status: String
    public var definitionVersion: Int
    public var schemaVersion: Int
    public var startedAt: Date
    public var builtAt: Date?
    public var subscriptions: Int
    public var rows: Int
    /// The ledger's mark read before the build (`AnalyticsStore.analyticsLedgerMark`).
    public var ledgerMark: String

    public init(
        status: String, definitionVersion: Int, schemaVersion: Int, startedAt: Date, builtAt: Date?,
        subscriptions: Int, rows: Int, ledgerMark: String
    ) {
        self.status = status
        self.definitionVersion = definitionVersion
        self.schemaVersion = schemaVersion
        self.startedAt = startedAt
        self.builtAt = builtAt
        self.subscriptions = subscriptions
        self.rows = rows
        self.ledgerMark = ledgerMark
    }

    /// Nil when the rows answer a window given the ledger's mark now; else why not, for the operator.
    public func staleReason(markNow: String) -> String? {
        if status != "built" { return "the last --rebuild did not finish" }
        if definitionVersion != Self.definitionVersion {
            return "built with definitions \(definitionVersion), this build has \(Self.definitionVersion)"
        }
        if ledgerMark != markNow { return "the ledger was written since the --rebuild" }
        return nil
    }
}

/// The analytics summaries' table (schema 27): built by `renewal analytics --rebuild`, read a window at a time.
public protocol AnalyticsSummaryStore: AnalyticsStore {
    /// A mark of the ledger's writes: it differs after any write to `transactions` or `subscription_facts`.
    func analyticsLedgerMark() async throws -> String

    /// Empties the summary rows and records a build of `mark` begun at `startedAt` (not current yet).
    func beginAnalyticsSummaryRebuild(mark: String, startedAt: Date) async throws

    /// Adds `rows` (one page of subscriptions' contributions, summed) to the stored counts.
    func addAnalyticsSummaryRows(_ rows: [ContributionKey: Int]) async throws

    /// Drops rows whose count summed to zero and records the build finished; returns the rows kept.
    func finishAnalyticsSummaryRebuild(subscriptions: Int, builtAt: Date) async throws -> Int

    /// The state row; nil before the first `--rebuild`.
    func analyticsSummaryState() async throws -> AnalyticsSummaryState?

    /// The rows window `(s, u)` (unit indices) selects, of `environment` (and `bundleID` when given),
    /// summed per key onto shapes `SummaryQuery` reads the same way: events at `s`, steps at `s` (counted
    /// at both bounds) and at `u` (at `until` only), corners at `(s, u)`.
    func analyticsSummary(s: Int, u: Int, bundleID: String?, environment: AppStoreEnvironment) async throws
        -> AnalyticsSummary
}

extension AnalyticsSummaryStore {
    /// `--rebuild`: every subscription's contribution rows, a page at a time, summed per page and added
    /// to the table, so memory holds one page; the mark is read first, so a write during the build leaves
    /// the summaries stale rather than silently behind.
    public func rebuildAnalyticsSummaries(pageSize: Int = 500, now: () -> Date = Date.init) async throws
        -> (subscriptions: Int, rows: Int)
    {
        let mark = try await analyticsLedgerMark()
        try await beginAnalyticsSummaryRebuild(mark: mark, startedAt: now())
        let contributions = AnalyticsContributions()
        var subscriptions = 0
        var after: String?
        while true {
            let page = try await ledgerPage(bundleID: nil, after: after, limit: pageSize)
            var summed = AnalyticsSummary()
            for ledger in page { summed.add(contributions.rows(of: ledger)) }
            subscriptions += page.count
            try await addAnalyticsSummaryRows(summed.counts)
            guard page.count == pageSize, let last = page.last else { break }
            after = last.originalTransactionID
        }
        let rows = try await finishAnalyticsSummaryRebuild(subscriptions: subscriptions, builtAt: now())
        return (subscriptions, rows)
    }
}
