import Foundation

/// A window whose bounds need not be UTC midnights, answered from the day summaries (docs/analytics.md,
/// "A window off midnights"). The summaries' axis has three units a day (`AnalyticsContributions`): a
/// midnight, the inside of its day, and the instant before the next midnight. `s` is the unit holding
/// `since` (`3n + 1` for a `since` inside day `n`) and `u` the first unit start at or after `until`
/// (`3m + 2` for an `until` inside day `m`). The summaries answer `[s, u)` in units, which differs from
/// `[since, until)` only for the subscriptions with something dated in the two part-days: just after
/// midnight `n` to `since`, and `until` to just before midnight `m + 1`. The midnights themselves are
/// not in them. Each of those subscriptions is corrected: its rows on the summaries' axis taken out, its
/// rows on this window's axis put in. On that axis `since` takes the place of unit `s`'s start and
/// `until` that of unit `u`'s, every other unit start staying, so "at or after `since`" is "in unit `s`
/// or later" and "before `until`" is "in a unit before `u`": the rows, folded for `(s, u)`, are exactly
/// the subscription's figures for `[since, until)`, the days of `mrr_movement_daily` clipped to the window.
public struct OffUnitWindow: Sendable, Hashable {
    static let unit: TimeInterval = 86_400
    public let since: Date
    public let until: Date
    public let s: Int
    public let u: Int
    /// Whether the summaries are read from the unit after `since`'s (`s + 1`, just before the midnight
    /// after it) rather than from `s`: the part-day on that side is then `since` to that midnight. The
    /// answer is the same; the subscriptions to correct are those dated in the chosen part.
    public let sinceAfter: Bool
    /// Whether the summaries are read to the unit before `u` (`u − 1`, just after the midnight before
    /// `until`): the part-day is then that midnight to `until`.
    public let untilBefore: Bool

    /// Nil unless `since` is before `until`.
    public init?(since: Date, until: Date) {
        guard since < until else { return nil }
        self.since = since
        self.until = until
        s = AnalyticsContributions.index(of: since, unit: Self.unit)
        u = AnalyticsContributions.boundary(of: until, unit: Self.unit)
        sinceAfter = false
        untilBefore = false
    }

    private init(_ window: OffUnitWindow, sinceAfter: Bool, untilBefore: Bool) {
        self.since = window.since
        self.until = window.until
        self.s = window.s
        self.u = window.u
        self.sinceAfter = sinceAfter
        self.untilBefore = untilBefore
    }

    /// The same window read from the other unit on either side; nil when a bound on that side is a
    /// midnight (it has no part-day) or the units read would not be a window (`readS < readU`).
    public func reading(sinceAfter: Bool, untilBefore: Bool) -> OffUnitWindow? {
        guard !sinceAfter || !sinceOnMidnight, !untilBefore || !untilOnMidnight else { return nil }
        let window = OffUnitWindow(self, sinceAfter: sinceAfter, untilBefore: untilBefore)
        return window.readS < window.readU ? window : nil
    }

    /// The units the summaries are read for: `(s, u)`, or the unit after `s` and the one before `u`.
    public var readS: Int { sinceAfter ? s + 1 : s }
    public var readU: Int { untilBefore ? u - 1 : u }

    /// Both bounds are midnights: the summaries answer without a correction.
    public var isAligned: Bool { sinceOnMidnight && untilOnMidnight }

    /// `since` is a midnight: unit `s` starts at it.
    var sinceOnMidnight: Bool { AnalyticsContributions.day(ofUnit: s) * AnalyticsContributions.unitsPerDay == s }
    var untilOnMidnight: Bool { AnalyticsContributions.day(ofUnit: u) * AnalyticsContributions.unitsPerDay == u }

    /// The part-days, the empty ones left out: a subscription with nothing dated in them has the same
    /// figures for the window as for the units read.
    public var parts: [PartDay] {
        [sincePart, untilPart].compactMap { $0 }
    }

    /// The part-day on `since`'s side: just after midnight `n` to `since`, or `since` to just before
    /// midnight `n + 1` when read from the unit after; nil when `since` is a midnight.
    public var sincePart: PartDay? { sincePart(after: sinceAfter) }

    /// The part-day on `until`'s side: `until` to just before midnight `m + 1`, or just after midnight `m`
    /// to `until` when read from the unit before.
    public var untilPart: PartDay? { untilPart(before: untilBefore) }

    /// The part-day on `since`'s side when read from the unit after `since`'s (`after`) or from it.
    public func sincePart(after: Bool) -> PartDay? {
        guard !sinceOnMidnight else { return nil }
        let day = AnalyticsContributions.day(ofUnit: s)
        return after
            ? PartDay(from: since, toMidnight: midnight(day + 1)) : PartDay(fromMidnight: midnight(day), to: since)
    }

    /// The part-day on `until`'s side when read from the unit before `u` (`before`) or to it.
    public func untilPart(before: Bool) -> PartDay? {
        guard !untilOnMidnight else { return nil }
        let day = AnalyticsContributions.day(ofUnit: u)
        return before
            ? PartDay(fromMidnight: midnight(day), to: until) : PartDay(from: until, toMidnight: midnight(day + 1))
    }

    /// A row of the day axis read for `(readS, readU)`, moved where the window's reads for `(s, u)` select it
    /// exactly then (`SummaryQuery.Reads`, the daily MRR changes by their day): with `sinceAfter` what
    /// happened on day `s` falls before the window and a standing from `s + 1` holds at `since`; with
    /// `untilBefore` day `u − 1` falls after it and a standing from `u` does not hold at `until`. Cohort
    /// rows depend on `until` only: one counted from `u` moves after it. Unchanged when reading `(s, u)`.
    public func relabeled(_ key: ContributionKey) -> ContributionKey {
        guard sinceAfter || untilBefore else { return key }
        var key = key
        if sinceAfter, key.figure == .mrrChange, let ends = key.movement, ends.paidAt != nil || ends.joined {
            return relabeledChange(key, ends)
        }
        key.shape = relabeled(key.shape, monthlyCohort: key.figure.isCohort && key.figure != .payingInWindow)
        return key
    }

    /// A day change row that keeps more than its shape, read from the unit after `since`: read so, the
    /// day of `since` is read from just before its end, so its joined rows (which join a change inside
    /// the day to one at its end) go before the window, and a first paid purchase inside it before `since`
    /// (unit `s`) is before the day's start on this window's axis (unit `s − 1`).
    private func relabeledChange(_ key: ContributionKey, _ ends: MovementEnds) -> ContributionKey {
        var key = key
        var ends = ends
        if case .event(let unit) = key.shape, ends.joined, unit == s + 1 {
            key.shape = .event(s - 1)
        } else {
            key.shape = relabeled(key.shape, monthlyCohort: false)
        }
        if let paidAt = ends.paidAt, case .event(let unit) = key.shape,
            AnalyticsContributions.unit(ofDay: AnalyticsContributions.day(ofUnit: unit)) + paidAt == s
        {
            ends.paidAt = paidAt - 1
            key.movement = ends
        }
        return key
    }

    /// Where `relabeled(_:)` moves a row of `shape`; `monthlyCohort` for a cohort row other than ARPU's
    /// paying rows (it counts from its `since` bound).
    func relabeled(_ shape: ContributionShape, monthlyCohort: Bool) -> ContributionShape {
        guard sinceAfter || untilBefore else { return shape }
        switch shape {
        case .event(var day):
            if sinceAfter, day == s { day = s - 1 }
            if untilBefore, day == u - 1 { day = u }
            return .event(day)
        case .step(var day):
            if sinceAfter, day == s + 1 { day = s }
            if untilBefore, day == u { day = u + 1 }
            return .step(day)
        case .corner(var x, var y):
            if monthlyCohort {
                if untilBefore, x == u { x = u + 1 }
            } else {
                if sinceAfter, x == s + 1 { x = s }
                if sinceAfter, y == s + 1 { y = s }
                if untilBefore, y == u { y = u + 1 }
            }
            return .corner(since: x, until: y)
        }
    }

    /// Whether every date of `ledger` is in the same unit, and has the same first unit start at or after
    /// it, on this window's axis as on the day axis: its rows are then the same on both (they place
    /// everything by those dates), and its correction is only what `relabeled` moves. So it is for a
    /// subscription dated only in `[since, midnight s + 1]` read from the midnight after `since` (other than
    /// at `since` itself), or only in `[midnight u − 1, until]` read from the midnight before `until`.
    public func keepsUnits(of ledger: SubscriptionLedger) -> Bool {
        keepsUnits(dates: ledger.dates)
    }

    /// `keepsUnits(of:)` of a ledger with these `dates` (`SubscriptionLedger.dates`).
    func keepsUnits(dates: [Date]) -> Bool {
        dates.allSatisfy(keepsUnits)
    }

    /// Whether `date` is in the same unit, and has the same first unit start, on this window's axis as on
    /// the day axis.
    func keepsUnits(_ date: Date) -> Bool {
        let index = AnalyticsContributions.index(of: date, unit: Self.unit)
        let boundary = AnalyticsContributions.boundary(of: date, unit: Self.unit)
        return self.index(index, of: date) == index && self.boundary(boundary, of: date) == boundary
    }

    /// Whether `relabeled` can move a monthly cohort row of `ledger` (one counted from unit `u`), when its
    /// rows are the same on both axes (`keepsUnits(of:)`): only read to the midnight before `until`, and
    /// only from a date in `[midnight u − 1, midnight u]` (a unit `u − 1`, or a first unit start `u`).
    /// Otherwise each of those rows is added and taken out where it is, so they need not be written.
    public func movesMonthlyCohorts(of ledger: SubscriptionLedger) -> Bool {
        movesMonthlyCohorts(dates: ledger.dates)
    }

    func movesMonthlyCohorts(dates: [Date]) -> Bool {
        untilBefore && changesMonthlyCohorts(dates: dates)
    }

    /// Whether `ledger`'s monthly cohort rows (all but ARPU's paying rows) can count differently for this
    /// window on the two axes. A cohort read counts a row by its month and whether it counts from a unit
    /// at or before `u` (`SummaryQuery.cohortFigures(of:)`). Each row counts from a unit one of the
    /// ledger's dates gives (its unit plus one, or its first unit start), always after its month's first
    /// unit. On this window's axis a date in day `s` before `since` gives one unit less, which is still at
    /// or after that first unit and at or before `u`; so only a date in `[midnight u − 1, midnight u]` can
    /// move a row across `u` (on the axis, or by `relabeled` when read to the midnight before `until`).
    public func changesMonthlyCohorts(of ledger: SubscriptionLedger) -> Bool {
        changesMonthlyCohorts(dates: ledger.dates)
    }

    func changesMonthlyCohorts(dates: [Date]) -> Bool {
        // Unit `u − 1` and the first unit starts `u − 1`, `u`: the day holding unit `u − 1`, both midnights.
        let day = AnalyticsContributions.day(ofUnit: u - 1)
        let moments = midnight(day)...midnight(day + 1)
        return dates.contains { moments.contains($0) }
    }

    /// Whether `ledger` has a date in a part-day (`SubscriptionLedger.dates`).
    public func needsCorrection(_ ledger: SubscriptionLedger) -> Bool {
        needsCorrection(dates: ledger.dates)
    }

    func needsCorrection(dates: [Date]) -> Bool {
        let since = sincePart
        let until = untilPart
        return dates.contains { since?.contains($0) == true || until?.contains($0) == true }
    }

    func midnight(_ day: Int) -> Date { Date(timeIntervalSince1970: Double(day) * Self.unit) }

    /// The unit holding `moment` on this axis, from the one on the summaries' (`index`).
    func index(_ index: Int, of moment: Date) -> Int {
        if index == s, moment < since { return s - 1 }
        if index == u - 1, moment >= until { return u }
        return index
    }

    /// The first unit start at or after `moment` on this axis, from the one on the summaries' (`boundary`).
    func boundary(_ boundary: Int, of moment: Date) -> Int {
        if boundary == s + 1, moment <= since { return s }
        if boundary == u, moment > until { return u + 1 }
        return boundary
    }
}

/// A part-day of an `OffUnitWindow`: the moments from `lower` to `upper`, a bound that is a midnight left
/// out (the part runs from just after it, or to just before it), the window's own bound kept.
public struct PartDay: Sendable, Hashable {
    public let lower: Date
    public let upper: Date
    /// Whether `lower` (a midnight) is left out.
    public let afterLower: Bool

    /// Just after midnight `midnight` to `bound`.
    init(fromMidnight midnight: Date, to bound: Date) {
        lower = midnight
        upper = bound
        afterLower = true
    }

    /// `bound` to just before midnight `midnight`.
    init(from bound: Date, toMidnight midnight: Date) {
        lower = bound
        upper = midnight
        afterLower = false
    }

    public func contains(_ moment: Date) -> Bool {
        afterLower ? lower < moment && moment <= upper : lower <= moment && moment < upper
    }

    /// The whole milliseconds since 1970 in the part (the ledger's columns hold dates so): a window bound
    /// between two milliseconds keeps the one on its side, a midnight is left out.
    public var milliseconds: ClosedRange<Int64> {
        let lower = (self.lower.timeIntervalSince1970 * 1000).rounded(afterLower ? .down : .up)
        let upper = (self.upper.timeIntervalSince1970 * 1000).rounded(afterLower ? .down : .up)
        let from = Int64(lower) + (afterLower ? 1 : 0)
        let to = Int64(upper) - (afterLower ? 0 : 1)
        return from...max(from, to)
    }
}

extension SubscriptionLedger {
    /// Every date the rows of the subscription are placed by: each transaction's purchase, expiry,
    /// revocation and seat refund, each fact's start, end and statement (`EntitlementTimeline` bounds its
    /// spans by them). The store finds the subscriptions a window corrects by the same columns.
    public var dates: [Date] {
        var dates: [Date] = []
        dates.reserveCapacity(2 * transactions.count + 3 * facts.count)
        func add(_ date: Date?) {
            if let date { dates.append(date) }
        }
        for transaction in transactions {
            add(transaction.purchasedAt)
            add(transaction.expiresAt)
            add(transaction.revokedAt)
            add(transaction.seatsRevokedAt)
        }
        for fact in facts {
            add(fact.startsAt)
            add(fact.endsAt)
            add(fact.statedAt)
        }
        return dates
    }
}
