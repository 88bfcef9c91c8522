import Foundation

/// The monthly figures as of a window's `until`, and ARPU's paying subscriptions in it, from a summary:
/// the same values as `CohortFigures` (through `SubscriptionAnalytics.cohortFigures`) and `CohortRetention`
/// over every ledger, so `refund_rate_by_period`, `trial_conversion_by_cohort`, `ltv_by_cohort`,
/// `arpu.paying_subscriptions` and the `cohorts` retention table can be answered without the ledger.
public struct CohortSummaryFigures: Sendable, Hashable, CohortFigureValues {
    public var since: Date
    public var asOf: Date
    /// By month (`YYYY-MM`), as `CohortFigures` has them.
    public var refundMonths: [String: CohortFigures.RefundMonth] = [:]
    public var trialCohorts: [String: CohortFigures.TrialCohort] = [:]
    public var ltvCohorts: [String: CohortFigures.LTVCohort] = [:]
    /// Per currency: subscriptions with a priced paid transaction purchased in the window.
    public var payingInWindow: [String: Int] = [:]
    /// Retention by cohort month, as `CohortRetention.cohorts` (Production's rule: the query's environment).
    public var retention: [String: CohortRetention.Cohort] = [:]

    /// The retention cohorts, oldest first (`CohortRetention.table`).
    public var retentionTable: [CohortRetention.Cohort] { retention.values.sorted { $0.month < $1.month } }
}

/// What the report reads of the monthly figures, whether recomputed (`CohortFigures`) or from the
/// summaries (`CohortSummaryFigures`), so one renderer serves both.
public protocol CohortFigureValues: Sendable {
    var since: Date { get }
    var asOf: Date { get }
    var refundMonths: [String: CohortFigures.RefundMonth] { get }
    var trialCohorts: [String: CohortFigures.TrialCohort] { get }
    var ltvCohorts: [String: CohortFigures.LTVCohort] { get }
    var payingInWindow: [String: Int] { get }
}

extension CohortFigures: CohortFigureValues {}

extension SummaryQuery {
    /// The days the summaries are read for: `(s, u)` unless a window off midnights chose the other midnight
    /// on a side (`OffUnitWindow.readS`, `readU`); `relabeled` then moves the rows read.
    public var sinceUnit: Int { offUnit?.readS ?? s }
    public var untilUnit: Int { offUnit?.readU ?? u }

    /// The first unit of each month whose cohort rows the figures read: the 24 months up to `until`'s
    /// (LTV's; refund rate, trial conversion and retention use the last 12). A store reads the cohort rows
    /// with these as their `until` bound and `since ≤ u`.
    public var cohortUnits: [Int] { Self.cohortUnits(until: until, unit: unit) }

    static func cohortUnits(until: Date, unit: TimeInterval) -> [Int] {
        let month = CohortFigures.monthIndex(of: until)
        return ((month - CohortFigures.ltvMonths + 1)...month).map { month in
            AnalyticsContributions.cohortUnit(firstDay: AnalyticsContributions.firstDay(ofMonth: month), unit: unit)
        }
    }

    /// The figures over `summary` (one app's rows when `bundleID` is given): the paying rows a window
    /// selects (`s < until ≤ u`, `since ≤ s`), and the cohort rows of the months up to `until`'s counted
    /// by `u` (`since ≤ u`). `summary` is either every row, or a store's window read and cohort read added.
    public func cohortFigures(of summary: AnalyticsSummary, bundleID: String? = nil) -> CohortSummaryFigures {
        let month = CohortFigures.monthIndex(of: until)
        var rows: [CohortRow: Int] = [:]
        for (key, count) in summary.counts where key.environment == environment && key.figure.isCohort {
            if let bundleID, key.bundleID != bundleID { continue }
            guard case .corner(let sinceBound, let untilBound) = key.shape else { continue }
            var bare = key
            bare.shape = .event(0)
            if key.figure == .payingInWindow {
                if sinceBound <= s, s < untilBound, untilBound <= u {
                    rows[CohortRow(month: 0, key: bare), default: 0] += count
                }
                continue
            }
            // A cohort row: its month's first unit, and the unit from which it counts.
            // From a unit after the month's first (a row on a window's axis may count from that unit).
            guard untilBound <= sinceBound, sinceBound <= u else { continue }
            let monthStart = Double(AnalyticsContributions.day(ofUnit: untilBound)) * unit
            let rowMonth = CohortFigures.monthIndex(of: Date(timeIntervalSince1970: monthStart))
            let months = key.figure.isLTV ? CohortFigures.ltvMonths : CohortFigures.months
            guard rowMonth <= month, rowMonth > month - months else { continue }
            rows[CohortRow(month: rowMonth, key: bare), default: 0] += count
        }
        var figures = CohortSummaryFigures(since: since, asOf: until)
        for (row, count) in rows where count != 0 { apply(row, count, to: &figures) }
        return figures
    }

    struct CohortRow: Hashable {
        var month: Int
        var key: ContributionKey
    }

    private func apply(_ row: CohortRow, _ count: Int, to figures: inout CohortSummaryFigures) {
        let key = row.key
        let name = CohortFigures.monthName(row.month)
        let price = cohortPrice(of: key)
        let times = key.factor * Decimal(count)
        switch key.figure {
        case .refundPurchase:
            figures.refundMonths[name, default: .init(month: name)].transactions += count
            if let price { figures.refundMonths[name, default: .init(month: name)].purchased.add(price, times: times) }
        case .refundRefunded:
            figures.refundMonths[name, default: .init(month: name)].refunded += count
            if let price { figures.refundMonths[name, default: .init(month: name)].refunds.add(price, times: times) }
        case .refundSeats:
            if let price { figures.refundMonths[name, default: .init(month: name)].refunds.add(price, times: times) }
        case .trialCohortStarted: figures.trialCohorts[name, default: .init(month: name)].started += count
        case .trialCohortConverted: figures.trialCohorts[name, default: .init(month: name)].converted += count
        case .trialCohortInTrial: figures.trialCohorts[name, default: .init(month: name)].inTrial += count
        case .ltvCustomer:
            var cohort = figures.ltvCohorts[name] ?? Self.ltvCohort(row.month)
            cohort.customers += count
            if let price { cohort.customersByCurrency[price.currency, default: 0] += count }
            figures.ltvCohorts[name] = cohort
        case .ltvRevenue:
            var cohort = figures.ltvCohorts[name] ?? Self.ltvCohort(row.month)
            if let price, let horizon = key.cohort?.horizon, horizon >= 0 {
                for index in horizon..<CohortFigures.ltvHorizons.count {
                    cohort.netRevenue[index].add(price, times: times)
                }
            }
            figures.ltvCohorts[name] = cohort
        case .retention: addRetention(key, count, month: name, to: &figures)
        case .payingInWindow:
            guard let price, (key.cohort?.later ?? []).allSatisfy({ cataloguePrice(of: $0) == nil }) else { return }
            figures.payingInWindow[price.currency, default: 0] += count
        default: return
        }
    }

    /// A retention row counts when the period it assumes is the one the catalogue (else the dates) gives:
    /// period k is observed once its end plus a day is at or before the last midnight at or before `until`,
    /// and retained when the row says.
    private func addRetention(
        _ key: ContributionKey, _ count: Int, month: String, to figures: inout CohortSummaryFigures
    ) {
        guard let detail = key.cohort, let assumed = detail.assumed.flatMap(BillingPeriod.init(rawValue:)),
            let start = detail.start,
            let period = key.productID.flatMap({ catalogue.products[$0]?.period }) ?? key.period,
            period == assumed
        else { return }
        var cohort = figures.retention[month] ?? CohortRetention.Cohort(month: month)
        cohort.subscriptions += count
        let startOfUnit = Date(timeIntervalSince1970: Double(start) * unit)
        for k in 1...CohortRetention.periods {
            let end = period.advance(startOfUnit, by: k).addingTimeInterval(86_400)
            // A midnight moved by whole days and calendar months is a midnight (unit `3n`); a purchase inside
            // its day ends inside one too, so it has passed by the first unit start after, `3n + 2`.
            let endDay = AnalyticsContributions.clamped((end.timeIntervalSince1970 / unit).rounded())
            let ended = AnalyticsContributions.unit(ofDay: endDay) + (detail.onStart == true ? 0 : 2)
            guard ended <= retentionUnit else { break }
            cohort.observed[k - 1] += count
            if (detail.retained ?? 0) & (1 << (k - 1)) != 0 { cohort.retained[k - 1] += count }
        }
        figures.retention[month] = cohort
    }

    private func cohortPrice(of key: ContributionKey) -> Money? {
        cataloguePrice(of: CataloguePrice(productID: key.productID, currency: key.price?.currency), key.price)
    }

    /// What `ProductCatalogue.price(of:preferring:)` gives a paid transaction of `lookup`'s product and
    /// currency (and Apple's milliunits when `source` has them).
    private func cataloguePrice(of lookup: CataloguePrice, _ source: PriceSource? = nil) -> Money? {
        let transaction = LedgerTransaction(
            transactionID: "", originalTransactionID: "", productID: lookup.productID, purchasedAt: nil,
            expiresAt: nil, priceMilliunits: source?.milliunits, currency: lookup.currency, origin: .statusAnswer)
        return catalogue.price(of: transaction, preferring: reportingCurrency)
    }

    /// An LTV cohort of a month, with the month's end as `CohortFigures` works it out.
    static func ltvCohort(_ month: Int) -> CohortFigures.LTVCohort {
        let name = CohortFigures.monthName(month)
        let start = DailyAnalytics.dayStart(named: name + "-01") ?? .distantPast
        let end = BillingPeriod.utc.date(byAdding: .month, value: 1, to: start) ?? start
        return CohortFigures.LTVCohort(month: name, monthEnd: end)
    }
}

extension ContributionFigure {
    /// The rows `SummaryQuery.cohortFigures` reads.
    var isCohort: Bool {
        switch self {
        case .refundPurchase, .refundRefunded, .refundSeats, .trialCohortStarted, .trialCohortConverted,
            .trialCohortInTrial, .ltvCustomer, .ltvRevenue, .retention, .payingInWindow:
            true
        default: false
        }
    }

    var isLTV: Bool { self == .ltvCustomer || self == .ltvRevenue }
}

extension CohortSummaryFigures {
    /// The figures on which these differ from `reference` (and from `retention`, when given), each named
    /// with both values; empty when they agree. For `--check-summaries` and the property tests.
    public func differences(
        from reference: some CohortFigureValues, retention expected: [String: CohortRetention.Cohort]? = nil
    ) -> [String] {
        var found: [String] = []
        func check<Value: Equatable>(_ name: String, _ recomputed: [String: Value], _ summary: [String: Value]) {
            for month in Set(recomputed.keys).union(summary.keys).sorted() where recomputed[month] != summary[month] {
                found.append(
                    "\(name) \(month): recomputed \(recomputed[month].map { "\($0)" } ?? "none"), "
                        + "summary \(summary[month].map { "\($0)" } ?? "none")")
            }
        }
        check("refund_rate_by_period", reference.refundMonths, refundMonths)
        check("trial_conversion_by_cohort", reference.trialCohorts, trialCohorts)
        check("ltv_by_cohort", reference.ltvCohorts, ltvCohorts)
        check("arpu.paying_subscriptions", reference.payingInWindow, payingInWindow)
        if let expected { check("cohorts", expected, retention) }
        return found
    }
}
