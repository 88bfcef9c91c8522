import Foundation
import RenewalCore

/// Read access to the transaction ledger for the analytics: each subscription's transactions at once,
/// in pages, so a caller holds one page however large the ledger grows.
public protocol AnalyticsStore: SubscriptionStore {
    /// Up to `limit` subscriptions whose original transaction id sorts after `after`, in that order, each
    /// with all its transactions; only `bundleID`'s when given.
    func ledgerPage(bundleID: String?, after: String?, limit: Int) async throws -> [SubscriptionLedger]

    /// The ledgers of these subscriptions (a few: the unclaimed purchases), read 500 at a time; one without
    /// any transaction is absent.
    func ledgers(of originalTransactionIDs: [String]) async throws -> [SubscriptionLedger]

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

/// What `analytics_summary_state` says of the analytics summaries (issue 45): a window is answered from
/// them only while they are current (`staleReason` nil), else recomputed from the ledger. Once built,
/// every write of the job keeps them (schema 29); a ledger written behind the job's back needs a
/// `--rebuild`.
public struct AnalyticsSummaryState: Sendable, Hashable {
    /// The version of the definitions the rows follow (`AnalyticsContributions`, `SubscriptionAnalytics`,
    /// `EntitlementTimeline`). Raised with any change to them, so rows built before need a `--rebuild`
    /// (and writes stop keeping them until then).
    public static let definitionVersion = 4

    /// The summed rows a `--rebuild` page holds in memory before adding them to the table: packed, at most
    /// about 13 MB (a dictionary of 2¹⁸ slots of 48 bytes, with room for the chunk that passes the limit).
    /// A page of the generators' ledgers sums to 50,000 to 90,000 rows, so it is added once, at its end.
    public static let rebuildHeldRows = 131_072

    /// `building` while `--rebuild` runs (or when it was interrupted), `built` once it finished.
    public var status: String
    public var definitionVersion: Int
    public var schemaVersion: Int
    public var startedAt: Date
    public var builtAt: Date?
    public var subscriptions: Int
    public var rows: Int

    public init(
        status: String, definitionVersion: Int, schemaVersion: Int, startedAt: Date, builtAt: Date?,
        subscriptions: Int, rows: Int
    ) {
        self.status = status
        self.definitionVersion = definitionVersion
        self.schemaVersion = schemaVersion
        self.startedAt = startedAt
        self.builtAt = builtAt
        self.subscriptions = subscriptions
        self.rows = rows
    }

    /// Nil when the rows answer a window; else why not, for the operator.
    public var staleReason: String? {
        if status != "built" {
            return "a --rebuild is running or was interrupted (\(subscriptions) subscriptions summed so far); "
                + "run renewal analytics --rebuild to go on with it"
        }
        if definitionVersion != Self.definitionVersion {
            return "built with definitions \(definitionVersion), this build has \(Self.definitionVersion); "
                + "run renewal analytics --rebuild"
        }
        return nil
    }
}

/// The analytics summaries' tables (schema 27 and 29): built by `renewal analytics --rebuild`, kept by
/// every write of the job, read a window at a time.
public protocol AnalyticsSummaryStore: AnalyticsStore {
    /// Records a build begun at `startedAt` (not current yet). When a build of these definitions was
    /// interrupted (killed, a deploy, a lost connection), it goes on from the last page that build
    /// committed: the writes since have kept what it had summed. Otherwise the summaries are emptied.
    /// Returns how many subscriptions the build had summed already (0 when it starts over).
    func beginAnalyticsSummaryRebuild(startedAt: Date) async throws -> Int

    /// Sums the contribution rows of up to `limit` subscriptions after the last one the build has summed
    /// (in original transaction id order, read from the state in the same transaction) into the table, in
    /// one transaction that writes cannot interleave with; returns how many it read and the last one (nil
    /// when none was left). Two builds side by side share the pages instead of summing one twice. The page's
    /// sum is added to the table whenever it holds `heldRows` keys, and at the end, so memory is bounded by
    /// `heldRows` whatever the page size or how many days the ledger covers.
    func rebuildAnalyticsSummaryPage(limit: Int, heldRows: Int) async throws -> (count: Int, last: String?)

    /// Folds the writes' changes into the rows, drops rows whose count summed to zero and records the build
    /// finished; returns the subscriptions the build summed (across interruptions) and the rows kept.
    func finishAnalyticsSummaryRebuild(builtAt: Date) async throws -> (subscriptions: Int, rows: Int)

    /// The state row; nil before the first `--rebuild`.
    func analyticsSummaryState() async throws -> AnalyticsSummaryState?

    /// The rows window `(s, u)` (unit indices) selects, of `environment` (and `bundleID` when given),
    /// summed per key onto shapes `SummaryQuery` reads the same way: events at `s`, steps at `s` (counted
    /// at both bounds) and at `u` (at `until` only), corners at `(s, u)`.
    func analyticsSummary(s: Int, u: Int, bundleID: String?, environment: AppStoreEnvironment) async throws
        -> AnalyticsSummary

    /// The same rows, with the MRR change events on their own day (not summed at `s`): what
    /// `SummaryQuery.movement(of:)` needs for `mrr_movement_daily`, and `figures(of:)` reads alike.
    func analyticsMovementSummary(s: Int, u: Int, bundleID: String?, environment: AppStoreEnvironment)
        async throws -> AnalyticsSummary

    /// The cohort rows of the months whose first units are `cohortUnits` (`SummaryQuery.cohortUnits`) that
    /// count by unit `u`, summed per month and key onto `corner(since: u, until: month's first unit)`:
    /// what `SummaryQuery.cohortFigures(of:)` reads besides a window's paying rows.
    func analyticsCohortSummary(cohortUnits: [Int], u: Int, bundleID: String?, environment: AppStoreEnvironment)
        async throws -> AnalyticsSummary

    /// What the summaries' answer for `query`'s days `(s, u)` needs added to be the answer for its window
    /// when a bound is not a midnight (`OffUnitWindow`): `SummaryQuery.correction(of:)` summed over the
    /// subscriptions with a date (`SubscriptionLedger.dates`) in the window's part-days, their ledgers read
    /// `pageSize` at a time, so memory holds one page whatever the part-days hold; and how many
    /// subscriptions were corrected. Empty for a window on the unit.
    func analyticsCorrection(_ query: SummaryQuery, pageSize: Int) async throws -> (
        rows: AnalyticsSummary, subscriptions: Int
    )

    /// How many purchases and expiries the ledger dates in `part`: the measure of a part-day's
    /// correction `analyticsReading(of:)` compares.
    func analyticsDatedRows(in part: PartDay) async throws -> Int
}

extension AnalyticsSummaryStore {
    /// `analyticsCorrection(_:pageSize:)` 500 subscriptions a page.
    public func analyticsCorrection(_ query: SummaryQuery) async throws -> (
        rows: AnalyticsSummary, subscriptions: Int
    ) {
        try await analyticsCorrection(query, pageSize: 500)
    }
}

extension AnalyticsSummaryStore {
    /// `window` read from whichever unit on each side makes the lighter correction: the answer is the
    /// same either way (`OffUnitWindow.reading(sinceAfter:untilBefore:)`). A part-day weighs the purchases
    /// and expiries in it (`analyticsDatedRows(in:)`), twice for the one before `since` and the one after
    /// `until`: a subscription dated there has two sets of rows worked out, one dated only in
    /// the other parts one set (`OffUnitWindow.keepsUnits(of:)`).
    public func analyticsReading(of window: OffUnitWindow) async throws -> OffUnitWindow {
        guard !window.isAligned else { return window }
        // Each side's weight, read from the unit holding (index 0) and after (index 1) `since`, and from
        // the first unit start after (0) and the unit before (1) `until`.
        var since = [0, 0]
        var until = [0, 0]
        for (index, other) in [(0, false), (1, true)] {
            let weight = 2 - index
            if let part = window.sincePart(after: other) {
                since[index] = weight * (try await analyticsDatedRows(in: part))
            }
            if let part = window.untilPart(before: other) {
                until[index] = weight * (try await analyticsDatedRows(in: part))
            }
        }
        var best = (window, since[0] + until[0])
        for (after, before) in [(true, false), (false, true), (true, true)] {
            guard let other = window.reading(sinceAfter: after, untilBefore: before) else { continue }
            let weight = since[after ? 1 : 0] + until[before ? 1 : 0]
            if weight < best.1 { best = (other, weight) }
        }
        return best.0
    }
}

extension AnalyticsSummaryStore {
    /// The monthly figures and ARPU's paying subscriptions of `query` from the summaries: `window` is the
    /// window's read (`analyticsSummary`, which holds the paying rows), the cohort rows are read here.
    public func analyticsCohortFigures(_ query: SummaryQuery, window: AnalyticsSummary, bundleID: String?)
        async throws -> CohortSummaryFigures
    {
        var rows = query.relabeled(
            try await analyticsCohortSummary(
                cohortUnits: query.cohortUnits, u: query.untilUnit, bundleID: bundleID,
                environment: query.environment))
        rows.add(window.counts)
        return query.cohortFigures(of: rows, bundleID: bundleID)
    }
}

extension AnalyticsSummaryStore {
    /// One page of a rebuild holding the default number of summed rows.
    public func rebuildAnalyticsSummaryPage(limit: Int) async throws -> (count: Int, last: String?) {
        try await rebuildAnalyticsSummaryPage(limit: limit, heldRows: AnalyticsSummaryState.rebuildHeldRows)
    }

    /// `--rebuild`: every subscription's contribution rows, a page at a time, summed and added to the
    /// table, so memory holds one page's ledgers and at most `heldRows` summed rows. Writes during the build keep what the build has read, so
    /// the summaries are current when it finishes. An interrupted build goes on where it stopped;
    /// `continued` is how many subscriptions it had summed before this call.
    public func rebuildAnalyticsSummaries(
        pageSize: Int = 500, heldRows: Int = AnalyticsSummaryState.rebuildHeldRows, now: () -> Date = Date.init
    ) async throws -> (subscriptions: Int, rows: Int, continued: Int) {
        let continued = try await beginAnalyticsSummaryRebuild(startedAt: now())
        while try await rebuildAnalyticsSummaryPage(limit: pageSize, heldRows: heldRows).count == pageSize {}
        let finished = try await finishAnalyticsSummaryRebuild(builtAt: now())
        return (finished.subscriptions, finished.rows, continued)
    }
}
