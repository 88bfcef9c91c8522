import Foundation

/// A window's MRR movement from a summary: the same numbers as `MRRMovementSeries` over every ledger
/// (`SubscriptionAnalytics.movement`), so `mrr_movement`, `mrr_movement_daily` and ARPU's subscriptions
/// can be answered without reading the ledger.
public struct SummaryMovement: Sendable, Hashable {
    /// The window's buckets, with MRR at `since` and at `until`.
    public var window: MRRMovement
    /// One per UTC day of the window, with MRR at its start and end (`MRRMovementSeries.days`); nil when
    /// the summary's unit is not a day (its events are per unit, and a day compares its two midnights).
    public var days: [MRRMovement]?
    /// The UTC day (`YYYY-MM-DD`) of each of `days` (empty when `days` is nil).
    public var dayNames: [String]
    /// Per currency: subscriptions paid, entitled and priced at `until` (ARPU's denominator).
    public var payingAtUntil: [String: Int]
}

extension SummaryQuery {
    /// The movement over `summary` (one app's rows when `bundleID` is given): MRR at the bounds from the
    /// paid steps, the window's buckets from the movement corners, each day's from the change events
    /// (`summary` holds them on their own day). The catalogue prices both ends of every row and
    /// `MRRMovement.classify` puts the change in its bucket here, at query time. Nil when a row's count is
    /// negative where a number of subscriptions is expected: rows that are not a sum of subscriptions'.
    public func movement(of summary: AnalyticsSummary, bundleID: String? = nil) -> SummaryMovement? {
        var atSince: [ContributionKey: Int] = [:]
        var atUntil: [ContributionKey: Int] = [:]
        var window: [MovementEnds: Int] = [:]
        var days: [Int: [MovementEnds: Int]] = [:]
        for (key, count) in summary.counts where key.environment == environment {
            if let bundleID, key.bundleID != bundleID { continue }
            var bare = key
            bare.shape = .event(0)
            switch (key.figure, key.shape, key.movement) {
            case (.paid, .step(let index), _):
                if index <= s { atSince[bare, default: 0] += count }
                if index <= u { atUntil[bare, default: 0] += count }
            case (.mrrMovement, .corner(let sinceBound, let untilBound), let ends?):
                // As for the other corners: those at or before s cancel.
                if sinceBound <= s, s < untilBound, untilBound <= u { window[ends, default: 0] += count }
            case (.mrrChange, .event(let unit), let ends?):
                guard s <= unit, unit < u else { continue }
                // Per day: the window reads day `n` from its midnight, or from `since` on its first day.
                let day = AnalyticsContributions.day(ofUnit: unit)
                let from = Swift.max(AnalyticsContributions.unit(ofDay: day), s)
                days[day, default: [:]][ends.read(onDay: day, from: from), default: 0] += count
            default: continue
            }
        }
        var movement = MRRMovement()
        var paying: [String: Int] = [:]
        for (key, count) in atSince where count != 0 {
            if let mrr = monthly(key) { movement.atStart.add(mrr, times: Decimal(count)) }
        }
        for (key, count) in atUntil where count != 0 {
            guard let mrr = monthly(key) else { continue }
            movement.atEnd.add(mrr, times: Decimal(count))
            paying[mrr.currency, default: 0] += count
        }
        guard add(window, to: &movement) else { return nil }
        guard unit == 86_400 else {
            return SummaryMovement(window: movement, days: nil, dayNames: [], payingAtUntil: paying)
        }
        let windowDays = AnalyticsContributions.day(ofUnit: s)...AnalyticsContributions.day(ofUnit: u - 1)
        let names = windowDays.map { DailyAnalytics.name(of: Date(timeIntervalSince1970: Double($0) * unit)) }
        var start = movement.atStart
        var daily: [MRRMovement] = []
        for day in windowDays {
            var change = MRRMovement()
            guard add(days[day] ?? [:], to: &change) else { return nil }
            change.atStart = start
            start.add(change.net)
            change.atEnd = start
            daily.append(change)
        }
        return SummaryMovement(window: movement, days: daily, dayNames: names, payingAtUntil: paying)
    }

    /// Adds each row's change `count` times: `MRRMovement.classify` scales with a positive count (the
    /// bucket depends on signs and currencies only), so the row's ends are priced once and multiplied.
    func add(_ rows: [MovementEnds: Int], to movement: inout MRRMovement) -> Bool {
        for (ends, count) in rows where count != 0 {
            guard count > 0 else { return false }
            movement.addChange(
                from: point(ends.start, times: count), to: point(ends.end, times: count), paidBefore: ends.paidBefore)
        }
        return true
    }

    /// The standing as `MRRMovement.Point`, its MRR multiplied by `times`.
    func point(_ standing: MRRStanding?, times: Int) -> MRRMovement.Point {
        guard let standing else { return .none }
        let mrr = monthly(productID: standing.productID, standing.price, standing.period, standing.factor)
        return MRRMovement.Point(
            paid: true, mrr: mrr.map { Money(currency: $0.currency, amount: $0.amount * Decimal(times)) })
    }

    /// A paid step's MRR: nil when the catalogue finds no price or no period, as `mrr` leaves it out.
    private func monthly(_ key: ContributionKey) -> Money? {
        monthly(productID: key.productID, key.price, key.period, key.factor)
    }

    /// `SubscriptionAnalytics.monthlyPrice`: the price times the seats, normalised to a month.
    func monthly(productID: String?, _ source: PriceSource?, _ inferred: BillingPeriod?, _ factor: Decimal)
        -> Money?
    {
        guard let price = price(productID: productID, source),
            let period = period(productID: productID, inferred: inferred)
        else { return nil }
        return Money(currency: price.currency, amount: period.perMonth(price.amount * factor))
    }
}
