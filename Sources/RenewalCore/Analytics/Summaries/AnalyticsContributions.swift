import Foundation

/// One subscription's contribution rows: derived from its ledger and facts by the same definitions as
/// `SubscriptionAnalytics` (through `EntitlementTimeline` and its spans), so that for every window aligned
/// to `unit` the summed rows of every subscription give exactly the figures a full recomputation gives
/// (`SummaryQuery` folds them). docs/analytics.md, "How a window is answered fast", says why each figure
/// has the shape it has.
public struct AnalyticsContributions: Sendable {
    /// The unit windows are aligned to, in seconds: a UTC day unless a caller wants hours.
    public let unit: TimeInterval
    /// A window off unit starts whose bounds take the place of two unit starts (`OffUnitWindow`): the rows
    /// written on that axis answer that one window. Nil for the summaries' own rows.
    let window: OffUnitWindow?

    public init(unit: TimeInterval = 86_400) {
        self.unit = unit
        window = nil
    }

    /// The rows on the axis of `window`, whose unit is a day.
    init(window: OffUnitWindow) {
        unit = OffUnitWindow.unit
        self.window = window
    }

    /// The rows `ledger` contributes, each with its count (negative for a step down or a corner that
    /// subtracts). Empty for a subscription with no counted transaction or no known environment.
    public func rows(of ledger: SubscriptionLedger) -> [ContributionKey: Int] {
        guard let read = LedgerRead(ledger) else { return [:] }
        var builder = Builder(keys: read.keys)
        // About a dozen rows a transaction: sized once rather than grown (and rehashed) five times.
        builder.rows.reserveCapacity(12 * read.counted.count + 16)
        add(read, to: &builder)
        return builder.rows
    }

    /// Adds the rows of `read` on this axis to `builder` (times its `sign`).
    func add(_ read: LedgerRead, to builder: inout Builder) {
        let spans = unitSpans(of: read.timeline, spans: read.spans, pair: builder.pair?.window)
        let trialSpans = spans.filter { $0.kind == .trial }
        steps(spans, &builder)
        events(read.counted, first: read.first, &builder)
        funnel(read.counted, first: read.first, trialSpans: trialSpans, &builder)
        reactivations(read.counted, &builder)
        churn(read.counted, spans: spans, &builder)
        mrrMovement(read.counted, spans: spans, &builder)
        cohorts(read.timeline, spans: read.spans, trialSpans: trialSpans, &builder)
    }

    /// The unit index holding `moment` (an event at `moment` is in window `(s, u)` when `s ≤ it < u`).
    func index(of moment: Date) -> Int {
        let index = Self.index(of: moment, unit: unit)
        return window?.index(index, of: moment) ?? index
    }

    /// The first unit index whose start is at or after `moment`: a span `[a, b)` holds the start of unit
    /// `k` exactly when `boundary(a) ≤ k < boundary(b)`.
    func boundary(of moment: Date) -> Int {
        let boundary = Self.boundary(of: moment, unit: unit)
        return window?.boundary(boundary, of: moment) ?? boundary
    }

    /// The units of the axis: each day (`unit` seconds) holds three (docs/analytics.md, "Three units a
    /// day"). Unit `3n` is midnight `n` itself, unit `3n + 1` the inside of day `n` (it starts just after
    /// the midnight), unit `3n + 2` the instant just before midnight `n + 1` (no moment is in it). So a
    /// moment exactly on a midnight and one inside its day never share a unit nor a first unit start, and
    /// a window bound inside a day (`OffUnitWindow`) takes the place of a unit start without moving what
    /// is dated on the midnights around it.
    public static let unitsPerDay = 3

    /// The unit holding `moment` on the axis of days `unit` long: `3n` on midnight `n`, `3n + 1` inside day `n`.
    static func index(of moment: Date, unit: TimeInterval) -> Int {
        let (day, onMidnight) = Self.day(of: moment, unit: unit)
        return unitsPerDay * day + (onMidnight ? 0 : 1)
    }

    /// The first unit start at or after `moment`: `3n` on midnight `n`, `3n + 2` inside day `n`.
    static func boundary(of moment: Date, unit: TimeInterval) -> Int {
        let (day, onMidnight) = Self.day(of: moment, unit: unit)
        return unitsPerDay * day + (onMidnight ? 0 : 2)
    }

    /// The day holding `moment` (days `unit` long since 1970-01-01), and whether `moment` is its midnight.
    static func day(of moment: Date, unit: TimeInterval) -> (day: Int, onMidnight: Bool) {
        let days = moment.timeIntervalSince1970 / unit
        let day = days.rounded(.down)
        return (clamped(day), day == days)
    }

    /// The unit of midnight `day`.
    public static func unit(ofDay day: Int) -> Int { unitsPerDay * day }

    /// The day holding unit `unit` (`⌊unit / 3⌋`).
    public static func day(ofUnit unit: Int) -> Int {
        let (quotient, remainder) = unit.quotientAndRemainder(dividingBy: unitsPerDay)
        return remainder < 0 ? quotient - 1 : quotient
    }

    /// A unit index as an integer; a date beyond ±10^15 units (no real one is) is held there, not trapped on.
    static func clamped(_ units: Double) -> Int {
        Int(min(max(units.isNaN ? 0 : units, -1e15), 1e15))
    }

    /// Steps of the standing at a window bound: +1 where a span starts holding unit starts, −1 where it
    /// stops. Paid steps carry what MRR needs of the entitling transaction.
    private func steps(_ spans: [UnitSpan], _ builder: inout Builder) {
        let keys = builder.keys
        for span in spans {
            let transaction = span.transaction
            let key: (ContributionShape) -> ContributionKey
            if span.kind == .paid {
                key = { keys.key($0, .paid, transaction, factor: Self.paidSeats(transaction), period: true) }
            } else {
                key = { keys.key($0, .trial, productID: transaction.productID) }
            }
            builder.sameOnBothAxes(if: span.alike) { builder in
                builder.add(.step(span.start), 1, key)
                if let end = span.end { builder.add(.step(end), -1, key) }
            }
        }
    }

    /// Additive figures, by the unit of the moment they happened: revenue by purchase, refunds by refund
    /// (and seat refunds by when they were seen), new trials, new subscriptions and trial conversions.
    private func events(_ counted: [LedgerTransaction], first: LedgerTransaction, _ builder: inout Builder) {
        let keys = builder.keys
        for transaction in counted where !transaction.isTrial {
            if let purchased = transaction.purchasedAt {
                let factor = Decimal(max(transaction.quantity, 1))
                builder.add(.event(index(of: purchased)), 1) { keys.key($0, .revenue, transaction, factor: factor) }
            }
            if SubscriptionAnalytics.isRefund(transaction), let revoked = transaction.revokedAt {
                let share = transaction.revocationPercentage.map { Decimal($0) / 100_000 } ?? 1
                let seats = Decimal(transaction.quantity > 1 ? transaction.paidSeats : 1)
                builder.add(.event(index(of: revoked)), 1) { keys.key($0, .refund, transaction, factor: seats * share) }
            }
            if let seats = transaction.revokedSeatQuantity, seats > 0, let at = transaction.seatsRevokedAt {
                builder.add(.event(index(of: at)), 1) { keys.key($0, .refund, transaction, factor: Decimal(seats)) }
            }
        }
        if first.isTrial, let purchased = first.purchasedAt {
            builder.add(.event(index(of: purchased)), 1) { keys.key($0, .newTrial, productID: first.productID) }
        }
        if let firstPaid = counted.first(where: { !$0.isTrial }), let purchased = firstPaid.purchasedAt {
            let day = ContributionShape.event(index(of: purchased))
            builder.add(day, 1) { keys.key($0, .newSubscription, productID: firstPaid.productID) }
            if first.isTrial { builder.add(day, 1) { keys.key($0, .trialConversion, productID: firstPaid.productID) } }
        }
    }

    /// The seats a paid period's MRR counts: those still paid for of a multiseat purchase, else 1.
    static func paidSeats(_ transaction: LedgerTransaction) -> Decimal {
        Decimal(transaction.quantity > 1 ? transaction.paidSeats : 1)
    }
}

/// A span of the timeline on the unit axis: the unit starts it holds are `[start, end)`; `end` nil when
/// nothing recorded ends it.
struct UnitSpan {
    var start: Int
    var end: Int?
    var kind: EntitlementSpan.Kind
    var transaction: LedgerTransaction
    /// In a correction's two passes: whether both ends are in the same units on both axes (so is the span;
    /// `Builder.sameOnBothAxes`). True outside one.
    var alike = true
}

extension AnalyticsContributions {
    /// The timeline's spans (`spans`, as `timeline.spans` gives them) on the unit axis, oldest first,
    /// leaving out those that hold no unit start; `pair` the window of a correction's other axis.
    func unitSpans(
        of timeline: EntitlementTimeline, spans: [EntitlementSpan], pair: OffUnitWindow? = nil
    ) -> [UnitSpan] {
        spans.compactMap { span in
            let start = boundary(of: span.startsAt)
            let end = span.endsAt.map(boundary(of:))
            guard end.map({ $0 > start }) ?? true,
                let transaction = timeline.transactions.last(where: { $0.transactionID == span.transactionID })
            else { return nil }
            let alike = pair.map { pair in pair.keepsUnits(span.startsAt) && span.endsAt.map(pair.keepsUnits) != false }
            return UnitSpan(
                start: start, end: end, kind: span.kind, transaction: transaction, alike: alike ?? true)
        }
    }
}

/// What the rows of one subscription are computed from, whatever the axis: its timeline (the spans are
/// worked out on each read of `spans`, so once here) and its counted transactions.
struct LedgerRead {
    let keys: RowKeys
    let timeline: EntitlementTimeline
    let spans: [EntitlementSpan]
    let counted: [LedgerTransaction]
    let first: LedgerTransaction

    /// Nil for a subscription with no known environment or no counted transaction: it has no rows.
    init?(_ ledger: SubscriptionLedger) {
        guard let environment = ledger.environment else { return nil }
        timeline = ledger.timeline(in: environment)
        counted = timeline.transactions
        guard let first = counted.first else { return nil }
        self.first = first
        spans = timeline.spans
        keys = RowKeys(bundleID: ledger.bundleID, environment: environment)
    }
}

/// Collects one subscription's rows: times `sign` (a correction takes one axis's rows out and puts the
/// other's in), moved by `relabel` when given, and only those `reads` selects when it is given.
struct Builder {
    let keys: RowKeys
    var rows: [ContributionKey: Int] = [:]
    var sign = 1
    var reads: SummaryQuery.Reads?
    /// The window whose read days the rows are moved from (`OffUnitWindow.relabeled`), when not its own.
    var relabel: OffUnitWindow?
    /// A window whose axis gives these same rows: each is added, and taken out where that window's
    /// `relabeled` moves it (nothing when it stays).
    var mirror: OffUnitWindow?
    /// Whether the monthly cohort rows are written (all but ARPU's paying rows): a correction leaves them
    /// out where they would cancel (`OffUnitWindow.movesMonthlyCohorts(of:)`).
    var monthlyCohorts = true
    /// In a correction worked out on both axes (not `mirror`): the window whose axis is the other one, and
    /// whether this pass is the day axis's (`sameOnBothAxes`).
    var pair: (window: OffUnitWindow, daysAxis: Bool)?
    /// How many keys reached `add`: the work of building them, which a correction keeps down.
    var keysBuilt = 0

    /// Whether `moment` has the same unit and first unit start on both axes of a correction's two passes
    /// (always outside one).
    func unmoved(_ moment: Date?) -> Bool {
        guard let pair, let moment else { return true }
        return pair.window.keepsUnits(moment)
    }

    /// Adds the rows `body` adds, rows whose keys depend on the axis only through the units of moments the
    /// caller found `unmoved` (`alike`): the same rows on both axes, so in a correction's two passes they
    /// are added once, on the day axis's, the way `mirror` adds them (each where it is, less where the
    /// window's `relabeled` moves it), and not worked out on the window's. Most rows of a corrected
    /// subscription are so (its renewals' dates are in the part-day, its first purchase is not).
    mutating func sameOnBothAxes(if alike: Bool, _ body: (inout Builder) -> Void) {
        guard alike, let pair else { return body(&self) }
        guard pair.daysAxis else { return }
        let (sign, relabel, mirror) = (self.sign, self.relabel, self.mirror)
        (self.sign, self.relabel, self.mirror) = (1, nil, pair.window)
        body(&self)
        (self.sign, self.relabel, self.mirror) = (sign, relabel, mirror)
    }

    mutating func add(_ key: ContributionKey, _ count: Int) {
        keysBuilt += 1
        if let mirror {
            let moved = mirror.relabeled(key)
            // Only a day change row is moved by more than its shape (`OffUnitWindow.relabeledChange`).
            guard moved.shape != key.shape || (key.figure == .mrrChange && moved != key) else { return }
            keep(key, sign * count)
            keep(moved, -sign * count)
            return
        }
        keep(relabel?.relabeled(key) ?? key, sign * count)
    }

    /// `add(key(shape), count)`, the key built only when the row is kept (`keeps(_:monthlyCohort:)`): a
    /// correction drops most of a subscription's rows, and building their keys was much of its cost.
    /// `monthlyCohort` for a cohort row other than ARPU's paying rows (`relabeled` moves those by their own
    /// rule).
    mutating func add(
        _ shape: ContributionShape, _ count: Int, monthlyCohort: Bool = false,
        _ key: (ContributionShape) -> ContributionKey
    ) {
        if keeps(shape, monthlyCohort: monthlyCohort) { add(key(shape), count) }
    }

    /// Whether `add` keeps anything of a row of `shape`.
    func keeps(_ shape: ContributionShape, monthlyCohort: Bool = false) -> Bool {
        if let mirror {
            let moved = mirror.relabeled(shape, monthlyCohort: monthlyCohort)
            return moved != shape && (selects(shape) || selects(moved))
        }
        return selects(relabel?.relabeled(shape, monthlyCohort: monthlyCohort) ?? shape)
    }

    private func selects(_ shape: ContributionShape) -> Bool {
        reads?.selects(shape) ?? true
    }

    private mutating func keep(_ key: ContributionKey, _ count: Int) {
        if !selects(key.shape) { return }
        AnalyticsSummary.add(count, to: key, in: &rows)
    }

    /// The corners of the rectangle `since ∈ [sinceFrom, sinceTo)`, `until ∈ [untilFrom, untilTo)` (nil: no
    /// upper bound); nothing when it is empty.
    mutating func rectangle(
        _ key: (ContributionShape) -> ContributionKey, since sinceFrom: Int, _ sinceTo: Int, until untilFrom: Int,
        _ untilTo: Int?
    ) {
        guard sinceFrom < sinceTo, untilTo.map({ untilFrom < $0 }) ?? true else { return }
        add(.corner(since: sinceFrom, until: untilFrom), 1, key)
        add(.corner(since: sinceTo, until: untilFrom), -1, key)
        if let untilTo {
            add(.corner(since: sinceFrom, until: untilTo), -1, key)
            add(.corner(since: sinceTo, until: untilTo), 1, key)
        }
    }
}

/// The keys of one subscription's rows: its app and environment, and what each figure keeps.
struct RowKeys {
    var bundleID: String?
    var environment: AppStoreEnvironment

    func key(_ shape: ContributionShape, _ figure: ContributionFigure, productID: String?) -> ContributionKey {
        ContributionKey(
            shape: shape, figure: figure, bundleID: bundleID, environment: environment, productID: productID)
    }

    /// A money row or paid step of `transaction`: its price as the ledger holds it, and (for MRR) the
    /// period its dates give.
    func key(
        _ shape: ContributionShape, _ figure: ContributionFigure, _ transaction: LedgerTransaction,
        factor: Decimal, period: Bool = false
    ) -> ContributionKey {
        ContributionKey(
            shape: shape, figure: figure, bundleID: bundleID, environment: environment,
            productID: transaction.productID,
            price: PriceSource(milliunits: transaction.priceMilliunits, currency: transaction.currency),
            period: period ? BillingPeriod.inferred(from: transaction.purchasedAt, to: transaction.expiresAt) : nil,
            factor: factor)
    }
}
