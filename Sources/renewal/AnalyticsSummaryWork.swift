import Foundation
import RenewalCore
import RenewalReports
import RenewalStorage

/// What `renewal analytics --rebuild` and `--check-summaries` do with the analytics summaries (schema 27,
/// docs/analytics.md "How a window is answered fast").
struct AnalyticsSummaryWork {
    let store: any AnalyticsSummaryStore
    /// Only this app's figures (the summaries are built for every app).
    let app: String?
    let catalogue: ProductCatalogue
    let rates: ExchangeRates

    /// What `--rebuild` built, and how long it took.
    struct Rebuilt {
        var rows: Int
        var subscriptions: Int
        /// The subscriptions an interrupted build had summed before this one went on from it (0 when it
        /// started over).
        var continued: Int
        var seconds: Double

        var json: String {
            #"{"continued":\#(continued),"rows":\#(rows),"seconds":\#(Self.rounded(seconds)),"#
                + #""subscriptions":\#(subscriptions)}"#
        }

        var text: String {
            let from = continued > 0 ? " (going on from an interrupted build after \(continued))" : ""
            return "analytics summaries: \(rows) rows from \(subscriptions) subscriptions\(from) in "
                + "\(Self.rounded(seconds)) s"
        }

        static func rounded(_ seconds: Double) -> String { String(format: "%.3f", seconds) }
    }

    /// `--rebuild`: every subscription's contribution rows summed into the table, then marked current.
    func rebuild() async throws -> Rebuilt {
        let clock = ContinuousClock()
        var result: (subscriptions: Int, rows: Int, continued: Int) = (0, 0, 0)
        // Larger pages cost fewer commits and sum each key once for more subscriptions (SQLite: a third of
        // the time at 5,000 than at 500). A page holds the lock every writer shares (on SQLite the write
        // lock): its rows are worked out on every core, so a page of 4,000 on PostgreSQL holds it about as
        // long as one of 1,000 did on one core, and one of 20,000 on SQLite well within its 5 s busy timeout.
        let pageSize = store.backendName == "sqlite" ? 20_000 : 4_000
        let elapsed = try await clock.measure {
            result = try await store.rebuildAnalyticsSummaries(pageSize: pageSize)
        }
        return Rebuilt(
            rows: result.rows, subscriptions: result.subscriptions, continued: result.continued,
            seconds: Self.seconds(elapsed))
    }

    /// Whether the summaries answer `[since, until)`: nil when they do, else why not.
    func unusableReason(since: Date, until: Date) async throws -> String? {
        guard SummaryQuery(window: since, until: until) != nil else { return "--since is not before --until" }
        guard let state = try await store.analyticsSummaryState() else {
            return "no summaries were built; run renewal analytics --rebuild"
        }
        return state.staleReason
    }

    /// The query of `[since, until)` on the day summaries, with the catalogue and reporting currency; off
    /// midnights, read from the midnights whose part-days date fewer rows (`analyticsReading(of:)`).
    func query(since: Date, until: Date) async throws -> SummaryQuery? {
        guard let window = OffUnitWindow(since: since, until: until) else { return nil }
        return SummaryQuery(
            try await store.analyticsReading(of: window), catalogue: catalogue,
            reportingCurrency: rates.reportingCurrency)
    }

    /// The window's figures (total and by product) from the summary rows, and how many subscriptions a window
    /// off midnights corrected; the caller checked the summaries answer it.
    func figures(since: Date, until: Date) async throws -> (
        total: AnalyticsFigures, byProduct: [String: AnalyticsFigures], corrected: Int
    )? {
        guard let query = try await query(since: since, until: until) else { return nil }
        var summary = query.relabeled(
            try await store.analyticsSummary(
                s: query.sinceUnit, u: query.untilUnit, bundleID: app, environment: .production))
        let correction = try await store.analyticsCorrection(query)
        summary.add(correction.rows.counts)
        let figures = query.figures(of: summary, bundleID: app)
        return (figures.total, figures.byProduct, correction.subscriptions)
    }

    /// The report of `[since, until)` from the summaries, as `AnalyticsWork.recomputed` gives it; nil when
    /// they do not answer the window (`unusableReason`). A window off midnights adds the correction of the
    /// subscriptions with a date in its part-days (`AnalyticsSummaryStore.analyticsCorrection`). The
    /// unclaimed purchases' figures come from their own ledgers (a few), as they are not summed apart.
    func report(since: Date, until: Date, unclaimedIDs: Set<String>?) async throws -> AnalyticsReport? {
        guard try await unusableReason(since: since, until: until) == nil,
            let query = try await query(since: since, until: until)
        else { return nil }
        var summary = query.relabeled(
            try await store.analyticsMovementSummary(
                s: query.sinceUnit, u: query.untilUnit, bundleID: app, environment: .production))
        summary.add(try await store.analyticsCorrection(query).rows.counts)
        guard let movement = query.movement(of: summary, bundleID: app) else { return nil }
        let figures = query.figures(of: summary, bundleID: app)
        let cohorts = try await store.analyticsCohortFigures(query, window: summary, bundleID: app)
        var report = AnalyticsReport(
            since: since, until: until, total: figures.total, byProduct: figures.byProduct, movement: movement,
            cohortFigures: cohorts, rates: rates, bundleID: app)
        if let unclaimedIDs {
            var unclaimed = SubscriptionAnalytics(
                since: since, until: until, catalogue: catalogue, reportingCurrency: rates.reportingCurrency)
            for ledger in try await store.ledgers(of: Array(unclaimedIDs)) { unclaimed.add(ledger) }
            report.unclaimed = AnalyticsReport.Unclaimed(purchases: unclaimedIDs.count, unclaimed, rates: rates)
        }
        return report
    }

    /// What `--check-summaries` found for a window.
    struct Check {
        var since: Date
        var until: Date
        /// Nil when the summaries answered; else why the window is recomputed.
        var unusable: String?
        var equal: Bool?
        var differing: [String]
        var summarySeconds: Double?
        /// Reading the state row (whether the rows answer), apart from reading them.
        var markSeconds: Double
        var recomputeSeconds: Double
        /// The stored daily series of the window's days against the ledger's: nil when not compared (the
        /// window is not on midnights), else the days whose rows differ (empty when every day is equal).
        var dailyDiffering: [String]?
        /// The subscriptions a window off midnights corrected from their ledgers (0 on midnights).
        var corrected = 0

        var json: String {
            let reason = unusable.map { #""\#($0)""# } ?? "null"
            let equalText = equal.map { $0 ? "true" : "false" } ?? "null"
            let summary = summarySeconds.map(Rebuilt.rounded) ?? "null"
            let differ = differing.map { #""\#($0)""# }.joined(separator: ",")
            let dailyEqual = dailyDiffering.map { $0.isEmpty ? "true" : "false" } ?? "null"
            let dailyDays = dailyDiffering.map { "[" + $0.map { #""\#($0)""# }.joined(separator: ",") + "]" } ?? "[]"
            return """
                {"corrected_subscriptions":\(corrected),"daily_differing":\(dailyDays),"daily_equal":\(dailyEqual),\
                "differing":[\(differ)],"equal":\(equalText),"mark_seconds":\(Rebuilt.rounded(markSeconds)),"recompute_seconds":\(Rebuilt.rounded(recomputeSeconds)),\
                "since":"\(Timestamp.string(since))","summaries":\(unusable == nil ? #""current""# : #""unusable""#),\
                "summary_seconds":\(summary),"unusable_reason":\(reason),"until":"\(Timestamp.string(until))"}
                """
        }

        var text: String {
            figuresText + (dailyDiffering.map { "\n" + Self.dailyText($0) } ?? "")
        }

        static func dailyText(_ differing: [String]) -> String {
            differing.isEmpty
                ? "daily series equal to the ledger on every day of the window"
                : "daily series DIFFERS from the ledger on " + differing.joined(separator: ", ")
                    + " (renewal analytics --refresh-daily puts it right)"
        }

        private var figuresText: String {
            guard let summarySeconds, let equal else {
                return "summaries not used (\(unusable ?? "")); recomputed in \(Rebuilt.rounded(recomputeSeconds)) s"
            }
            return
                (equal
                ? "summaries equal the recomputation" : "summaries DIFFER in " + differing.joined(separator: ", "))
                + ": from summaries in \(Rebuilt.rounded(summarySeconds)) s (after checking they are current in "
                + "\(Rebuilt.rounded(markSeconds)) s\(corrected > 0 ? "; \(corrected) subscriptions corrected" : "")), "
                + "recomputed in \(Rebuilt.rounded(recomputeSeconds)) s"
        }
    }

    /// `--check-summaries`: the window from the summaries and by recomputation, timed, figure by figure.
    func check(since: Date, until: Date) async throws -> Check {
        let clock = ContinuousClock()
        var fromSummary: (total: AnalyticsFigures, byProduct: [String: AnalyticsFigures], corrected: Int)?
        var unusable: String?
        let markElapsed = try await clock.measure { unusable = try await unusableReason(since: since, until: until) }
        let summaryElapsed = try await clock.measure {
            if unusable == nil { fromSummary = try await figures(since: since, until: until) }
        }
        var analytics = SubscriptionAnalytics(
            since: since, until: until, catalogue: catalogue, reportingCurrency: rates.reportingCurrency)
        // The window's days as the ledger gives them, to hold the stored daily series against.
        let lastDay = until.addingTimeInterval(-86_400)
        var daily =
            SummaryQuery(since: since, until: until) == nil
            ? nil
            : DailyAnalytics(
                from: since, through: lastDay, catalogue: catalogue, reportingCurrency: rates.reportingCurrency)
        let recomputeElapsed = try await clock.measure {
            try await store.forEachSubscriptionLedger(bundleID: app) { ledger in
                analytics.add(ledger)
                daily?.add(ledger)
            }
        }
        var check = Check(
            since: since, until: until, unusable: unusable, equal: nil, differing: [], summarySeconds: nil,
            markSeconds: Self.seconds(markElapsed), recomputeSeconds: Self.seconds(recomputeElapsed))
        if let daily { check.dailyDiffering = try await dailyDifferences(daily) }
        guard let fromSummary else { return check }
        check.corrected = fromSummary.corrected
        check.summarySeconds = Self.seconds(summaryElapsed)
        if fromSummary.total != analytics.total { check.differing.append("total") }
        for product in Set(fromSummary.byProduct.keys).union(analytics.byProduct.keys).sorted()
        where fromSummary.byProduct[product] != analytics.byProduct[product] {
            check.differing.append(product)
        }
        check.equal = check.differing.isEmpty
        return check
    }

    /// The days whose stored rows (of the app, or every app) are not the ledger's; nil when the series
    /// holds none of the days (never refreshed for them: nothing to compare).
    private func dailyDifferences(_ daily: DailyAnalytics) async throws -> [String]? {
        guard let range = daily.range else { return nil }
        let stored = Set(try await store.analyticsDays(first: range.first, last: range.last, bundleID: app))
        guard !stored.isEmpty else { return nil }
        let expected = Set(daily.rows(rates: rates))
        return Set(expected.symmetricDifference(stored).map(\.key.day)).sorted()
    }

    static func day(_ date: Date) -> Int { Int((date.timeIntervalSince1970 / 86_400).rounded(.down)) }

    static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }
}
