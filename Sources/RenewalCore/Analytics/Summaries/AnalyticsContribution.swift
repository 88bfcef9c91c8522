import Foundation

/// Where a contribution row counts on a window's axis of units (UTC days unless said otherwise). A window
/// `[since, until)` aligned to units is the pair of unit indices `(s, u)`, `s < u`; every figure of
/// `SubscriptionAnalytics` is a sum of the rows whose shape matches the pair, so a summary that sums the
/// rows of every subscription answers any aligned window without reading a ledger.
public enum ContributionShape: Sendable, Hashable {
    /// Something that happened during unit `index` (a purchase, a refund): counts when `s ≤ index < u`.
    case event(Int)
    /// A step (+1 where a standing begins, −1 where it ends) of a standing at a moment: counts at a
    /// window bound `b` (`s` or `u`) when `index ≤ b`. The first unit whose start the standing holds.
    case step(Int)
    /// A corner of a rectangle of `(s, u)` pairs: counts when `since ≤ s` and `until ≤ u`. Four corners
    /// (+, −, −, +) make a rectangle; `ContributionShape.always` stands for "no lower bound".
    case corner(since: Int, until: Int)

    /// A corner bound every window passes.
    public static let always = Int.min
}

/// What a contribution row adds to: one figure of `AnalyticsFigures`, or the standing both point figures
/// read. Raw values name the rows in a summary table.
public enum ContributionFigure: String, Sendable, Hashable, CaseIterable {
    /// A paid transaction purchased (`revenue`, or `unpriced_transactions` when the query finds no price).
    case revenue
    /// A refund, or seats refunded (`refunds`; nothing when the query finds no price).
    case refund
    case newTrial = "new_trial"
    case newSubscription = "new_subscription"
    case trialConversion = "trial_conversion"
    /// Paid and entitled (steps): `active_at_since` at `s`; `active_subscriptions`, `mrr` at `u`.
    case paid
    /// Entitled by a free trial (steps): `active_trials` at `u`.
    case trial
    /// Corners of the (paid at `s`, not entitled at `u`, no refund between) region.
    case churned
    /// Corners of the (first reactivation in the window) region.
    case reactivation
    /// Corners of the trial funnel's regions: converted by `u`, still in the trial at `u`.
    case trialConverted = "trial_converted"
    case trialInTrial = "trial_in_trial"
    /// Corners of the regions of `(s, u)` pairs whose standings at `s` and at `u` are the key's
    /// `movement` ends: the window's MRR movement (`mrr_movement`), classified at query time.
    case mrrMovement = "mrr_movement"
    /// Events on the day a standing changes, from the key's `movement` start to its end: one day's MRR
    /// movement (`mrr_movement_daily`).
    case mrrChange = "mrr_change"
    // The monthly figures and ARPU's paying subscriptions (AnalyticsContributions+Cohorts.swift): cohort
    // rows are `corner(since: counted from, until: the cohort month's first unit)`, a region no window reads.
    case refundPurchase = "refund_purchase"
    case refundRefunded = "refund_refunded"
    case refundSeats = "refund_seats"
    case trialCohortStarted = "trial_cohort_started"
    case trialCohortConverted = "trial_cohort_converted"
    case trialCohortInTrial = "trial_cohort_in_trial"
    case ltvCustomer = "ltv_customer"
    case ltvRevenue = "ltv_revenue"
    case retention
    /// Corners of the (s, u) pairs in which a transaction is a subscription's last priced one in the window.
    case payingInWindow = "paying_in_window"
}

/// The price a row's transactions carry, as the ledger holds it: Apple's milliunits and currency when it
/// gave them. The catalogue's list price is a query-time input, so a row keeps what the catalogue looks
/// up by (the product, in the key, and the currency) rather than a resolved amount.
public struct PriceSource: Sendable, Hashable {
    public var milliunits: Int64?
    public var currency: String?

    public init(milliunits: Int64?, currency: String?) {
        self.milliunits = milliunits
        self.currency = currency
    }
}

/// One row of a subscription's contribution, without its count: where it counts, to what, and the
/// attributes the query needs to turn counts into figures (product, price, inferred period, factor).
/// Rows of different subscriptions with the same key add up; the summary keeps one count per key.
///
/// Keys are hashed and copied several times per row (a subscription's rows, a rebuild page's sum, the
/// upkeep's delta), so the rarely present movement and cohort parts are kept out of line (a copy is one
/// retain) and the hash reads only the fields that tell keys apart in practice (`hash(into:)`).
public struct ContributionKey: Sendable, Hashable {
    public var shape: ContributionShape
    public var figure: ContributionFigure
    /// The app, when an answer said it: a summary answers for one app or all of them.
    public var bundleID: String?
    public var environment: AppStoreEnvironment
    /// The transaction's product as the ledger holds it (`by_product` reads nil as `unknown`).
    public var productID: String?
    /// Money rows and paid steps only.
    public var price: PriceSource?
    /// Paid steps only: the period inferred from the transaction's dates; the catalogue's period for the
    /// product, when it has one, replaces it at query time.
    public var period: BillingPeriod?
    /// Money rows and paid steps: the seats or share the price is multiplied by for one transaction
    /// (quantity for revenue, seats × share for a refund, seats still paid for MRR); 1 otherwise.
    public var factor: Decimal
    private var movementPart: KeyPart<MovementEnds>?
    private var cohortPart: KeyPart<CohortDetail>?

    /// MRR movement rows only: the standings the row compares (AnalyticsContributions+Movement.swift).
    public var movement: MovementEnds? {
        get { movementPart?.value }
        set { movementPart = newValue.map(KeyPart.init) }
    }

    /// Cohort and paying rows only: what their figure needs beyond price and factor (CohortDetail).
    public var cohort: CohortDetail? {
        get { cohortPart?.value }
        set { cohortPart = newValue.map(KeyPart.init) }
    }

    public init(
        shape: ContributionShape, figure: ContributionFigure, bundleID: String?, environment: AppStoreEnvironment,
        productID: String?, price: PriceSource? = nil, period: BillingPeriod? = nil, factor: Decimal = 1,
        movement: MovementEnds? = nil, cohort: CohortDetail? = nil
    ) {
        self.shape = shape
        self.figure = figure
        self.bundleID = bundleID
        self.environment = environment
        self.productID = productID
        self.price = price
        self.period = period
        self.factor = factor
        self.movementPart = movement.map(KeyPart.init)
        self.cohortPart = cohort.map(KeyPart.init)
    }

    /// Every field, the cheap ones first (the factor's `Decimal` comparison normalizes both sides).
    public static func == (lhs: ContributionKey, rhs: ContributionKey) -> Bool {
        lhs.shape == rhs.shape && lhs.figure == rhs.figure && lhs.productID == rhs.productID
            && lhs.period == rhs.period && lhs.price == rhs.price && lhs.bundleID == rhs.bundleID
            && lhs.environment == rhs.environment && KeyPart.equal(lhs.movementPart, rhs.movementPart)
            && KeyPart.equal(lhs.cohortPart, rhs.cohortPart) && lhs.factor == rhs.factor
    }

    /// A subset of the fields `==` compares (so equal keys hash equally): the shape, figure, product,
    /// price, period and the movement's and cohort's plain fields; not the factors (a `Decimal` hashes
    /// slowly and is 1 on almost every row), the app or the environment (one or two per table).
    public func hash(into hasher: inout Hasher) {
        switch shape {
        case .event(let index): hasher.combine(index &* 3)
        case .step(let index): hasher.combine(index &* 3 &+ 1)
        case .corner(let since, let until):
            hasher.combine(until &* 3 &+ 2)
            hasher.combine(since)
        }
        hasher.combine(figure.ordinal)
        hasher.combine(productID)
        hasher.combine(period.map { $0.ordinal } ?? -1)
        if let price {
            hasher.combine(price.milliunits ?? -1)
            hasher.combine(price.currency)
        }
        if let movement = movementPart?.value {
            hasher.combine(movement.paidBefore)
            hasher.combine(movement.paidAt ?? -1)
            hasher.combine(movement.joined)
            Self.combine(movement.start, into: &hasher)
            Self.combine(movement.end, into: &hasher)
        }
        if let cohort = cohortPart?.value {
            hasher.combine(cohort.horizon ?? -1)
            hasher.combine(cohort.assumed)
            hasher.combine(cohort.start ?? Int.min)
            hasher.combine(cohort.onStart)
            hasher.combine(cohort.retained ?? -1)
            hasher.combine(cohort.later?.count ?? -1)
        }
    }
}

extension ContributionKey {
    /// A movement end's plain fields (not its factor).
    fileprivate static func combine(_ standing: MRRStanding?, into hasher: inout Hasher) {
        hasher.combine(standing?.productID)
        hasher.combine(standing?.price.milliunits ?? -1)
        hasher.combine(standing?.price.currency)
        hasher.combine(standing?.period.map { $0.ordinal } ?? -1)
    }
}

/// An immutable part of a key kept on the heap: copying a key retains it instead of copying its fields.
final class KeyPart<Value: Hashable & Sendable>: Sendable {
    let value: Value

    init(_ value: Value) {
        self.value = value
    }

    static func equal(_ lhs: KeyPart?, _ rhs: KeyPart?) -> Bool {
        switch (lhs, rhs) {
        case (nil, nil): true
        case (let lhs?, let rhs?): lhs === rhs || lhs.value == rhs.value
        default: false
        }
    }
}

extension ContributionFigure {
    /// The case's position, hashed instead of its raw value (a raw-value enum hashes its string).
    var ordinal: Int {
        switch self {
        case .revenue: 0
        case .refund: 1
        case .newTrial: 2
        case .newSubscription: 3
        case .trialConversion: 4
        case .paid: 5
        case .trial: 6
        case .churned: 7
        case .reactivation: 8
        case .trialConverted: 9
        case .trialInTrial: 10
        case .mrrMovement: 11
        case .mrrChange: 12
        case .refundPurchase: 13
        case .refundRefunded: 14
        case .refundSeats: 15
        case .trialCohortStarted: 16
        case .trialCohortConverted: 17
        case .trialCohortInTrial: 18
        case .ltvCustomer: 19
        case .ltvRevenue: 20
        case .retention: 21
        case .payingInWindow: 22
        }
    }
}

extension BillingPeriod {
    /// The case's position, hashed instead of its raw value.
    var ordinal: Int {
        switch self {
        case .week: 0
        case .month: 1
        case .twoMonths: 2
        case .threeMonths: 3
        case .sixMonths: 4
        case .year: 5
        }
    }
}

/// Summed contribution rows: a count per key. Kept by adding a subscription's rows and, when its ledger
/// or facts change, subtracting its old rows and adding its new ones; a count that reaches zero is
/// dropped, so a summary kept that way equals one summed from scratch.
public struct AnalyticsSummary: Sendable, Hashable {
    public private(set) var counts: [ContributionKey: Int] = [:]

    public init() {}

    public init(_ rows: [ContributionKey: Int]) {
        add(rows)
    }

    /// Adds `query.correction(of: ledger)` in place: the way to sum many subscriptions' corrections.
    public mutating func addCorrection(of ledger: SubscriptionLedger, for query: SummaryQuery) {
        query.addCorrection(of: ledger, to: &counts)
    }

    /// Adds `rows` (`sign` −1 subtracts them).
    public mutating func add(_ rows: [ContributionKey: Int], sign: Int = 1) {
        for (key, count) in rows { Self.add(sign * count, to: key, in: &counts) }
    }

    /// Adds `count` to `key`'s count in `counts`, dropping a count that reaches zero: one lookup, in
    /// place (the optional subscript's modify finds the key once, then inserts, updates or removes).
    static func add(_ count: Int, to key: ContributionKey, in counts: inout [ContributionKey: Int]) {
        func bump(_ value: inout Int?) {
            let sum = (value ?? 0) + count
            value = sum == 0 ? nil : sum
        }
        bump(&counts[key])
    }

    /// `new` less `old`, without the keys whose counts are equal: what replacing one subscription's rows
    /// changes. Worked out in `new`'s own small dictionary, so a write's summed change only meets the few
    /// keys a write changes (most of a subscription's rows are the same before and after).
    public static func difference(from old: [ContributionKey: Int], to new: [ContributionKey: Int])
        -> [ContributionKey: Int]
    {
        var change = new
        for (key, count) in old { add(-count, to: key, in: &change) }
        return change
    }

    /// Replaces one subscription's rows: what the job does when a run changes its ledger or facts.
    public mutating func replace(_ old: [ContributionKey: Int], with new: [ContributionKey: Int]) {
        add(old, sign: -1)
        add(new)
    }
}
