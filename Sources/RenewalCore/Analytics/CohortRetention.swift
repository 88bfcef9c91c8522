import Foundation

/// Retention by cohort: subscriptions grouped by the month (UTC) their first paid period was purchased,
/// and for each of the 12 periods after it, how many were still paid and entitled one day into the next
/// period (a renewal, or grace, holds it; billing retry, expiry and refunds do not). A period that has not
/// ended (plus the day) by `observedBy`, the last midnight at or before `asOf`, is not observed yet, so a
/// young cohort's later columns stay empty instead of reading as churn. Counted like every other figure:
/// Production, bought by the customer.
public struct CohortRetention: Sendable {
    public static let periods = 12

    public struct Cohort: Sendable, Hashable {
        /// `YYYY-MM`.
        public var month: String
        public var subscriptions = 0
        /// For period k (index k − 1): the subscriptions whose k-th period had ended by `asOf`.
        public var observed = [Int](repeating: 0, count: CohortRetention.periods)
        /// Among those, the ones still paid and entitled one day after it ended.
        public var retained = [Int](repeating: 0, count: CohortRetention.periods)

        public init(month: String) {
            self.month = month
        }

        /// `retained ÷ observed` per period; nil where nothing was observed yet.
        public var shares: [Double?] {
            zip(retained, observed).map { retained, observed in
                observed == 0 ? nil : Double(retained) / Double(observed)
            }
        }
    }

    public let asOf: Date
    public let catalogue: ProductCatalogue
    /// The first day of the oldest cohort: the month eleven months before `asOf`'s.
    public let firstMonth: Date
    public private(set) var cohorts: [String: Cohort] = [:]

    /// The last UTC midnight at or before `asOf`: a period is observed once its end plus a day is at or
    /// before it, so the table moves a day at a time, and a window off midnights is answered from the day
    /// summaries (docs/analytics.md).
    public var observedBy: Date { DailyAnalytics.dayStart(of: asOf) }

    public init(asOf: Date, catalogue: ProductCatalogue = .init()) {
        self.asOf = asOf
        self.catalogue = catalogue
        let calendar = BillingPeriod.utc
        let month = calendar.dateInterval(of: .month, for: asOf)?.start ?? asOf
        firstMonth = calendar.date(byAdding: .month, value: -(Self.periods - 1), to: month) ?? month
    }

    /// The cohorts, oldest first.
    public var table: [Cohort] { cohorts.values.sorted { $0.month < $1.month } }

    public mutating func add(_ ledger: SubscriptionLedger) {
        let timeline = ledger.timeline()
        guard let firstPaid = timeline.transactions.first(where: { !$0.isTrial }), let start = firstPaid.purchasedAt,
            start >= firstMonth, start < asOf, let period = catalogue.period(of: firstPaid)
        else { return }
        let month = String(Timestamp.string(start).prefix(7))
        var cohort = cohorts[month] ?? Cohort(month: month)
        cohort.subscriptions += 1
        for k in 1...Self.periods {
            let moment = period.advance(start, by: k).addingTimeInterval(86_400)
            guard moment <= observedBy else { break }
            cohort.observed[k - 1] += 1
            if case .paid = timeline.standing(at: moment) {
                cohort.retained[k - 1] += 1
            }
        }
        cohorts[month] = cohort
    }
}

extension BillingPeriod {
    static let utc: Calendar = {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC") ?? calendar.timeZone
        return calendar
    }()

    /// `date` moved on by `count` periods, by the calendar (a month from January 31 is February 28).
    public func advance(_ date: Date, by count: Int) -> Date {
        let calendar = Self.utc
        let moved: Date? =
            switch self {
            case .week: date.addingTimeInterval(Double(count) * 7 * 86_400)
            case .month: calendar.date(byAdding: .month, value: count, to: date)
            case .twoMonths: calendar.date(byAdding: .month, value: 2 * count, to: date)
            case .threeMonths: calendar.date(byAdding: .month, value: 3 * count, to: date)
            case .sixMonths: calendar.date(byAdding: .month, value: 6 * count, to: date)
            case .year: calendar.date(byAdding: .year, value: count, to: date)
            }
        return moved ?? date
    }
}
