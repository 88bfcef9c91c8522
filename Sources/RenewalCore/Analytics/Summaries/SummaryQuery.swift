import Foundation

/// A window's figures from a summary of contribution rows: the same `AnalyticsFigures`, total and by
/// product, as `SubscriptionAnalytics` over every subscription's ledger, for a window aligned to the
/// summary's unit. The catalogue (list prices, period overrides) and the reporting currency apply here,
/// at query time, so the summary never goes stale when they change; rates apply after, as for the
/// recomputation. A window off midnights (`init(window:…)`) is answered once the caller has added the
/// `correction(of:)` of each subscription with something dated in its part-days (`OffUnitWindow`).
public struct SummaryQuery: Sendable {
    public let since: Date
    public let until: Date
    public let catalogue: ProductCatalogue
    public let reportingCurrency: String
    public let environment: AppStoreEnvironment
    /// The window as unit indices `[s, u)` (three a day, `AnalyticsContributions.unitsPerDay`).
    let s: Int
    let u: Int
    /// The summary's unit in seconds: a day's movement (`mrr_movement_daily`) needs a unit of one day.
    let unit: TimeInterval
    /// The window's axis when a bound is not a midnight; nil when the window is aligned to the unit.
    public let offUnit: OffUnitWindow?
    /// What the window's reads select, for its corrections.
    let reads: Reads

    /// Nil when `since` or `until` is not the start of a unit, or `since` is not before `until`.
    public init?(
        since: Date, until: Date, catalogue: ProductCatalogue = .init(), reportingCurrency: String = "USD",
        environment: AppStoreEnvironment = .production, unit: TimeInterval = 86_400
    ) {
        let (sinceDay, sinceOnMidnight) = AnalyticsContributions.day(of: since, unit: unit)
        let (untilDay, untilOnMidnight) = AnalyticsContributions.day(of: until, unit: unit)
        guard sinceDay < untilDay, sinceOnMidnight, untilOnMidnight else { return nil }
        let s = AnalyticsContributions.unit(ofDay: sinceDay)
        let u = AnalyticsContributions.unit(ofDay: untilDay)
        self.init(
            since: since, until: until, catalogue: catalogue, reportingCurrency: reportingCurrency,
            environment: environment, s: s, u: u, unit: unit, offUnit: nil)
    }

    /// Any window with `since` before `until`, on the day summaries: read for `(s, u)`, the day holding
    /// `since` and the first midnight at or after `until` (`OffUnitWindow`). Nil when `since` is not before
    /// `until`.
    public init?(
        window since: Date, until: Date, catalogue: ProductCatalogue = .init(), reportingCurrency: String = "USD",
        environment: AppStoreEnvironment = .production
    ) {
        guard let window = OffUnitWindow(since: since, until: until) else { return nil }
        self.init(window, catalogue: catalogue, reportingCurrency: reportingCurrency, environment: environment)
    }

    /// The window `window` describes, its summaries read for the days it chooses (`readS`, `readU`).
    public init(
        _ window: OffUnitWindow, catalogue: ProductCatalogue = .init(), reportingCurrency: String = "USD",
        environment: AppStoreEnvironment = .production
    ) {
        self.init(
            since: window.since, until: window.until, catalogue: catalogue, reportingCurrency: reportingCurrency,
            environment: environment, s: window.s, u: window.u, unit: OffUnitWindow.unit,
            offUnit: window.isAligned ? nil : window)
    }

    private init(
        since: Date, until: Date, catalogue: ProductCatalogue, reportingCurrency: String,
        environment: AppStoreEnvironment, s: Int, u: Int, unit: TimeInterval, offUnit: OffUnitWindow?
    ) {
        self.since = since
        self.until = until
        self.catalogue = catalogue
        self.reportingCurrency = reportingCurrency
        self.environment = environment
        self.s = s
        self.u = u
        self.unit = unit
        self.offUnit = offUnit
        reads = Reads(s: s, u: u, cohortsFrom: Self.cohortUnits(until: until, unit: unit).first ?? Int.min)
    }

    /// What one subscription's rows add to the summary's answer for the days read to make it this window's:
    /// its rows on the window's axis less its rows on the unit axis (those moved by
    /// `OffUnitWindow.relabeled` when a side is read from its other midnight). Empty for an aligned window
    /// and for a subscription with nothing dated in the part-days. The timeline is worked out once, and only
    /// the rows some read of this window selects (`Reads`) are kept: the others would never be read.
    public func correction(of ledger: SubscriptionLedger) -> [ContributionKey: Int] {
        var rows: [ContributionKey: Int] = [:]
        addCorrection(of: ledger, to: &rows)
        return rows
    }

    /// Adds `correction(of: ledger)` to `rows`.
    func addCorrection(of ledger: SubscriptionLedger, to rows: inout [ContributionKey: Int]) {
        guard let builder = correctionBuilder(of: ledger) else { return }
        // The two axes' rows met in this subscription's own small table, where nearly all of them cancelled;
        // only what is left reaches `rows` (a table of many keys, whose every lookup missed the cache).
        for (key, count) in builder.rows { AnalyticsSummary.add(count, to: key, in: &rows) }
    }

    /// How many row keys working out `correction(of: ledger)` builds: its work.
    func keysBuilt(correcting ledger: SubscriptionLedger) -> Int {
        correctionBuilder(of: ledger)?.keysBuilt ?? 0
    }

    /// The builder holding `correction(of: ledger)`; nil when there is none.
    private func correctionBuilder(of ledger: SubscriptionLedger) -> Builder? {
        guard let offUnit else { return nil }
        let dates = ledger.dates
        guard offUnit.needsCorrection(dates: dates), let read = LedgerRead(ledger) else { return nil }
        let days = AnalyticsContributions(unit: unit)
        var builder: Builder
        if offUnit.keepsUnits(dates: dates) {
            // The same rows on both axes: one set, each added and taken out where `relabeled` moves it.
            builder = Builder(
                keys: read.keys, reads: reads, mirror: offUnit,
                monthlyCohorts: offUnit.movesMonthlyCohorts(dates: dates))
        } else {
            // The day axis's rows taken out, the window's put in; the rows alike on both are worked out
            // once (`Builder.sameOnBothAxes`).
            builder = Builder(
                keys: read.keys, sign: -1, reads: reads, relabel: offUnit,
                monthlyCohorts: offUnit.changesMonthlyCohorts(dates: dates), pair: (offUnit, true))
        }
        days.add(read, to: &builder)
        if builder.mirror == nil {
            builder.sign = 1
            builder.relabel = nil
            builder.pair = (offUnit, false)
            AnalyticsContributions(window: offUnit).add(read, to: &builder)
        }
        return builder
    }

    /// The rows a store read for the days `sinceUnit`, `untilUnit` (or every row) where this window's
    /// reads select them as those days' reads would (`OffUnitWindow.relabeled`); the same rows when the
    /// window is read for its own days `(s, u)`.
    public func relabeled(_ summary: AnalyticsSummary) -> AnalyticsSummary {
        guard let offUnit, offUnit.sinceAfter || offUnit.untilBefore else { return summary }
        var moved = AnalyticsSummary()
        moved.add(Dictionary(summary.counts.map { (offUnit.relabeled($0.key), $0.value) }, uniquingKeysWith: +))
        return moved
    }

    /// Which shapes the reads of this window select (`figures`, `movement`, `cohortFigures` and the
    /// stores' reads for them): events in `[s, u)`, steps up to `u`, the window's corners
    /// (`x ≤ s < y ≤ u`) and the cohort rows of the months `cohortUnits` names (`y ≤ x ≤ u`).
    struct Reads {
        let s: Int
        let u: Int
        let cohortsFrom: Int

        func selects(_ shape: ContributionShape) -> Bool {
            switch shape {
            case .event(let day): s <= day && day < u
            case .step(let day): day <= u
            case .corner(let x, let y): (x <= s && s < y && y <= u) || (y <= x && x <= u && y >= cohortsFrom)
            }
        }
    }

    /// The unit of the last midnight at or before `until`: retention observes a period by it
    /// (`CohortRetention.observedBy`).
    var retentionUnit: Int {
        AnalyticsContributions(unit: unit).index(of: DailyAnalytics.dayStart(of: until))
    }

    /// Where a selected row's count goes: to the window (events, corners), or to the standing at a bound.
    enum Role: Hashable {
        case window
        case atSince
        case atUntil
    }

    /// Which rows the window selects: each key without its shape, the role it plays, and the summed count.
    /// A database does this part with one `GROUP BY` over the rows the shapes select.
    func selected(_ summary: AnalyticsSummary, bundleID: String?) -> [SelectedKey: Int] {
        var selected: [SelectedKey: Int] = [:]
        func add(_ key: ContributionKey, _ role: Role, _ count: Int) {
            var bare = key
            bare.shape = .event(0)
            selected[SelectedKey(role: role, key: bare), default: 0] += count
        }
        for (key, count) in summary.counts where key.environment == environment {
            if let bundleID, key.bundleID != bundleID { continue }
            switch key.shape {
            case .event(let index):
                if s <= index, index < u { add(key, .window, count) }
            case .step(let index):
                if index <= s { add(key, .atSince, count) }
                if index <= u { add(key, .atUntil, count) }
            case .corner(let sinceBound, let untilBound):
                // Rectangles end in s before they begin in u: corners at or before s cancel.
                if sinceBound <= s, s < untilBound, untilBound <= u { add(key, .window, count) }
            }
        }
        return selected.filter { $0.value != 0 }
    }

    struct SelectedKey: Hashable {
        var role: Role
        var key: ContributionKey
    }

    /// The window's figures over `summary` (one app's rows when `bundleID` is given).
    public func figures(of summary: AnalyticsSummary, bundleID: String? = nil)
        -> (total: AnalyticsFigures, byProduct: [String: AnalyticsFigures])
    {
        var byProduct: [String: AnalyticsFigures] = [:]
        for (selected, count) in selected(summary, bundleID: bundleID) {
            let product = selected.key.productID ?? "unknown"
            var figures = byProduct[product] ?? AnalyticsFigures()
            // A product is listed when something counted under it, as in the recomputation.
            if apply(selected.key, selected.role, count, to: &figures) { byProduct[product] = figures }
        }
        var total = AnalyticsFigures()
        for figures in byProduct.values { total.add(figures) }
        return (total, byProduct)
    }

    /// Adds a selected row's count to its figure; false when it counts for nothing (a refund without a
    /// price, a trial at `since`).
    func apply(_ key: ContributionKey, _ role: Role, _ count: Int, to figures: inout AnalyticsFigures)
        -> Bool
    {
        let times = Decimal(count)
        switch (key.figure, role) {
        case (.revenue, _):
            if let price = price(of: key) {
                figures.revenue.add(price, times: key.factor * times)
            } else {
                figures.unpricedTransactions += count
            }
        case (.refund, _):
            guard let price = price(of: key) else { return false }
            figures.refunds.add(price, times: key.factor * times)
        case (.newTrial, _): figures.newTrials += count
        case (.newSubscription, _): figures.newSubscriptions += count
        case (.trialConversion, _): figures.trialConversions += count
        case (.paid, .atSince): figures.activeAtSince += count
        case (.paid, _):
            figures.activeSubscriptions += count
            if let price = price(of: key), let period = period(of: key) {
                figures.mrr.add(
                    Money(currency: price.currency, amount: period.perMonth(price.amount * key.factor)), times: times)
            } else {
                figures.unpricedTransactions += count
            }
        case (.trial, .atUntil): figures.activeTrials += count
        case (.trial, _): return false
        case (.churned, _): figures.churned += count
        case (.reactivation, _): figures.reactivations += count
        case (.trialConverted, _): figures.newTrialsConverted += count
        case (.trialInTrial, _): figures.newTrialsInTrial += count
        // The movement has its own answer (SummaryQuery+Movement.swift).
        case (.mrrMovement, _), (.mrrChange, _): return false
        // The monthly figures and ARPU's paying subscriptions have theirs (SummaryQuery+Cohorts.swift).
        case (.refundPurchase, _), (.refundRefunded, _), (.refundSeats, _), (.trialCohortStarted, _),
            (.trialCohortConverted, _), (.trialCohortInTrial, _), (.ltvCustomer, _), (.ltvRevenue, _), (.retention, _),
            (.payingInWindow, _):
            return false
        }
        return true
    }

    /// The price `ProductCatalogue.price(of:preferring:)` gives a paid transaction of the row's product,
    /// price and currency.
    private func price(of key: ContributionKey) -> Money? {
        price(productID: key.productID, key.price)
    }

    func price(productID: String?, _ source: PriceSource?) -> Money? {
        let transaction = LedgerTransaction(
            transactionID: "", originalTransactionID: "", productID: productID, purchasedAt: nil, expiresAt: nil,
            priceMilliunits: source?.milliunits, currency: source?.currency, origin: .statusAnswer)
        return catalogue.price(of: transaction, preferring: reportingCurrency)
    }

    /// The catalogue's period for the product, else the one inferred from the transaction's dates.
    private func period(of key: ContributionKey) -> BillingPeriod? {
        period(productID: key.productID, inferred: key.period)
    }

    func period(productID: String?, inferred: BillingPeriod?) -> BillingPeriod? {
        productID.flatMap { catalogue.products[$0]?.period } ?? inferred
    }
}
