import Foundation

/// How MRR moved between two moments, per currency: each subscription's change from its MRR at the start
/// to its MRR at the end falls in exactly one bucket (or, when its currency changed, is split in two), so
/// `new + expansion + contraction + churned + reactivation` equals MRR at the end minus MRR at the start in
/// every currency, by construction. Contraction and churned are negative (MRR lost); the others positive.
public struct MRRMovement: Sendable, Hashable {
    public enum Bucket: String, Sendable, CaseIterable {
        case new, expansion, contraction, churned, reactivation
    }

    /// A subscription's MRR at one moment: whether it was paid and entitled, and its MRR then (nil when
    /// not paid, or paid without a price from Apple or the catalogue, which MRR leaves out).
    public struct Point: Sendable, Hashable {
        public var paid: Bool
        public var mrr: Money?

        public init(paid: Bool, mrr: Money?) {
            self.paid = paid
            self.mrr = mrr
        }

        public static let none = Point(paid: false, mrr: nil)
    }

    public private(set) var buckets: [Bucket: Amounts] = [:]
    /// MRR at the start and at the end, summed like the buckets.
    public internal(set) var atStart = Amounts()
    public internal(set) var atEnd = Amounts()

    public init() {}

    public subscript(bucket: Bucket) -> Amounts { buckets[bucket] ?? Amounts() }

    /// The sum of the buckets: MRR at the end less MRR at the start.
    public var net: Amounts {
        var net = Amounts()
        for amounts in buckets.values { net.add(amounts) }
        return net
    }

    /// Adds one subscription's change from `start` to `end`. `paidBefore`: it had a paid period purchased
    /// before the start, so MRR coming back from nothing is a reactivation rather than new.
    public mutating func add(from start: Point, to end: Point, paidBefore: Bool) {
        if let mrr = start.mrr { atStart.add(mrr) }
        if let mrr = end.mrr { atEnd.add(mrr) }
        addChange(from: start, to: end, paidBefore: paidBefore)
    }

    /// The buckets only, without MRR at the start and end.
    mutating func addChange(from start: Point, to end: Point, paidBefore: Bool) {
        for (bucket, money) in Self.classify(from: start, to: end, paidBefore: paidBefore) {
            buckets[bucket, default: Amounts()].add(money)
        }
    }

    public mutating func add(_ other: MRRMovement) {
        for (bucket, amounts) in other.buckets { buckets[bucket, default: Amounts()].add(amounts) }
        atStart.add(other.atStart)
        atEnd.add(other.atEnd)
    }

    /// The buckets of one subscription's change, each amount signed as it moves MRR:
    /// - not paid at the start, paid at the end: `new` (no paid period before the start) or `reactivation`;
    /// - paid at the start, not at the end: `churned`, minus its MRR at the start;
    /// - paid at both, same currency: the difference, `expansion` when positive, `contraction` when
    ///   negative, nothing when equal; in another currency (a storefront change), `contraction` of the old
    ///   MRR in its currency and `expansion` of the new one in its own (a priced period after an unpriced
    ///   one is likewise expansion; an unpriced one after a priced one, contraction).
    public static func classify(from start: Point, to end: Point, paidBefore: Bool) -> [(Bucket, Money)] {
        switch (start.paid, end.paid) {
        case (false, false): return []
        case (false, true):
            guard let mrr = end.mrr else { return [] }
            return [(paidBefore ? .reactivation : .new, mrr)]
        case (true, false):
            guard let mrr = start.mrr else { return [] }
            return [(.churned, negated(mrr))]
        case (true, true):
            switch (start.mrr, end.mrr) {
            case (nil, nil): return []
            case (nil, let after?): return [(.expansion, after)]
            case (let before?, nil): return [(.contraction, negated(before))]
            case (let before?, let after?):
                guard before.currency == after.currency else {
                    return [(.contraction, negated(before)), (.expansion, after)]
                }
                let change = after.amount - before.amount
                if change == 0 { return [] }
                return [(change > 0 ? .expansion : .contraction, Money(currency: after.currency, amount: change))]
            }
        }
    }

    static func negated(_ money: Money) -> Money { Money(currency: money.currency, amount: -money.amount) }
}

/// MRR movement over a window `[since, until)` and over each UTC day of it (the first and last day clipped
/// to the window, so the days' nets add up to the window's), one subscription at a time.
///
/// The window's buckets compare its two ends, as `churned` does: a subscription that churned on the 3rd
/// and came back on the 10th moves nothing in the window (or expands or contracts), but churns and
/// reactivates in the days.
public struct MRRMovementSeries: Sendable {
    public let since: Date
    public let until: Date
    /// `since`, each UTC midnight strictly inside the window, `until`.
    public let boundaries: [Date]
    public private(set) var window = MRRMovement()
    /// Per day, the buckets only: a day's MRR at its start and end follow from the window's start and the
    /// days' nets, so a subscription whose MRR did not move that day costs nothing.
    private var changes: [MRRMovement]
    /// Per currency: subscriptions paid, entitled and priced at `until` (ARPU's denominator).
    public private(set) var payingAtUntil: [String: Int] = [:]

    public init(since: Date, until: Date) {
        self.since = since
        self.until = until
        var boundaries = [since]
        var midnight = DailyAnalytics.dayStart(of: since).addingTimeInterval(86_400)
        while midnight < until {
            boundaries.append(midnight)
            midnight = midnight.addingTimeInterval(86_400)
        }
        if until > since { boundaries.append(until) }
        self.boundaries = boundaries
        changes = Array(repeating: MRRMovement(), count: max(boundaries.count - 1, 0))
    }

    /// One per day: `[boundaries[i], boundaries[i + 1])`, with MRR at its start and end.
    public var days: [MRRMovement] {
        var start = window.atStart
        return changes.map { change in
            var day = change
            day.atStart = start
            start.add(change.net)
            day.atEnd = start
            return day
        }
    }

    /// The UTC day (`YYYY-MM-DD`) of each of `days`.
    public var dayNames: [String] {
        boundaries.dropLast().map { DailyAnalytics.name(of: DailyAnalytics.dayStart(of: $0)) }
    }

    /// Adds one subscription. `monthly`: the MRR of a paid period (nil when unpriced). The standing is
    /// asked only at boundaries with an event of the subscription since the previous one: between events
    /// it cannot change.
    public mutating func add(_ timeline: EntitlementTimeline, monthly: (LedgerTransaction) -> Money?) {
        guard boundaries.count > 1, !timeline.transactions.isEmpty else { return }
        let events = Self.events(of: timeline)
        let firstPaid = timeline.transactions.first { !$0.isTrial }?.purchasedAt
        // The same period usually holds at many boundaries: its MRR is worked out once.
        var last: (id: String, mrr: Money?)?
        func point(_ moment: Date) -> MRRMovement.Point {
            guard case .paid(let transaction, _) = timeline.standing(at: moment) else { return .none }
            if let last, last.id == transaction.transactionID { return MRRMovement.Point(paid: true, mrr: last.mrr) }
            let mrr = monthly(transaction)
            last = (transaction.transactionID, mrr)
            return MRRMovement.Point(paid: true, mrr: mrr)
        }
        let first = point(boundaries[0])
        var previous = first
        var next = events.partitioningIndex { $0 > boundaries[0] }
        for index in 1..<boundaries.count {
            let boundary = boundaries[index]
            var current = previous
            if next < events.count, events[next] <= boundary {
                current = point(boundary)
                while next < events.count, events[next] <= boundary { next += 1 }
            }
            if current != previous {
                let start = boundaries[index - 1]
                changes[index - 1].addChange(
                    from: previous, to: current, paidBefore: firstPaid.map { $0 < start } ?? false)
            }
            previous = current
        }
        window.add(from: first, to: previous, paidBefore: firstPaid.map { $0 < since } ?? false)
        if let mrr = previous.mrr { payingAtUntil[mrr.currency, default: 0] += 1 }
    }

    /// Every moment the subscription's standing can change at, sorted: purchases, expiries, revocations,
    /// and the dates of its facts (grace periods, reversed refunds, extensions).
    static func events(of timeline: EntitlementTimeline) -> [Date] {
        var moments: [Date] = []
        for transaction in timeline.transactions {
            moments += [transaction.purchasedAt, transaction.expiresAt, transaction.revokedAt].compactMap { $0 }
        }
        for (fact, _) in timeline.graces { moments += [fact.startsAt, fact.endsAt].compactMap { $0 } }
        for spans in timeline.gaps.values {
            for span in spans { moments += [span.lowerBound, span.upperBound] }
        }
        return moments.sorted()
    }
}

extension Array where Element == Date {
    /// The index of the first element for which `belongs` holds, in an array where it holds for a suffix.
    fileprivate func partitioningIndex(where belongs: (Date) -> Bool) -> Int {
        var low = 0
        var high = count
        while low < high {
            let middle = (low + high) / 2
            if belongs(self[middle]) { high = middle } else { low = middle + 1 }
        }
        return low
    }
}
