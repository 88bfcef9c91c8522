import Foundation

/// A paid standing as MRR movement rows keep it: what the query needs to price it with the catalogue
/// (the product, the price as the ledger holds it, the period the transaction's dates give, the seats
/// still paid for), the same attributes a paid step keeps. Not paid (a trial, a gap) is nil.
public struct MRRStanding: Sendable, Hashable {
    public var productID: String?
    public var price: PriceSource
    public var period: BillingPeriod?
    public var factor: Decimal

    public init(productID: String?, price: PriceSource, period: BillingPeriod?, factor: Decimal) {
        self.productID = productID
        self.price = price
        self.period = period
        self.factor = factor
    }

    init(_ transaction: LedgerTransaction) {
        self.init(
            productID: transaction.productID,
            price: PriceSource(milliunits: transaction.priceMilliunits, currency: transaction.currency),
            period: BillingPeriod.inferred(from: transaction.purchasedAt, to: transaction.expiresAt),
            factor: AnalyticsContributions.paidSeats(transaction))
    }
}

/// What an MRR movement row compares: the standing at the start and at the end of a window (or a day),
/// and whether a paid period was purchased before the start (`MRRMovement.classify`'s `paidBefore`).
/// `paidBefore` only tells new from reactivation, so it is kept only for a row from not paid to paid;
/// every other row has it false, which keeps the rows few.
public struct MovementEnds: Sendable, Hashable {
    public var start: MRRStanding?
    public var end: MRRStanding?
    public var paidBefore: Bool
    /// A day's change from not paid to paid whose subscription's first paid purchase is on that day before
    /// the change: that purchase's unit within the day (0 its midnight, 1 inside it). Whether it was before
    /// the day's start depends on where a window reads the day from (its midnight, or `since` inside it),
    /// so the read decides `paidBefore` (`read(onDay:from:)`). Nil otherwise.
    public var paidAt: Int?
    /// One of the rows that join a day's two changes, inside it and at its end, into the one change a
    /// read of both sees (`AnalyticsContributions.mrrMovement`); false for the changes themselves.
    public var joined: Bool

    public init(start: MRRStanding?, end: MRRStanding?, paidBefore: Bool, paidAt: Int? = nil, joined: Bool = false) {
        self.start = start
        self.end = end
        let new = start == nil && end != nil
        self.paidBefore = new && paidBefore
        self.paidAt = new ? paidAt : nil
        self.joined = joined
    }
}

extension MovementEnds {
    /// These ends as a read of day `day` from unit `from` (its midnight, or `since`'s unit inside it) sees
    /// them: `paidAt` decided, the joined mark dropped, so the day's rows add up per change.
    func read(onDay day: Int, from: Int) -> MovementEnds {
        guard paidAt != nil || joined else { return self }
        let dayStart = AnalyticsContributions.unit(ofDay: day)
        let before = paidBefore || paidAt.map { dayStart + $0 < from } ?? false
        return MovementEnds(start: start, end: end, paidBefore: before)
    }
}

/// MRR movement as rows. A subscription's standing at the start of each unit is a step function: a
/// list of **pieces**, the runs of unit starts with one standing (adjacent spans with equal standings
/// joined, trials and gaps alike not paid), the first from "always", the last open. The window `(s, u)`
/// compares the piece holding `s` with the one holding `u` (`MRRMovementSeries` asks the standings at
/// `since` and `until`), so for each pair of pieces `i < j` with different standings the rectangle
/// `s ∈ piece i`, `u ∈ piece j` counts the pair, split where `paidBefore` turns true.
///
/// A day `n` (units `3n` to `3n + 3`) moves where one piece follows another at unit `k`: an event on unit
/// `k − 1`. On the summaries' axis a piece begins only on a midnight (`3n`) or just before one (`3n + 2`),
/// so a day holds at most two changes: one inside it (event `3n + 1`) and one at its end (event `3n + 2`).
/// A read of the whole day, or of the day from `since` on, takes both and must see the one change from
/// its start to its end; so where a day has both, three **joined** rows on event `3n + 2` turn their sum
/// into that change (the joined change, less each of the two). A read of part of the day takes one event.
extension AnalyticsContributions {
    func mrrMovement(_ counted: [LedgerTransaction], spans: [UnitSpan], _ builder: inout Builder) {
        let pieces = Self.mrrPieces(spans)
        guard pieces.count > 1 else { return }
        // paidBefore(s) holds when the first paid period was purchased before unit s starts.
        let firstPaid = counted.first { !$0.isTrial }?.purchasedAt.map(index(of:))
        let keys = builder.keys
        let changes = zip(pieces, pieces.dropFirst()).map { (unit: $1.start - 1, from: $0.standing, to: $1.standing) }
        for (position, change) in changes.enumerated() {
            Self.addChange(change.unit, from: change.from, to: change.to, firstPaid: firstPaid, keys, &builder)
            let day = Self.day(ofUnit: change.unit)
            guard change.unit == Self.unit(ofDay: day) + 2, position > 0 else { continue }
            let inside = changes[position - 1]
            guard inside.unit == change.unit - 1 else { continue }
            for (from, to, decidedAt, count) in [
                (inside.from, change.to, inside.unit, 1), (inside.from, inside.to, inside.unit, -1),
                (change.from, change.to, change.unit, -1),
            ] where count < 0 || from != to {
                Self.addChange(
                    change.unit, from: from, to: to, firstPaid: firstPaid, keys, &builder, decidedAt: decidedAt,
                    joined: count)
            }
        }
        for i in pieces.indices {
            guard let x1 = pieces[i].end else { continue }
            let x0 = pieces[i].start
            for j in (i + 1)..<pieces.count where pieces[j].standing != pieces[i].standing {
                let (start, end) = (pieces[i].standing, pieces[j].standing)
                let (y0, y1) = (pieces[j].start, pieces[j].end)
                // From unit firstPaid + 1 on, a paid period was purchased before s.
                let split = firstPaid.map { Swift.min(Swift.max($0 + 1, x0), x1) } ?? x1
                let early = MovementEnds(start: start, end: end, paidBefore: false)
                let late = MovementEnds(start: start, end: end, paidBefore: true)
                builder.rectangle({ keys.key($0, .mrrMovement, early) }, since: x0, split, until: y0, y1)
                builder.rectangle({ keys.key($0, .mrrMovement, late) }, since: split, x1, until: y0, y1)
            }
        }
    }

    /// The change event on `unit` from `from` to `to`. `paidBefore` is whether the first paid purchase
    /// (unit `firstPaid`) is before the day's start; when it is on the day before the change (`decidedAt`,
    /// the change's own unit unless joined), the row keeps where (`MovementEnds.paidAt`). `joined`: the
    /// count of a joined row, 0 for the change itself.
    private static func addChange(
        _ unit: Int, from: MRRStanding?, to: MRRStanding?, firstPaid: Int?, _ keys: RowKeys,
        _ builder: inout Builder, decidedAt: Int? = nil, joined: Int = 0
    ) {
        let dayStart = Self.unit(ofDay: Self.day(ofUnit: unit))
        let decided = decidedAt ?? unit
        let paidAt = firstPaid.flatMap { $0 >= dayStart && $0 < decided ? $0 - dayStart : nil }
        let ends = MovementEnds(
            start: from, end: to, paidBefore: firstPaid.map { $0 < dayStart } ?? false, paidAt: paidAt,
            joined: joined != 0)
        guard ends.paidAt != nil || ends.joined else {
            builder.add(.event(unit), 1) { keys.key($0, .mrrChange, ends) }
            return
        }
        // `OffUnitWindow.relabeled` may move these rows by their ends, not only their shape.
        builder.add(keys.key(.event(unit), .mrrChange, ends), joined == 0 ? 1 : joined)
    }

    /// The pieces of the standing at unit starts, oldest first: from `ContributionShape.always` to the
    /// first span (not paid), each span's standing, gaps (not paid), and after the last span (not paid,
    /// open), with adjacent equal standings joined. Every piece but the last has an end.
    static func mrrPieces(_ spans: [UnitSpan]) -> [(start: Int, end: Int?, standing: MRRStanding?)] {
        var pieces: [(start: Int, end: Int?, standing: MRRStanding?)] = [(ContributionShape.always, nil, nil)]
        func begin(_ start: Int, _ standing: MRRStanding?) {
            // A piece of no units (a span ending where the next starts) goes; the one before reopens.
            if pieces.count > 1, pieces[pieces.count - 1].start == start {
                pieces.removeLast()
                pieces[pieces.count - 1].end = nil
            }
            if pieces[pieces.count - 1].standing == standing { return }
            pieces[pieces.count - 1].end = start
            pieces.append((start, nil, standing))
        }
        for span in spans.sorted(by: { $0.start < $1.start }) {
            begin(span.start, span.kind == .paid ? MRRStanding(span.transaction) : nil)
            guard let end = span.end else { break }
            begin(end, nil)
        }
        return pieces
    }
}

extension RowKeys {
    /// An MRR movement row: the ends it compares, no product of its own (each end has its own).
    func key(_ shape: ContributionShape, _ figure: ContributionFigure, _ ends: MovementEnds) -> ContributionKey {
        ContributionKey(
            shape: shape, figure: figure, bundleID: bundleID, environment: environment, productID: nil,
            movement: ends)
    }
}
