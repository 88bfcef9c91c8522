import Foundation
import RenewalCore

extension AnalyticsReport {
    /// The report of `[since, until)` from the analytics summaries' answers (`SummaryQuery`): the same
    /// figures, and so the same JSON and table, as `init(_:cohorts:rates:bundleID:)` over every ledger
    /// (docs/analytics.md, "How a window is answered fast"). `unclaimed` is added by the caller, as there.
    public init(
        since: Date, until: Date, total: AnalyticsFigures, byProduct: [String: AnalyticsFigures],
        movement: SummaryMovement, cohortFigures: CohortSummaryFigures, rates: ExchangeRates, bundleID: String?
    ) {
        self.since = since
        self.until = until
        currency = rates.reportingCurrency
        self.bundleID = bundleID
        self.total = Figures(total, productID: nil, rates: rates)
        self.byProduct = byProduct.keys.sorted().compactMap { product in
            byProduct[product].map { Figures($0, productID: product, rates: rates) }
        }
        cohorts = cohortFigures.retentionTable.map(Cohort.init)
        addMovement(
            window: movement.window, days: Array(zip(movement.dayNames, movement.days ?? [])),
            payingAtUntil: movement.payingAtUntil, total: total, cohortFigures: cohortFigures, rates: rates)
    }
}
