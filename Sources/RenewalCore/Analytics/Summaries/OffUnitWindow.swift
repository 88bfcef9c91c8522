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

    /// Nil unless `since` is before `until`.
    public init?(since: Date, until: Date) {
        guard since < until else { return nil }
        self.since = since
        self.until = until
        let days = AnalyticsContributions(unit: Self.unit)
        s = days.index(of: since)
        u = days.boundary(of: until)
    }

    /// Both bounds are midnights: the summaries answer without a correction.
    public var isAligned: Bool { start(of: s) == since && start(of: u) == until }

    /// The part-days, each closed, the empty ones left out: a subscription with nothing dated in them has
    /// the same rows on both axes.
    public var parts: [ClosedRange<Date>] {
        var parts: [ClosedRange<Date>] = []
        if start(of: s) < since { parts.append(start(of: s)...since) }
        if until < start(of: u) { parts.append(until...start(of: u)) }
        return parts
    }

    /// Whether `ledger` has a date in a part-day (`SubscriptionLedger.dates`).
    public func needsCorrection(_ ledger: SubscriptionLedger) -> Bool {
        let parts = parts
        return ledger.dates.contains { date in parts.contains { $0.contains(date) } }
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
        transactions.flatMap { [$0.purchasedAt, $0.expiresAt, $0.revokedAt, $0.seatsRevokedAt].compactMap { $0 } }
            + facts.flatMap { [$0.startsAt, $0.endsAt, $0.statedAt].compactMap { $0 } }
    }
}
