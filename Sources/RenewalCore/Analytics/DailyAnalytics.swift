import Foundation

/// The daily series the dashboards read (`analytics_daily`): for each UTC day, app, product and
/// environment, the figures of that day's window `[day, next day)`, so active subscriptions, trials and
/// MRR are those at the end of the day. Each day is computed by `SubscriptionAnalytics`, the one
/// definition of every figure; a subscription is only looked at for the days it could count in. Each
/// day's MRR movement is `MRRMovement`'s over `[day, next day)`, the same as `mrr_movement_daily`.
public struct DailyAnalytics: Sendable {
    public struct Key: Sendable, Hashable, Comparable {
        /// `YYYY-MM-DD`, UTC.
        public var day: String
        /// Empty when the ledger does not know the app.
        public var bundleID: String
        public var productID: String
        public var environment: String

        public init(day: String, bundleID: String, productID: String, environment: String) {
            self.day = day
            self.bundleID = bundleID
            self.productID = productID
            self.environment = environment
        }

        public static func < (lhs: Key, rhs: Key) -> Bool {
            (lhs.day, lhs.bundleID, lhs.productID, lhs.environment)
                < (rhs.day, rhs.bundleID, rhs.productID, rhs.environment)
        }
    }

    struct Day: Sendable {
        var name: String
        var start: Date
        var production: SubscriptionAnalytics
        var sandbox: SubscriptionAnalytics
    }

    private(set) var days: [Day]
    public internal(set) var figures: [Key: AnalyticsFigures] = [:]
    /// Each day's MRR movement (the buckets; not MRR at the day's ends, which `figures` hold), under the
    /// product paid at the day's end, or at its start when the subscription churned that day.
    public internal(set) var movements: [Key: MRRMovement] = [:]

    /// The days from `first`'s to `last`'s, both included.
    public init(from first: Date, through last: Date, catalogue: ProductCatalogue, reportingCurrency: String) {
        var days: [Day] = []
        var start = Self.dayStart(of: first)
        let end = Self.dayStart(of: last)
        while start <= end {
            let next = start.addingTimeInterval(86_400)
            days.append(
                Day(
                    name: Self.name(of: start), start: start,
                    production: SubscriptionAnalytics(
                        since: start, until: next, catalogue: catalogue, reportingCurrency: reportingCurrency),
                    sandbox: SubscriptionAnalytics(
                        since: start, until: next, catalogue: catalogue, reportingCurrency: reportingCurrency,
                        environment: .sandbox)))
            start = next
        }
        self.days = days
    }

    /// The names of the first and last day, if any.
    public var range: (first: String, last: String)? {
        guard let first = days.first, let last = days.last else { return nil }
        return (first.name, last.name)
    }

    public mutating func add(_ ledger: SubscriptionLedger) {
        guard let environment = ledger.environment, environment == .production || environment == .sandbox,
            let span = Self.span(of: ledger.transactions, facts: ledger.facts)
        else { return }
        for day in days where day.start.addingTimeInterval(86_400) >= span.lowerBound && day.start <= span.upperBound {
            let analytics = environment == .production ? day.production : day.sandbox
            for (product, productFigures) in analytics.figures(of: ledger) {
                let key = Key(
                    day: day.name, bundleID: ledger.bundleID ?? "", productID: product,
                    environment: environment.rawValue)
                figures[key, default: AnalyticsFigures()].add(productFigures)
            }
        }
        addMovement(of: ledger, in: environment)
    }

    /// From the first purchase to the last moment anything can happen to the subscription (an expiry, a
    /// revocation, the end of a recorded fact such as a grace period): outside it, a day has nothing of it.
    static func span(of transactions: [LedgerTransaction], facts: [SubscriptionFact]) -> ClosedRange<Date>? {
        let purchases = transactions.compactMap(\.purchasedAt)
        guard let first = purchases.min() else { return nil }
        let last =
            (purchases + transactions.compactMap(\.expiresAt) + transactions.compactMap(\.revokedAt)
            + facts.compactMap(\.endsAt) + facts.map(\.startsAt)).max() ?? first
        return first...max(first, last)
    }

    /// The names of the UTC days from `since`'s through the last one that starts before `until`.
    public static func dayNames(from since: Date, until: Date) -> [String] {
        var names: [String] = []
        var start = dayStart(of: since)
        while start < until {
            names.append(name(of: start))
            start = start.addingTimeInterval(86_400)
        }
        return names
    }

    /// The start of the day named `YYYY-MM-DD`; nil for another text.
    public static func dayStart(named name: String) -> Date? {
        Timestamp.date(name + "T00:00:00Z")
    }

    static func dayStart(of date: Date) -> Date {
        Date(timeIntervalSince1970: (date.timeIntervalSince1970 / 86_400).rounded(.down) * 86_400)
    }

    public static func name(of dayStart: Date) -> String {
        String(Timestamp.string(dayStart).prefix(10))
    }
}

/// One row of `analytics_daily`: a day's figures for one app, product and environment, in one currency.
/// The row in the reporting currency (`converted`) holds the counts and the converted amounts; an amount
/// in a currency without a rate gets a row of its own, in that currency, with no counts.
public struct AnalyticsDayRow: Sendable, Hashable {
    public var key: DailyAnalytics.Key
    public var currency: String
    public var converted: Bool
    public var activeSubscriptions = 0
    public var activeTrials = 0
    public var newSubscriptions = 0
    public var newTrials = 0
    public var trialConversions = 0
    public var churned = 0
    public var reactivations = 0
    public var mrrCents: Int64 = 0
    public var revenueCents: Int64 = 0
    public var refundsCents: Int64 = 0
    /// The day's MRR movement in cents, per bucket (contraction and churned negative); a bucket without
    /// movement is absent.
    public var movementCents: [MRRMovement.Bucket: Int64] = [:]

    /// The sum of the buckets: the day's net new MRR.
    public var netNewMRRCents: Int64 { movementCents.values.reduce(0, +) }

    public init(key: DailyAnalytics.Key, currency: String, converted: Bool) {
        self.key = key
        self.currency = currency
        self.converted = converted
    }

    /// Adds `other`'s counts and amounts (of the same currency) to this row's.
    public mutating func add(_ other: AnalyticsDayRow) {
        activeSubscriptions += other.activeSubscriptions
        activeTrials += other.activeTrials
        newSubscriptions += other.newSubscriptions
        newTrials += other.newTrials
        trialConversions += other.trialConversions
        churned += other.churned
        reactivations += other.reactivations
        mrrCents += other.mrrCents
        revenueCents += other.revenueCents
        refundsCents += other.refundsCents
        for (bucket, cents) in other.movementCents { movementCents[bucket, default: 0] += cents }
    }
}

extension DailyAnalytics {
    /// The rows to store, in key order.
    public func rows(rates: ExchangeRates) -> [AnalyticsDayRow] {
        var rows: [AnalyticsDayRow] = []
        for key in Set(figures.keys).union(movements.keys).sorted() {
            let figures = figures[key] ?? AnalyticsFigures()
            var row = AnalyticsDayRow(key: key, currency: rates.reportingCurrency, converted: true)
            row.activeSubscriptions = figures.activeSubscriptions
            row.activeTrials = figures.activeTrials
            row.newSubscriptions = figures.newSubscriptions
            row.newTrials = figures.newTrials
            row.trialConversions = figures.trialConversions
            row.churned = figures.churned
            row.reactivations = figures.reactivations
            let mrr = rates.convert(figures.mrr)
            let revenue = rates.convert(figures.revenue)
            let refunds = rates.convert(figures.refunds)
            row.mrrCents = Self.cents(mrr.converted)
            row.revenueCents = Self.cents(revenue.converted)
            row.refundsCents = Self.cents(refunds.converted)
            let movement = (movements[key] ?? MRRMovement()).buckets.mapValues(rates.convert)
            for (bucket, amounts) in movement where amounts.converted != 0 {
                row.movementCents[bucket] = Self.cents(amounts.converted)
            }
            rows.append(row)
            var apart = Set(mrr.unconverted.keys).union(revenue.unconverted.keys).union(refunds.unconverted.keys)
            for amounts in movement.values { apart.formUnion(amounts.unconverted.keys) }
            for currency in apart.sorted() {
                var other = AnalyticsDayRow(key: key, currency: currency, converted: false)
                other.mrrCents = Self.cents(mrr.unconverted[currency] ?? 0)
                other.revenueCents = Self.cents(revenue.unconverted[currency] ?? 0)
                other.refundsCents = Self.cents(refunds.unconverted[currency] ?? 0)
                for (bucket, amounts) in movement {
                    if let amount = amounts.unconverted[currency], amount != 0 {
                        other.movementCents[bucket] = Self.cents(amount)
                    }
                }
                rows.append(other)
            }
        }
        return rows
    }

    static func cents(_ amount: Decimal) -> Int64 {
        (ExchangeRates.cents(amount) * 100 as NSDecimalNumber).int64Value
    }
}
