import Foundation
import RenewalCore

extension AnalyticsReport {
    /// MRR movement between two moments, rounded to cents so that the five buckets add up to `net`, and
    /// `net` to `mrr_until − mrr_since` of the same rounded figures (see `Movement.init`).
    public struct Movement: Encodable, Sendable, Hashable {
        public var new: Decimal = 0
        public var expansion: Decimal = 0
        public var contraction: Decimal = 0
        public var churned: Decimal = 0
        public var reactivation: Decimal = 0
        public var net: Decimal = 0
        public var mrrSince: Decimal = 0
        public var mrrUntil: Decimal = 0

        enum CodingKeys: String, CodingKey {
            case new, expansion, contraction, churned, reactivation, net
            case mrrSince = "mrr_since", mrrUntil = "mrr_until"
        }

        /// From exact amounts of one currency (or converted): each end rounded to cents, `net` their
        /// difference, and each bucket rounded to cents then corrected by a cent at a time, largest
        /// rounding remainder first, until the buckets add up to `net` (never flipping a bucket's sign).
        init(exact buckets: [MRRMovement.Bucket: Decimal], start: Decimal, end: Decimal) {
            mrrSince = ExchangeRates.cents(start)
            mrrUntil = ExchangeRates.cents(end)
            net = mrrUntil - mrrSince
            var rounded = buckets.mapValues(ExchangeRates.cents)
            var gap = net - rounded.values.reduce(0, +)
            let cent = Decimal(string: "0.01") ?? 0
            while gap != 0 {
                let step = gap > 0 ? cent : -cent
                let order = MRRMovement.Bucket.allCases.filter { (buckets[$0] ?? 0) != 0 }.sorted { a, b in
                    let remainderA = (buckets[a] ?? 0) - (rounded[a] ?? 0)
                    let remainderB = (buckets[b] ?? 0) - (rounded[b] ?? 0)
                    return step > 0 ? remainderA > remainderB : remainderA < remainderB
                }
                let keepsSign = order.first { bucket in
                    let after = (rounded[bucket] ?? 0) + step
                    return after == 0 || (after > 0) == ((buckets[bucket] ?? 0) > 0)
                }
                guard let bucket = keepsSign ?? order.first else { break }
                rounded[bucket, default: 0] += step
                gap -= step
            }
            new = rounded[.new] ?? 0
            expansion = rounded[.expansion] ?? 0
            contraction = rounded[.contraction] ?? 0
            churned = rounded[.churned] ?? 0
            reactivation = rounded[.reactivation] ?? 0
        }

        init() {}

        /// The movement in the reporting currency (currencies with a rate, converted exactly before
        /// rounding), and in each currency apart, in its own units.
        static func of(_ movement: MRRMovement, rates: ExchangeRates) -> (
            converted: Movement, byCurrency: [String: Movement]
        ) {
            var currencies = Set(movement.atStart.byCurrency.keys).union(movement.atEnd.byCurrency.keys)
            for bucket in MRRMovement.Bucket.allCases { currencies.formUnion(movement[bucket].byCurrency.keys) }
            var byCurrency: [String: Movement] = [:]
            for currency in currencies {
                byCurrency[currency] = Movement(
                    exact: Dictionary(
                        uniqueKeysWithValues: MRRMovement.Bucket.allCases.map {
                            ($0, movement[$0].byCurrency[currency] ?? 0)
                        }),
                    start: movement.atStart.byCurrency[currency] ?? 0, end: movement.atEnd.byCurrency[currency] ?? 0)
            }
            let converted = Movement(
                exact: Dictionary(
                    uniqueKeysWithValues: MRRMovement.Bucket.allCases.map { ($0, exact(movement[$0], rates).value) }),
                start: exact(movement.atStart, rates).value, end: exact(movement.atEnd, rates).value)
            return (converted, byCurrency)
        }
    }

    /// `mrr_movement`: the window's movement in the reporting currency and in every currency apart.
    public struct MovementWindow: Encodable, Sendable {
        public var movement: Movement
        public var byCurrency: [String: Movement]

        enum CodingKeys: String, CodingKey { case byCurrency = "by_currency" }

        public func encode(to encoder: any Encoder) throws {
            try movement.encode(to: encoder)
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(byCurrency, forKey: .byCurrency)
        }
    }

    /// One day of `mrr_movement_daily`: the reporting currency, and currencies without a rate apart.
    public struct MovementDay: Encodable, Sendable {
        public var day: String
        public var movement: Movement
        public var unconverted: [String: Movement]

        enum CodingKeys: String, CodingKey { case day, unconverted }

        public func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(day, forKey: .day)
            try movement.encode(to: encoder)
            if !unconverted.isEmpty { try container.encode(unconverted, forKey: .unconverted) }
        }
    }

    /// Average revenue per paying subscription, two ways (docs/analytics.md).
    public struct ARPU: Encodable, Sendable, Hashable {
        /// MRR at `until` ÷ `subscriptions`; nil without any.
        public var mrrPerSubscription: Decimal?
        /// Paid, entitled and priced at `until`, in a currency with a rate.
        public var subscriptions: Int
        /// Revenue of the window ÷ `payingSubscriptions`; nil without any.
        public var revenuePerPayingSubscription: Decimal?
        /// With a priced paid purchase in the window, in a currency with a rate.
        public var payingSubscriptions: Int

        enum CodingKeys: String, CodingKey {
            case mrrPerSubscription = "mrr_per_subscription", subscriptions
            case revenuePerPayingSubscription = "revenue_per_paying_subscription"
            case payingSubscriptions = "paying_subscriptions"
        }

        public func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(mrrPerSubscription, forKey: .mrrPerSubscription)
            try container.encode(subscriptions, forKey: .subscriptions)
            try container.encode(revenuePerPayingSubscription, forKey: .revenuePerPayingSubscription)
            try container.encode(payingSubscriptions, forKey: .payingSubscriptions)
        }
    }

    /// An amount in the reporting currency: the currencies with a rate converted, not rounded, and
    /// whether any currency was left out for want of a rate.
    static func exact(_ amounts: Amounts, _ rates: ExchangeRates) -> (value: Decimal, leftOut: Bool) {
        var total: Decimal = 0
        var leftOut = false
        for (currency, amount) in amounts.byCurrency {
            if currency == rates.reportingCurrency {
                total += amount
            } else if let rate = rates.rates[currency] {
                total += amount * rate
            } else {
                leftOut = true
            }
        }
        return (total, leftOut)
    }

    /// Counts per currency, those in currencies with a rate.
    static func convertedCount(_ counts: [String: Int], _ rates: ExchangeRates) -> Int {
        counts.filter { $0.key == rates.reportingCurrency || rates.rates[$0.key] != nil }.values.reduce(0, +)
    }

    /// `amount ÷ count` rounded to cents; nil for no count.
    static func perUnit(_ amount: Decimal, _ count: Int) -> Decimal? {
        count == 0 ? nil : ExchangeRates.cents(amount / Decimal(count))
    }

    /// A fraction rounded to four decimals, as `churn_rate`.
    static func fraction(_ part: Decimal, _ whole: Decimal) -> Double? {
        whole == 0 ? nil : ((NSDecimalNumber(decimal: part / whole).doubleValue * 10_000).rounded()) / 10_000
    }

    /// The movement figures of `analytics`: the window, each day, and ARPU.
    mutating func addMovement(_ analytics: SubscriptionAnalytics, rates: ExchangeRates) {
        let movement = analytics.movement
        addMovement(
            window: movement.window, days: zip(movement.dayNames, movement.days).map { ($0, $1) },
            payingAtUntil: movement.payingAtUntil, total: analytics.total, cohortFigures: analytics.cohortFigures,
            rates: rates)
    }

    /// The movement figures from their parts, however computed (the ledger or the summaries): the window,
    /// each day (named), ARPU from `total` and the paying counts, and the cohort tables.
    mutating func addMovement(
        window movement: MRRMovement, days: [(String, MRRMovement)], payingAtUntil: [String: Int],
        total: AnalyticsFigures, cohortFigures: some CohortFigureValues, rates: ExchangeRates
    ) {
        let window = Movement.of(movement, rates: rates)
        mrrMovement = MovementWindow(movement: window.converted, byCurrency: window.byCurrency)
        mrrMovementDaily = days.map { name, day in
            let movement = Movement.of(day, rates: rates)
            let unconverted = movement.byCurrency.filter {
                $0.key != rates.reportingCurrency && rates.rates[$0.key] == nil
            }
            return MovementDay(day: name, movement: movement.converted, unconverted: unconverted)
        }
        let subscriptions = Self.convertedCount(payingAtUntil, rates)
        let paying = Self.convertedCount(cohortFigures.payingInWindow, rates)
        arpu = ARPU(
            mrrPerSubscription: Self.perUnit(Self.exact(total.mrr, rates).value, subscriptions),
            subscriptions: subscriptions,
            revenuePerPayingSubscription: Self.perUnit(Self.exact(total.revenue, rates).value, paying),
            payingSubscriptions: paying)
        addCohortFigures(cohortFigures, rates: rates)
    }
}
