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
    public private(set) var refundMonths: [String: RefundMonth] = [:]
    public private(set) var trialCohorts: [String: TrialCohort] = [:]
    public private(set) var ltvCohorts: [String: LTVCohort] = [:]
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

    /// Adds one subscription. `price`: a transaction's price of one period (nil when unpriced).
    public mutating func add(_ timeline: EntitlementTimeline, price: (LedgerTransaction) -> Money?) {
        let counted = timeline.transactions
        guard let first = counted.first else { return }
        let paid = counted.filter { !$0.isTrial }
        addRefunds(paid, price: price)
        let firstPaid = paid.first?.purchasedAt
        if first.isTrial, let started = first.purchasedAt, started >= firstMonth, started < asOf {
            let month = Self.month(of: started)
            var cohort = trialCohorts[month] ?? TrialCohort(month: month)
            cohort.started += 1
            if let firstPaid, firstPaid < asOf {
                cohort.converted += 1
            } else if case .trial = timeline.standing(at: asOf) {
                cohort.inTrial += 1
            }
            trialCohorts[month] = cohort
        }
        if let firstPaid, firstPaid >= firstLTVMonth, firstPaid < asOf {
            addLTV(paid, from: firstPaid, price: price)
        }
        let paying = paid.last { transaction in
            transaction.purchasedAt.map { since <= $0 && $0 < asOf } ?? false && price(transaction) != nil
        }
        if let paying, let currency = price(paying)?.currency { payingInWindow[currency, default: 0] += 1 }
    }

    private mutating func addRefunds(_ paid: [LedgerTransaction], price: (LedgerTransaction) -> Money?) {
        for transaction in paid {
            guard let purchased = transaction.purchasedAt, purchased >= firstMonth, purchased < asOf else { continue }
            let month = Self.month(of: purchased)
            var row = refundMonths[month] ?? RefundMonth(month: month)
            row.transactions += 1
            let money = price(transaction)
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
            refundMonths[month] = row
        }
    }

    private mutating func addLTV(
        _ paid: [LedgerTransaction], from start: Date, price: (LedgerTransaction) -> Money?
    ) {
        let month = Self.month(of: start)
        let calendar = BillingPeriod.utc
        let monthStart = calendar.dateInterval(of: .month, for: start)?.start ?? start
        var cohort =
            ltvCohorts[month]
            ?? LTVCohort(month: month, monthEnd: calendar.date(byAdding: .month, value: 1, to: monthStart) ?? start)
        cohort.customers += 1
        if let currency = paid.first.flatMap(price)?.currency { cohort.customersByCurrency[currency, default: 0] += 1 }
        for (index, days) in Self.ltvHorizons.enumerated() {
            let end = start.addingTimeInterval(Double(days) * 86_400)
            func within(_ moment: Date?) -> Bool { moment.map { start <= $0 && $0 < end } ?? false }
            for transaction in paid {
                guard let money = price(transaction) else { continue }
                if within(transaction.purchasedAt) {
                    cohort.netRevenue[index].add(money, times: Decimal(max(transaction.quantity, 1)))
                }
                if SubscriptionAnalytics.isRefund(transaction), within(transaction.revokedAt) {
                    cohort.netRevenue[index].add(money, times: -Self.refundedUnits(of: transaction))
                }
                if let seats = transaction.revokedSeatQuantity, seats > 0, within(transaction.seatsRevokedAt) {
                    cohort.netRevenue[index].add(money, times: -Decimal(seats))
                }
            }
        }
        ltvCohorts[month] = cohort
    }

    /// The units of a transaction's price its refund returned: its seats still paid for (1 for a single
    /// seat) times the prorated share, as `refunds` counts it.
    static func refundedUnits(of transaction: LedgerTransaction) -> Decimal {
        let share = transaction.revocationPercentage.map { Decimal($0) / 100_000 } ?? 1
        return Decimal(transaction.quantity > 1 ? transaction.paidSeats : 1) * share
    }

    static func month(of date: Date) -> String { String(Timestamp.string(date).prefix(7)) }
}
