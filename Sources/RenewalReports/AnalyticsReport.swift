import Foundation
import RenewalCore

/// What `renewal analytics` prints: the figures of a window in the reporting currency, for all products
/// and for each. `--json` encodes it (the stable contract); without it, `table` is for a person.
public struct AnalyticsReport: Encodable, Sendable {
    public struct Figures: Encodable, Sendable {
        public var productID: String?
        public var activeSubscriptions: Int
        public var activeTrials: Int
        public var mrr: Decimal
        public var newSubscriptions: Int
        public var newTrials: Int
        public var trialConversions: Int
        public var trialFunnel: TrialFunnel
        public var churned: Int
        public var churnRate: Double?
        public var reactivations: Int
        public var revenue: Decimal
        public var refunds: Decimal
        public var netRevenue: Decimal
        public var unconverted: [String: Unconverted]
        public var unpricedTransactions: Int

        enum CodingKeys: String, CodingKey {
            case productID = "product_id", activeSubscriptions = "active_subscriptions"
            case activeTrials = "active_trials", mrr, newSubscriptions = "new_subscriptions"
            case newTrials = "new_trials", trialConversions = "trial_conversions", trialFunnel = "trial_funnel"
            case churned
            case churnRate = "churn_rate", reactivations, revenue, refunds, netRevenue = "net_revenue", unconverted
            case unpricedTransactions = "unpriced_transactions"
        }

        public func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            if let productID { try container.encode(productID, forKey: .productID) }
            try container.encode(activeSubscriptions, forKey: .activeSubscriptions)
            try container.encode(activeTrials, forKey: .activeTrials)
            try container.encode(mrr, forKey: .mrr)
            try container.encode(newSubscriptions, forKey: .newSubscriptions)
            try container.encode(newTrials, forKey: .newTrials)
            try container.encode(trialConversions, forKey: .trialConversions)
            try container.encode(trialFunnel, forKey: .trialFunnel)
            try container.encode(churned, forKey: .churned)
            try container.encode(churnRate.map { (($0 * 10_000).rounded()) / 10_000 }, forKey: .churnRate)
            try container.encode(reactivations, forKey: .reactivations)
            try container.encode(revenue, forKey: .revenue)
            try container.encode(refunds, forKey: .refunds)
            try container.encode(netRevenue, forKey: .netRevenue)
            try container.encode(unconverted, forKey: .unconverted)
            try container.encode(unpricedTransactions, forKey: .unpricedTransactions)
        }

        init(_ figures: AnalyticsFigures, productID: String?, rates: ExchangeRates) {
            let mrr = rates.convert(figures.mrr)
            let revenue = rates.convert(figures.revenue)
            let refunds = rates.convert(figures.refunds)
            let net = rates.convert(figures.netRevenue)
            var unconverted: [String: Unconverted] = [:]
            for currency in Set(mrr.unconverted.keys).union(revenue.unconverted.keys).union(refunds.unconverted.keys) {
                unconverted[currency] = Unconverted(
                    mrr: mrr.unconverted[currency] ?? 0, revenue: revenue.unconverted[currency] ?? 0,
                    refunds: refunds.unconverted[currency] ?? 0, netRevenue: net.unconverted[currency] ?? 0)
            }
            self.productID = productID
            activeSubscriptions = figures.activeSubscriptions
            activeTrials = figures.activeTrials
            self.mrr = mrr.converted
            newSubscriptions = figures.newSubscriptions
            newTrials = figures.newTrials
            trialConversions = figures.trialConversions
            trialFunnel = TrialFunnel(
                started: figures.newTrials, converted: figures.newTrialsConverted, inTrial: figures.newTrialsInTrial,
                lapsed: figures.newTrials - figures.newTrialsConverted - figures.newTrialsInTrial)
            churned = figures.churned
            churnRate = figures.churnRate
            reactivations = figures.reactivations
            self.revenue = revenue.converted
            self.refunds = refunds.converted
            netRevenue = net.converted
            self.unconverted = unconverted
            unpricedTransactions = figures.unpricedTransactions
        }
    }

    /// The free trials begun in the window, followed to `until`: paid by then, still in the trial, or lapsed.
    public struct TrialFunnel: Encodable, Sendable, Hashable {
        public var started: Int
        public var converted: Int
        public var inTrial: Int
        public var lapsed: Int

        enum CodingKeys: String, CodingKey {
            case started, converted, inTrial = "in_trial", lapsed
        }
    }

    /// Amounts in a currency the rates do not cover, in that currency.
    public struct Unconverted: Encodable, Sendable, Hashable {
        public var mrr: Decimal
        public var revenue: Decimal
        public var refunds: Decimal
        public var netRevenue: Decimal

        enum CodingKeys: String, CodingKey {
            case mrr, revenue, refunds, netRevenue = "net_revenue"
        }
    }

    /// One cohort of `cohorts`: retention after each of 12 periods, null where not observed yet.
    public struct Cohort: Encodable, Sendable {
        public var month: String
        public var subscriptions: Int
        public var observed: [Int]
        public var retained: [Int]
        public var retention: [Double?]

        init(_ cohort: CohortRetention.Cohort) {
            month = cohort.month
            subscriptions = cohort.subscriptions
            observed = cohort.observed
            retained = cohort.retained
            retention = cohort.shares.map { $0.map { ($0 * 10_000).rounded() / 10_000 } }
        }
    }

    public var since: Date
    public var until: Date
    public var currency: String
    public var bundleID: String?
    public var total: Figures
    public var byProduct: [Figures]
    public var cohorts: [Cohort]
    /// The window's figures of the adopted purchases no user has claimed yet, already counted in `total`;
    /// nil when not asked for (a store without adoption).
    public var unclaimed: Unclaimed?
    /// How MRR moved from `since` to `until`, and each day (AnalyticsReport+Movement.swift).
    public var mrrMovement: MovementWindow?
    public var mrrMovementDaily: [MovementDay] = []
    public var arpu: ARPU?
    /// By month, as of `until` (AnalyticsReport+Cohorts.swift).
    public var refundRateByPeriod: [RefundRateMonth] = []
    public var trialConversionByCohort: [TrialConversionCohort] = []
    public var ltvByCohort: [LTVCohort] = []

    public init(
        _ analytics: SubscriptionAnalytics, cohorts: CohortRetention? = nil, rates: ExchangeRates, bundleID: String?
    ) {
        since = analytics.since
        until = analytics.until
        currency = rates.reportingCurrency
        self.bundleID = bundleID
        total = Figures(analytics.total, productID: nil, rates: rates)
        byProduct = analytics.byProduct.keys.sorted().compactMap { product in
            analytics.byProduct[product].map { Figures($0, productID: product, rates: rates) }
        }
        self.cohorts = (cohorts?.table ?? []).map(Cohort.init)
        addMovement(analytics, rates: rates)
    }

    enum CodingKeys: String, CodingKey {
        case since, until, currency, bundleID = "bundle_id", byProduct = "by_product", cohorts, unclaimed
        case mrrMovement = "mrr_movement", mrrMovementDaily = "mrr_movement_daily", arpu
        case refundRateByPeriod = "refund_rate_by_period", trialConversionByCohort = "trial_conversion_by_cohort"
        case ltvByCohort = "ltv_by_cohort"
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(Timestamp.string(since), forKey: .since)
        try container.encode(Timestamp.string(until), forKey: .until)
        try container.encode(currency, forKey: .currency)
        try container.encode(bundleID, forKey: .bundleID)
        try total.encode(to: encoder)
        try container.encode(byProduct, forKey: .byProduct)
        try container.encode(cohorts, forKey: .cohorts)
        try container.encodeIfPresent(unclaimed, forKey: .unclaimed)
        try container.encodeIfPresent(mrrMovement, forKey: .mrrMovement)
        try container.encode(mrrMovementDaily, forKey: .mrrMovementDaily)
        try container.encodeIfPresent(arpu, forKey: .arpu)
        try container.encode(refundRateByPeriod, forKey: .refundRateByPeriod)
        try container.encode(trialConversionByCohort, forKey: .trialConversionByCohort)
        try container.encode(ltvByCohort, forKey: .ltvByCohort)
    }

    /// The one JSON object of `--json`, keys sorted.
    public func json() throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return String(decoding: try encoder.encode(self), as: UTF8.self)
    }

    /// A table a person reads: the totals, then one line per product.
    public func table() -> String {
        var lines = [
            "Subscription analytics \(Timestamp.string(since)) to \(Timestamp.string(until))"
                + (bundleID.map { " for \($0)" } ?? "") + ", amounts in \(currency)",
            "",
        ]
        let header = [
            "PRODUCT", "ACTIVE", "TRIALS", "MRR", "NEW", "NEW_TRIALS", "CONVERTED", "CHURNED", "REVENUE", "REFUNDS",
            "NET",
        ]
        func line(_ name: String, _ figures: Figures) -> String {
            Self.columns([
                name, "\(figures.activeSubscriptions)", "\(figures.activeTrials)", Self.money(figures.mrr),
                "\(figures.newSubscriptions)", "\(figures.newTrials)", "\(figures.trialConversions)",
                "\(figures.churned)", Self.money(figures.revenue), Self.money(figures.refunds),
                Self.money(figures.netRevenue),
            ])
        }
        lines.append(Self.columns(header))
        for product in byProduct { lines.append(line(product.productID ?? "-", product)) }
        lines.append(line("all products", total))
        lines.append("")
        let rate =
            total.churnRate.map { String(format: "%.1f %%", $0 * 100) } ?? "n/a (no paid subscription at the start)"
        lines.append("Churn rate: \(rate); reactivations: \(total.reactivations)")
        let funnel = total.trialFunnel
        lines.append(
            "Trials begun in the window: \(funnel.started); by --until \(funnel.converted) paid, "
                + "\(funnel.inTrial) still in the trial, \(funnel.lapsed) lapsed")
        if !total.unconverted.isEmpty {
            let parts = total.unconverted.keys.sorted().map { currency in
                let amounts = total.unconverted[currency] ?? Unconverted(mrr: 0, revenue: 0, refunds: 0, netRevenue: 0)
                return "\(currency) mrr \(Self.money(amounts.mrr)), revenue \(Self.money(amounts.revenue)), "
                    + "refunds \(Self.money(amounts.refunds))"
            }
            lines.append(
                "Not converted (no rate for the currency; add one to the rates file): " + parts.joined(separator: "; "))
        }
        lines += movementLines()
        if !cohorts.isEmpty {
            lines.append("")
            lines.append("Retention by cohort (month of the first paid period; share still paid after each period):")
            lines.append(
                "COHORT   SUBS   "
                    + (1...CohortRetention.periods).map {
                        String("P\($0)".padding(toLength: 6, withPad: " ", startingAt: 0))
                    }.joined())
            for cohort in cohorts {
                let shares = cohort.retention.map { share in
                    (share.map { String(format: "%.0f%%", $0 * 100) } ?? "-").padding(
                        toLength: 6, withPad: " ", startingAt: 0)
                }
                lines.append(
                    cohort.month.padding(toLength: 9, withPad: " ", startingAt: 0)
                        + "\(cohort.subscriptions)".padding(toLength: 7, withPad: " ", startingAt: 0) + shares.joined())
            }
        }
        if let unclaimed { lines.append(unclaimed.line) }
        if total.unpricedTransactions > 0 {
            lines.append(
                "\(total.unpricedTransactions) paid transactions have no price (verifyReceipt gives none): list the "
                    + "product's price in the catalogue file to count them.")
        }
        return lines.joined(separator: "\n") + "\n"
    }

    private static func columns(_ values: [String]) -> String {
        TextColumns.line(values, widths: [36, 8, 8, 12, 6, 11, 10, 8, 12, 11, 0])
    }

    public static func money(_ amount: Decimal) -> String {
        let text = "\(ExchangeRates.cents(amount))"
        guard let dot = text.firstIndex(of: ".") else { return text + ".00" }
        let decimals = text.distance(from: dot, to: text.endIndex) - 1
        return decimals >= 2 ? text : text + String(repeating: "0", count: 2 - decimals)
    }
}
