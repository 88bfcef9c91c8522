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

    public init(start: MRRStanding?, end: MRRStanding?, paidBefore: Bool) {
        self.start = start
        self.end = end
        self.paidBefore = start == nil && end != nil && paidBefore
    }
}

/// MRR movement as rows. A subscription's standing at the start of each unit is a step function: a
/// list of **pieces**, the runs of unit starts with one standing (adjacent spans with equal standings
/// joined, trials and gaps alike not paid), the first from "always", the last open. The window `(s, u)`
/// compares the piece holding `s` with the one holding `u` (`MRRMovementSeries` asks the standings at
/// `since` and `until`), so for each pair of pieces `i < j` with different standings the rectangle
/// `s ∈ piece i`, `u ∈ piece j` counts the pair, split where `paidBefore` turns true. A day `[d, d + 1)`
/// moves only where one piece follows another at `d + 1`: an event on day `d`.
extension AnalyticsContributions {
    func mrrMovement(_ counted: [LedgerTransaction], spans: [UnitSpan], _ builder: inout Builder) {
        let pieces = Self.mrrPieces(spans)
        guard pieces.count > 1 else { return }
        // paidBefore(s) holds when the first paid period was purchased before unit s starts.
        let firstPaid = counted.first { !$0.isTrial }?.purchasedAt.map(index(of:))
        let keys = builder.keys
        for (before, after) in zip(pieces, pieces.dropFirst()) {
            let day = after.start - 1
            builder.add(.event(day), 1) { shape in
                let ends = MovementEnds(
                    start: before.standing, end: after.standing, paidBefore: firstPaid.map { $0 < day } ?? false)
                return keys.key(shape, .mrrChange, ends)
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
