import Foundation

/// What a cohort or paying row keeps beyond the key's product, price and factor. Every field is optional
/// and left out of the stored key when nil, so rows of the other figures keep their keys.
public struct CohortDetail: Sendable, Hashable, Codable {
    /// LTV money rows: the first of `CohortFigures.ltvHorizons` (an index) whose end is after the moment;
    /// the row counts at that horizon and every longer one.
    public var horizon: Int?
    /// Retention rows: the billing period (raw value) the row's observed and retained periods assume. A
    /// row is written for every period; the query keeps the one the catalogue (or the dates) gives.
    public var assumed: String?
    /// Retention rows: the day of the first paid purchase (days since 1970-01-01), and whether it is
    /// exactly that day's midnight, so the query works out when each period has ended.
    public var start: Int?
    public var onStart: Bool?
    /// Retention rows: bit k − 1 set when the subscription is paid and entitled one day after its k-th
    /// period (as `assumed` measures it) ended.
    public var retained: Int?
    /// Paying rows: the catalogue-priced (product, currency) pairs of the subscription's later paid
    /// transactions in the window; the row counts only when the catalogue prices none of them.
    public var later: [CataloguePrice]?

    public init(
        horizon: Int? = nil, assumed: String? = nil, start: Int? = nil, onStart: Bool? = nil, retained: Int? = nil,
        later: [CataloguePrice]? = nil
    ) {
        self.horizon = horizon
        self.assumed = assumed
        self.start = start
        self.onStart = onStart
        self.retained = retained
        self.later = later
    }

    enum CodingKeys: String, CodingKey {
        case horizon = "h", assumed = "a", start = "s", onStart = "o", retained = "r", later = "l"
    }
}

/// A transaction without Apple's price, as the catalogue looks it up: by its product and currency.
public struct CataloguePrice: Sendable, Hashable, Codable, Comparable {
    public var productID: String?
    public var currency: String?

    public init(productID: String?, currency: String?) {
        self.productID = productID
        self.currency = currency
    }

    enum CodingKeys: String, CodingKey {
        case productID = "p", currency = "c"
    }

    /// A canonical order, so equal sets give equal keys (nil before any text).
    public static func < (lhs: CataloguePrice, rhs: CataloguePrice) -> Bool {
        func order(_ price: CataloguePrice) -> (Int, String, Int, String) {
            (price.productID == nil ? 0 : 1, price.productID ?? "", price.currency == nil ? 0 : 1, price.currency ?? "")
        }
        return order(lhs) < order(rhs)
    }
}

/// The monthly figures of `CohortFigures` and `CohortRetention` (refund rate by month of purchase, trial
/// conversion by month the trial began, LTV and retention by month of the first paid purchase), and
/// ARPU's paying subscriptions, as rows (docs/analytics.md, "Cohort rows").
///
/// A cohort row belongs to the month (UTC) of a moment and counts for every `until` from a unit on:
/// `corner(since: from, until: the month's first unit)`. `from` is always after that first unit, so the
/// row is no region of `(s, u)` pairs: a window's corner read (`s < until ≤ u`, `since ≤ s`) never selects
/// it, and the cohort read selects it by its month and `from ≤ u`. "Before `until`" of a moment `t` is
/// `index(t) < u`, so `from` is `index(t) + 1`; a figure asking two moments takes the later one.
extension AnalyticsContributions {
    func cohorts(
        _ timeline: EntitlementTimeline, spans: [EntitlementSpan], trialSpans: [UnitSpan], _ builder: inout Builder
    ) {
        let counted = timeline.transactions
        guard let first = counted.first else { return }
        let paid = counted.filter { !$0.isTrial }
        payingRows(paid, &builder)
        guard builder.monthlyCohorts else { return }
        refundRows(paid, &builder)
        trialRows(first, firstPaid: paid.first, trialSpans: trialSpans, &builder)
        if let firstPaid = paid.first, let start = firstPaid.purchasedAt {
            // Both place every row by the first paid purchase's unit alone.
            builder.sameOnBothAxes(if: builder.unmoved(start)) { builder in
                ltvRows(paid, start: start, &builder)
                retentionRows(spans, firstPaid: firstPaid, start: start, &builder)
            }
        }
    }

    /// The shape of a row of `moment`'s month, counted for every `until` unit from `from` on.
    func cohortShape(of moment: Date, from: Int) -> ContributionShape {
        .corner(since: from, until: cohortUnit(of: moment))
    }

    /// The unit index of the first midnight (UTC) of the month holding `moment`.
    func cohortUnit(of moment: Date) -> Int {
        Self.cohortUnit(firstDay: Self.firstDay(ofMonth: CohortFigures.monthIndex(of: moment)), unit: unit)
    }

    /// The unit of the midnight `firstDay` UTC days after 1970-01-01, on an axis of days `unit` long.
    static func cohortUnit(firstDay: Int, unit: TimeInterval) -> Int {
        self.unit(ofDay: clamped(Double(firstDay) * 86_400 / unit))
    }

    /// Days since 1970-01-01 of the first day of a `CohortFigures.monthIndex` (Hinnant's days-from-civil).
    static func firstDay(ofMonth index: Int) -> Int {
        let month = ((index % 12) + 12) % 12 + 1
        let year = (index - (month - 1)) / 12 - (month <= 2 ? 1 : 0)
        let era = (year >= 0 ? year : year - 399) / 400
        let yearOfEra = year - era * 400
        let dayOfYear = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }

    /// Refund rate: each paid transaction in its purchase month from its purchase on; its refund and
    /// seat refund from the later of the purchase and the refund. Price and factor as `refunds` counts.
    private func refundRows(_ paid: [LedgerTransaction], _ builder: inout Builder) {
        let keys = builder.keys
        for transaction in paid {
            guard let purchased = transaction.purchasedAt else { continue }
            let alike =
                builder.unmoved(purchased) && builder.unmoved(transaction.revokedAt)
                && builder.unmoved(transaction.seatsRevokedAt)
            builder.sameOnBothAxes(if: alike) { builder in
                let bought = index(of: purchased)
                func add(_ figure: ContributionFigure, factor: Decimal, at moment: Date) {
                    let shape = cohortShape(of: purchased, from: max(bought, index(of: moment)) + 1)
                    builder.add(shape, 1, monthlyCohort: true) { keys.key($0, figure, transaction, factor: factor) }
                }
                add(.refundPurchase, factor: Decimal(max(transaction.quantity, 1)), at: purchased)
                if SubscriptionAnalytics.isRefund(transaction), let revoked = transaction.revokedAt {
                    add(.refundRefunded, factor: CohortFigures.refundedUnits(of: transaction), at: revoked)
                }
                if let seats = transaction.revokedSeatQuantity, seats > 0, let at = transaction.seatsRevokedAt {
                    add(.refundSeats, factor: Decimal(seats), at: at)
                }
            }
        }
    }

    /// Trial conversion: started from the trial's purchase; converted from the later of it and the first
    /// paid purchase; in the trial while a trial span holds `u`, before the first paid purchase.
    private func trialRows(
        _ first: LedgerTransaction, firstPaid: LedgerTransaction?, trialSpans: [UnitSpan], _ builder: inout Builder
    ) {
        guard first.isTrial, let started = first.purchasedAt else { return }
        let keys = builder.keys
        let trial = index(of: started)
        let converted = firstPaid?.purchasedAt.map(index(of:))
        func add(_ figure: ContributionFigure, from: Int, _ count: Int) {
            builder.add(cohortShape(of: started, from: from), count, monthlyCohort: true) {
                keys.key($0, figure, productID: nil)
            }
        }
        add(.trialCohortStarted, from: trial + 1, 1)
        if let converted { add(.trialCohortConverted, from: max(trial, converted) + 1, 1) }
        for span in trialSpans {
            let from = max(span.start, trial + 1)
            let to = [span.end, converted.map { $0 + 1 }].compactMap { $0 }.min()
            guard to.map({ from < $0 }) ?? true else { continue }
            add(.trialCohortInTrial, from: from, 1)
            if let to { add(.trialCohortInTrial, from: to, -1) }
        }
    }

    /// LTV: the customer (with the first paid purchase's price, for its currency) and each purchase,
    /// refund and seat refund within the longest horizon of `start`, at the first horizon it is within;
    /// all counted from the first paid purchase on, the cohort's inclusion.
    private func ltvRows(_ paid: [LedgerTransaction], start: Date, _ builder: inout Builder) {
        guard let firstPaid = paid.first else { return }
        let keys = builder.keys
        let shape = cohortShape(of: start, from: index(of: start) + 1)
        // Every LTV row of the subscription has this shape: none is kept, none is worked out.
        guard builder.keeps(shape, monthlyCohort: true) else { return }
        builder.add(keys.key(shape, .ltvCustomer, firstPaid, factor: 1), 1)
        let ends = CohortFigures.ltvHorizons.map { start.addingTimeInterval(Double($0) * 86_400) }
        func add(_ transaction: LedgerTransaction, factor: Decimal, at moment: Date?) {
            guard let moment, moment >= start, let horizon = ends.firstIndex(where: { moment < $0 }) else { return }
            var key = keys.key(shape, .ltvRevenue, transaction, factor: factor)
            key.cohort = CohortDetail(horizon: horizon)
            builder.add(key, 1)
        }
        for transaction in paid {
            add(transaction, factor: Decimal(max(transaction.quantity, 1)), at: transaction.purchasedAt)
            if SubscriptionAnalytics.isRefund(transaction) {
                add(transaction, factor: -CohortFigures.refundedUnits(of: transaction), at: transaction.revokedAt)
            }
            if let seats = transaction.revokedSeatQuantity, seats > 0 {
                add(transaction, factor: -Decimal(seats), at: transaction.seatsRevokedAt)
            }
        }
    }

    /// Retention: one row per billing period the catalogue may give the first paid product, each saying
    /// at which of the 12 period ends (plus one day) the subscription was paid and entitled.
    private func retentionRows(
        _ spans: [EntitlementSpan], firstPaid: LedgerTransaction, start: Date, _ builder: inout Builder
    ) {
        let keys = builder.keys
        let shape = cohortShape(of: start, from: index(of: start) + 1)
        // Every retention row of the subscription has this shape: none is kept, none is worked out.
        guard builder.keeps(shape, monthlyCohort: true) else { return }
        let paidSpans = spans.filter { $0.kind == .paid }
        // The start's day, and whether the start is its midnight, even on a window's axis (`OffUnitWindow`):
        // the query works the periods' ends out from that midnight by whole days and months.
        let (startDay, onStart) = Self.day(of: start, unit: unit)
        let inferred = BillingPeriod.inferred(from: firstPaid.purchasedAt, to: firstPaid.expiresAt)
        let calendar = PeriodArithmetic(start)
        for period in BillingPeriod.allCases {
            var retained = 0
            for k in 1...CohortRetention.periods {
                let moment = calendar.advance(by: k, period).addingTimeInterval(86_400)
                if EntitlementTimeline.span(at: moment, in: paidSpans) != nil { retained |= 1 << (k - 1) }
            }
            var key = keys.key(shape, .retention, productID: firstPaid.productID)
            key.period = inferred
            key.cohort = CohortDetail(
                assumed: period.rawValue, start: startDay, onStart: onStart ? true : nil, retained: retained)
            builder.add(key, 1)
        }
    }
}

extension AnalyticsContributions {
    /// ARPU's paying subscriptions: a subscription counts once, under the currency of its last paid
    /// transaction purchased in the window that has a price. Paid transaction `j` (unit `p`) is that one
    /// when `s ≤ p < u` and every later one purchased before `u` has none. A later one with Apple's price
    /// always has one, and one looked up like `j` has one exactly when `j` has: either ends `j`'s region.
    /// The others are looked up in the catalogue at query time: the key names them (`later`), and the
    /// region `[always, p + 1) × [p + 1, …)` is cut where that set grows.
    func payingRows(_ paid: [LedgerTransaction], _ builder: inout Builder) {
        for position in paid.indices {
            let alike = builder.pair == nil || Self.placingPurchases(paid, at: position).allSatisfy(builder.unmoved)
            builder.sameOnBothAxes(if: alike) { payingRows(paid, at: position, &$0) }
        }
    }

    /// The purchases whose units place the paying rows of `paid[position]`: its own and those of the later
    /// ones `payingRows(_:at:_:)` goes through (to the first with Apple's price or its own lookup), which
    /// the catalogue lookups alone decide, whatever the axis.
    static func placingPurchases(_ paid: [LedgerTransaction], at position: Int) -> [Date?] {
        let own = catalogueLookup(of: paid[position])
        var purchases = [paid[position].purchasedAt]
        for next in paid[(position + 1)...] where next.purchasedAt != nil {
            purchases.append(next.purchasedAt)
            guard let lookup = catalogueLookup(of: next), lookup != own else { break }
        }
        return purchases
    }

    /// The paying rows of `paid[position]`.
    private func payingRows(_ paid: [LedgerTransaction], at position: Int, _ builder: inout Builder) {
        let keys = builder.keys
        let transaction = paid[position]
        guard let purchased = transaction.purchasedAt else { return }
        let bought = index(of: purchased)
        let own = Self.catalogueLookup(of: transaction)
        var later: Set<CataloguePrice> = []
        var from = bought + 1
        func rectangle(to end: Int?) {
            let detail = later.isEmpty ? nil : CohortDetail(later: later.sorted())
            let key = { (shape: ContributionShape) -> ContributionKey in
                var key = keys.key(shape, .payingInWindow, productID: own?.productID)
                key.price = PriceSource(milliunits: own == nil ? 0 : nil, currency: transaction.currency)
                key.cohort = detail
                return key
            }
            builder.rectangle(key, since: ContributionShape.always, bought + 1, until: from, end)
        }
        var ended = false
        for next in paid[(position + 1)...] {
            guard let nextPurchased = next.purchasedAt else { continue }
            let nextUnit = index(of: nextPurchased)
            guard let lookup = Self.catalogueLookup(of: next), lookup != own else {
                rectangle(to: nextUnit + 1)
                ended = true
                break
            }
            if later.contains(lookup) { continue }
            rectangle(to: nextUnit + 1)
            later.insert(lookup)
            from = max(from, nextUnit + 1)
        }
        if !ended { rectangle(to: nil) }
    }

    /// How the catalogue looks a paid transaction's price up; nil when Apple gave its price and currency
    /// (the row keeps only the currency then, the amount does not matter).
    static func catalogueLookup(of transaction: LedgerTransaction) -> CataloguePrice? {
        guard transaction.priceMilliunits == nil || transaction.currency == nil else { return nil }
        return CataloguePrice(productID: transaction.productID, currency: transaction.currency)
    }
}
