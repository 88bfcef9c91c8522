import Foundation
import RenewalCore

extension AnalyticsReport {
    /// One month of `refund_rate_by_period`: the paid transactions purchased in it and those refunded by
    /// `until`. Amounts in the reporting currency, currencies without a rate left out of them.
    public struct RefundRateMonth: Encodable, Sendable, Hashable {
        public var month: String
        public var transactions: Int
        public var refunded: Int
        /// `refunded ÷ transactions`.
        public var rate: Double?
        public var revenue: Decimal
        public var refunds: Decimal
        /// `refunds ÷ revenue`.
        public var amountRate: Double?

        enum CodingKeys: String, CodingKey {
            case month, transactions, refunded, rate, revenue, refunds, amountRate = "amount_rate"
        }

        public func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(month, forKey: .month)
            try container.encode(transactions, forKey: .transactions)
            try container.encode(refunded, forKey: .refunded)
            try container.encode(rate, forKey: .rate)
            try container.encode(revenue, forKey: .revenue)
            try container.encode(refunds, forKey: .refunds)
            try container.encode(amountRate, forKey: .amountRate)
        }
    }

    /// One month of `trial_conversion_by_cohort`: the free trials begun in it, followed to `until`.
    public struct TrialConversionCohort: Encodable, Sendable, Hashable {
        public var month: String
        public var started: Int
        public var converted: Int
        public var inTrial: Int
        /// `converted ÷ started`.
        public var rate: Double?

        enum CodingKeys: String, CodingKey { case month, started, converted, inTrial = "in_trial", rate }

        public func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(month, forKey: .month)
            try container.encode(started, forKey: .started)
            try container.encode(converted, forKey: .converted)
            try container.encode(inTrial, forKey: .inTrial)
            try container.encode(rate, forKey: .rate)
        }
    }

    /// One month of `ltv_by_cohort`: realized LTV per paying customer (subscription) at each horizon;
    /// null until every customer of the cohort has had that long.
    public struct LTVCohort: Encodable, Sendable, Hashable {
        public var month: String
        public var payingCustomers: Int
        /// Per `CohortFigures.ltvHorizons`, in the reporting currency.
        public var ltv: [Decimal?]

        enum CodingKeys: String, CodingKey {
            case month, payingCustomers = "paying_customers", ltv7 = "ltv_7d", ltv30 = "ltv_30d"
            case ltv90 = "ltv_90d", ltv365 = "ltv_365d"
        }

        public func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(month, forKey: .month)
            try container.encode(payingCustomers, forKey: .payingCustomers)
            let keys: [CodingKeys] = [.ltv7, .ltv30, .ltv90, .ltv365]
            for (key, value) in zip(keys, ltv) { try container.encode(value, forKey: key) }
        }
    }

    mutating func addCohortFigures(_ figures: some CohortFigureValues, rates: ExchangeRates) {
        refundRateByPeriod = figures.refundMonths.values.sorted { $0.month < $1.month }.map { row in
            let revenue = Self.exact(row.purchased, rates).value
            let refunds = Self.exact(row.refunds, rates).value
            return RefundRateMonth(
                month: row.month, transactions: row.transactions, refunded: row.refunded,
                rate: Self.fraction(Decimal(row.refunded), Decimal(row.transactions)),
                revenue: ExchangeRates.cents(revenue), refunds: ExchangeRates.cents(refunds),
                amountRate: Self.fraction(refunds, revenue))
        }
        trialConversionByCohort = figures.trialCohorts.values.sorted { $0.month < $1.month }.map { cohort in
            TrialConversionCohort(
                month: cohort.month, started: cohort.started, converted: cohort.converted, inTrial: cohort.inTrial,
                rate: Self.fraction(Decimal(cohort.converted), Decimal(cohort.started)))
        }
        ltvByCohort = figures.ltvCohorts.values.sorted { $0.month < $1.month }.map { cohort in
            let customers = Self.convertedCount(cohort.customersByCurrency, rates)
            let ltv = zip(CohortFigures.ltvHorizons, cohort.netRevenue).map { days, amounts -> Decimal? in
                cohort.complete(days, asOf: figures.asOf)
                    ? Self.perUnit(Self.exact(amounts, rates).value, customers) : nil
            }
            return LTVCohort(month: cohort.month, payingCustomers: cohort.customers, ltv: ltv)
        }
    }

    /// The table's lines for the movement and the figures that explain it.
    func movementLines() -> [String] {
        var lines: [String] = []
        if let window = mrrMovement?.movement {
            lines.append(
                "MRR movement: new \(Self.money(window.new)), expansion \(Self.money(window.expansion)), "
                    + "contraction \(Self.money(window.contraction)), churned \(Self.money(window.churned)), "
                    + "reactivation \(Self.money(window.reactivation)); net \(Self.money(window.net)) "
                    + "(MRR \(Self.money(window.mrrSince)) at --since, \(Self.money(window.mrrUntil)) at --until)")
        }
        if let arpu {
            lines.append(
                "ARPU: MRR per paid subscription \(arpu.mrrPerSubscription.map(Self.money) ?? "n/a") "
                    + "(\(arpu.subscriptions)); revenue per paying subscription in the window "
                    + "\(arpu.revenuePerPayingSubscription.map(Self.money) ?? "n/a") (\(arpu.payingSubscriptions))")
        }
        func percent(_ rate: Double?) -> String { rate.map { String(format: "%.1f%%", $0 * 100) } ?? "-" }
        if !refundRateByPeriod.isEmpty {
            lines += ["", "Refund rate by month of purchase:", "MONTH    PAID    REFUNDED  RATE    AMOUNT_RATE"]
            for row in refundRateByPeriod {
                lines.append(
                    TextColumns.line(
                        [
                            row.month, "\(row.transactions)", "\(row.refunded)", percent(row.rate),
                            percent(row.amountRate),
                        ],
                        widths: [9, 8, 10, 8, 0]))
            }
        }
        if !trialConversionByCohort.isEmpty {
            lines += ["", "Trial conversion by month the trial began:", "MONTH    STARTED CONVERTED IN_TRIAL RATE"]
            for row in trialConversionByCohort {
                lines.append(
                    TextColumns.line(
                        [row.month, "\(row.started)", "\(row.converted)", "\(row.inTrial)", percent(row.rate)],
                        widths: [9, 8, 10, 9, 0]))
            }
        }
        if !ltvByCohort.isEmpty {
            lines += [
                "", "Realized LTV per paying customer by month of first payment:",
                "MONTH    PAYING  7D        30D       90D       365D",
            ]
            for row in ltvByCohort {
                lines.append(
                    TextColumns.line(
                        [row.month, "\(row.payingCustomers)"] + row.ltv.map { $0.map(Self.money) ?? "-" },
                        widths: [9, 8, 10, 10, 10, 0]))
            }
        }
        return lines
    }
}
