import Foundation

/// The figures that explain revenue, by month (UTC), as of `asOf` (the window's `until`), one subscription
/// at a time like every other figure (Production, bought by the customer; docs/analytics.md states them):
/// - refund rate by the month the refunded transaction was purchased in;
/// - trial conversion by the month the trial began;
/// - realized LTV per paying subscription by the month of its first paid purchase, at 7, 30, 90 and 365
///   days after that purchase;
/// - and, for ARPU, the subscriptions that paid in the window `[since, asOf)`.
public struct CohortFigures: Sendable {
    /// Months of refund rate and trial conversion: the 12 up to `asOf`'s.
    public static let months = 12
    /// Months of LTV: 24, so that cohorts a year old are in it.
    public static let ltvMonths = 24
    /// Days after the first paid purchase at which LTV is measured.
    public static let ltvHorizons = [7, 30, 90, 365]

    /// Paid transactions purchased in a month, and those of them refunded by `asOf`.
    public struct RefundMonth: Sendable, Hashable {
        public var month: String
        public var transactions = 0
        public var refunded = 0
        /// Price × quantity of the month's paid transactions.
        public var purchased = Amounts()
        /// What their refunds returned by `asOf`, as `refunds` counts it (prorated share, seat refunds).
        public var refunds = Amounts()

        public init(month: String) { self.month = month }
    }

    /// The subscriptions whose first transaction is a free trial begun in the month.
    public struct TrialCohort: Sendable, Hashable {
        public var month: String
        public var started = 0
        /// Their first paid period was purchased before `asOf`.
        public var converted = 0
        /// Not converted and still in the trial at `asOf`.
        public var inTrial = 0

        public init(month: String) { self.month = month }
    }

    /// The subscriptions whose first paid period was purchased in the month, and their net revenue within
    /// each horizon of that purchase.
    public struct LTVCohort: Sendable, Hashable {
        public var month: String
        public var monthEnd: Date
        public var customers = 0
        /// Per currency of the first paid purchase's price: the customers (unpriced ones are in none).
        public var customersByCurrency: [String: Int] = [:]
        /// Per horizon (`ltvHorizons`): revenue less refunds in `[first paid purchase, + horizon days)`.
        public var netRevenue: [Amounts] = Array(repeating: Amounts(), count: CohortFigures.ltvHorizons.count)

        /// Whether every customer of the cohort has had `days` since the first paid purchase by `asOf`.
        public func complete(_ days: Int, asOf: Date) -> Bool {
            monthEnd.addingTimeInterval(Double(days) * 86_400) <= asOf
        }
    }

    public let since: Date
    public let asOf: Date
    let firstMonth: Date
    let firstLTVMonth: Date
    /// Keyed by `monthIndex`: a month's name is made once, not for every transaction.
    private var refunds: [Int: RefundMonth] = [:]
    private var trials: [Int: TrialCohort] = [:]
    private var ltv: [Int: LTVCohort] = [:]

    /// By month (`YYYY-MM`).
    public var refundMonths: [String: RefundMonth] {
        Dictionary(uniqueKeysWithValues: refunds.values.map { ($0.month, $0) })
    }
    public var trialCohorts: [String: TrialCohort] {
        Dictionary(uniqueKeysWithValues: trials.values.map { ($0.month, $0) })
    }
    public var ltvCohorts: [String: LTVCohort] { Dictionary(uniqueKeysWithValues: ltv.values.map { ($0.month, $0) }) }
    /// Per currency: subscriptions with a priced paid transaction purchased in `[since, asOf)`, under the
    /// currency of the last one (ARPU's denominator).
    public private(set) var payingInWindow: [String: Int] = [:]

    public init(since: Date, asOf: Date) {
        self.since = since
        self.asOf = asOf
        let calendar = BillingPeriod.utc
        let month = calendar.dateInterval(of: .month, for: asOf)?.start ?? asOf
        firstMonth = calendar.date(byAdding: .month, value: -(Self.months - 1), to: month) ?? month
        firstLTVMonth = calendar.date(byAdding: .month, value: -(Self.ltvMonths - 1), to: month) ?? month
    }

    /// A paid transaction and its price of one period (nil when unpriced).
    typealias Priced = (transaction: LedgerTransaction, price: Money?)

    /// Adds one subscription. `price`: a transaction's price of one period (nil when unpriced).
    public mutating func add(_ timeline: EntitlementTimeline, price: (LedgerTransaction) -> Money?) {
        let counted = timeline.transactions
        guard let first = counted.first else { return }
        let paid: [Priced] = counted.filter { !$0.isTrial }.map { ($0, price($0)) }
        addRefunds(paid)
        let firstPaid = paid.first?.transaction.purchasedAt
        if first.isTrial, let started = first.purchasedAt, started >= firstMonth, started < asOf {
            let month = Self.monthIndex(of: started)
            var cohort = trials[month] ?? TrialCohort(month: Self.monthName(month))
            cohort.started += 1
            if let firstPaid, firstPaid < asOf {
                cohort.converted += 1
            } else if case .trial = timeline.standing(at: asOf) {
                cohort.inTrial += 1
            }
            trials[month] = cohort
        }
        if let firstPaid, firstPaid >= firstLTVMonth, firstPaid < asOf { addLTV(paid, from: firstPaid) }
        let paying = paid.last { item in
            item.price != nil && item.transaction.purchasedAt.map { since <= $0 && $0 < asOf } ?? false
        }
        if let currency = paying?.price?.currency { payingInWindow[currency, default: 0] += 1 }
    }

    private mutating func addRefunds(_ paid: [Priced]) {
        for (transaction, money) in paid {
            guard let purchased = transaction.purchasedAt, purchased >= firstMonth, purchased < asOf else { continue }
            let month = Self.monthIndex(of: purchased)
            var row = refunds[month] ?? RefundMonth(month: Self.monthName(month))
            row.transactions += 1
            if let money { row.purchased.add(money, times: Decimal(max(transaction.quantity, 1))) }
            if SubscriptionAnalytics.isRefund(transaction), let revoked = transaction.revokedAt, revoked < asOf {
                row.refunded += 1
                if let money { row.refunds.add(money, times: Self.refundedUnits(of: transaction)) }
            }
            if let seats = transaction.revokedSeatQuantity, seats > 0, let at = transaction.seatsRevokedAt, at < asOf,
                let money
            {
                row.refunds.add(money, times: Decimal(seats))
            }
            refunds[month] = row
        }
    }

    /// Each purchase adds its revenue, and each refund takes its amount back, at every horizon whose end
    /// is after it.
    private mutating func addLTV(_ paid: [Priced], from start: Date) {
        let month = Self.monthIndex(of: start)
        var cohort = ltv[month] ?? Self.ltvCohort(month)
        cohort.customers += 1
        if let currency = paid.first?.price?.currency { cohort.customersByCurrency[currency, default: 0] += 1 }
        let ends = Self.ltvHorizons.map { start.addingTimeInterval(Double($0) * 86_400) }
        func add(_ money: Money, times factor: Decimal, at moment: Date?) {
            guard let moment, moment >= start else { return }
            for (index, end) in ends.enumerated() where moment < end {
                cohort.netRevenue[index].add(money, times: factor)
            }
        }
        for (transaction, money) in paid {
            guard let money else { continue }
            add(money, times: Decimal(max(transaction.quantity, 1)), at: transaction.purchasedAt)
            if SubscriptionAnalytics.isRefund(transaction) {
                add(money, times: -Self.refundedUnits(of: transaction), at: transaction.revokedAt)
            }
            if let seats = transaction.revokedSeatQuantity, seats > 0 {
                add(money, times: -Decimal(seats), at: transaction.seatsRevokedAt)
            }
        }
        ltv[month] = cohort
    }

    private static func ltvCohort(_ month: Int) -> LTVCohort {
        let name = monthName(month)
        let start = DailyAnalytics.dayStart(named: name + "-01") ?? .distantPast
        let end = BillingPeriod.utc.date(byAdding: .month, value: 1, to: start) ?? start
        return LTVCohort(month: name, monthEnd: end)
    }

    /// The units of a transaction's price its refund returned: its seats still paid for (1 for a single
    /// seat) times the prorated share, as `refunds` counts it.
    static func refundedUnits(of transaction: LedgerTransaction) -> Decimal {
        let share = transaction.revocationPercentage.map { Decimal($0) / 100_000 } ?? 1
        return Decimal(transaction.quantity > 1 ? transaction.paidSeats : 1) * share
    }

    /// The UTC month of `date` as year × 12 + month − 1, by arithmetic on days (Hinnant's civil-from-days):
    /// formatting a date for every transaction costs more than the rest of the figure.
    static func monthIndex(of date: Date) -> Int {
        let z = Int((date.timeIntervalSince1970 / 86_400).rounded(.down)) + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1_460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let shifted = (5 * dayOfYear + 2) / 153
        let month = shifted < 10 ? shifted + 3 : shifted - 9
        let year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)
        return year * 12 + month - 1
    }

    /// `YYYY-MM` of a `monthIndex`.
    static func monthName(_ index: Int) -> String {
        let month = index % 12 + 1
        return "\(index / 12)-" + (month < 10 ? "0\(month)" : "\(month)")
    }
}
