import Foundation

/// A window whose bounds need not be UTC midnights, answered from the day summaries (docs/analytics.md,
/// "A window off midnights"). `s` is the day holding `since` and `u` the first midnight at or after
/// `until`. The summaries answer `[s, u)` in days, which differs from `[since, until)` only for the
/// subscriptions with something dated in the two part-days `[midnight s, since]` and
/// `[until, midnight u]`. Each of those is corrected: its rows on the day axis taken out, its rows on
/// this window's axis put in. On that axis `since` takes the place of midnight `s` and `until` that of
/// midnight `u`, every other unit start being a midnight, so "at or after `since`" is "in unit `s` or
/// later" and "before `until`" is "in a unit before `u`": the rows, folded for `(s, u)`, are exactly the
/// subscription's figures for `[since, until)`, the days of `mrr_movement_daily` clipped to the window.
public struct OffUnitWindow: Sendable, Hashable {
    static let unit: TimeInterval = 86_400
    public let since: Date
    public let until: Date
    public let s: Int
    public let u: Int
    /// Whether the summaries are read from the midnight after `since` (`s + 1`) rather than the one before:
    /// the part-day on that side is then `[since, midnight s + 1]`. The answer is the same; the
    /// subscriptions to correct are those dated in the chosen part.
    public let sinceAfter: Bool
    /// Whether the summaries are read to the midnight before `until` (`u − 1`): the part-day is then
    /// `[midnight u − 1, until]`.
    public let untilBefore: Bool

    /// Nil unless `since` is before `until`. The part-days are `[midnight s, since]` and
    /// `[until, midnight u]`.
    public init?(since: Date, until: Date) {
        guard since < until else { return nil }
        self.since = since
        self.until = until
        let days = AnalyticsContributions(unit: Self.unit)
        s = days.index(of: since)
        u = days.boundary(of: until)
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

    /// The same window read from the other midnight on either side; nil when a bound on that side is a
    /// midnight (it has no part-day) or the days read would not be a window (`readS < readU`).
    public func reading(sinceAfter: Bool, untilBefore: Bool) -> OffUnitWindow? {
        guard !sinceAfter || start(of: s) < since, !untilBefore || until < start(of: u) else { return nil }
        let window = OffUnitWindow(self, sinceAfter: sinceAfter, untilBefore: untilBefore)
        return window.readS < window.readU ? window : nil
    }

    /// The days the summaries are read for: `(s, u)`, or the midnight after `since` and before `until`.
    public var readS: Int { sinceAfter ? s + 1 : s }
    public var readU: Int { untilBefore ? u - 1 : u }

    /// Both bounds are midnights: the summaries answer without a correction.
    public var isAligned: Bool { start(of: s) == since && start(of: u) == until }

    /// The part-days, each closed, the empty ones left out: a subscription with nothing dated in them has
    /// the same figures for the window as for the days read.
    public var parts: [ClosedRange<Date>] {
        [sincePart, untilPart].compactMap { $0 }
    }

    /// The part-day on `since`'s side: `[midnight s, since]`, or `[since, midnight s + 1]` read from the
    /// midnight after; nil when `since` is a midnight.
    public var sincePart: ClosedRange<Date>? { sincePart(after: sinceAfter) }

    /// The part-day on `until`'s side: `[until, midnight u]`, or `[midnight u − 1, until]`.
    public var untilPart: ClosedRange<Date>? { untilPart(before: untilBefore) }

    /// The part-day on `since`'s side when read from the midnight after `since` (`after`) or before it.
    public func sincePart(after: Bool) -> ClosedRange<Date>? {
        guard start(of: s) < since else { return nil }
        return after ? since...start(of: s + 1) : start(of: s)...since
    }

    /// The part-day on `until`'s side when read from the midnight before `until` (`before`) or after it.
    public func untilPart(before: Bool) -> ClosedRange<Date>? {
        guard until < start(of: u) else { return nil }
        return before ? start(of: u - 1)...until : until...start(of: u)
    }

    /// A row of the day axis read for `(readS, readU)`, moved where the window's reads for `(s, u)` select it
    /// exactly then (`SummaryQuery.Reads`, the daily MRR changes by their day): with `sinceAfter` what
    /// happened on day `s` falls before the window and a standing from `s + 1` holds at `since`; with
    /// `untilBefore` day `u − 1` falls after it and a standing from `u` does not hold at `until`. Cohort
    /// rows depend on `until` only: one counted from `u` moves after it. Unchanged when reading `(s, u)`.
    public func relabeled(_ key: ContributionKey) -> ContributionKey {
        guard sinceAfter || untilBefore else { return key }
        var key = key
        key.shape = relabeled(key.shape, monthlyCohort: key.figure.isCohort && key.figure != .payingInWindow)
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
        dates.allSatisfy { date in
            let units = date.timeIntervalSince1970 / Self.unit
            let index = AnalyticsContributions.clamped(units.rounded(.down))
            let boundary = AnalyticsContributions.clamped(units.rounded(.up))
            return self.index(index, of: date) == index && self.boundary(boundary, of: date) == boundary
        }
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
        let day = start(of: u - 1)...start(of: u)
        return dates.contains { day.contains($0) }
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

    func start(of unit: Int) -> Date { Date(timeIntervalSince1970: Double(unit) * Self.unit) }

    /// The unit holding `moment` on this axis, from the day holding it (`index`).
    func index(_ index: Int, of moment: Date) -> Int {
        if index == s, moment < since { return s - 1 }
        if index == u - 1, moment >= until { return u }
        return index
    }

    /// The first unit start at or after `moment` on this axis, from the first midnight (`boundary`).
    func boundary(_ boundary: Int, of moment: Date) -> Int {
        if boundary == s + 1, moment <= since { return s }
        if boundary == u, moment > until { return u + 1 }
        return boundary
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
